// Every call the runtime makes to the store is bounded: the Store interface takes no AbortSignal,
// so the runtime stops *waiting* after a deadline measured on the injected clock. The call itself
// may still complete later; callers must therefore only use calls whose late completion is
// harmless (reads, or writes they re-check), which is the case for everything in runtime/.
import type { Clock } from "./clock.ts";
import { onAbort } from "./abort-fanout.ts";

export class DeadlineExceededError extends Error {
  override readonly name = "DeadlineExceededError";
  constructor(
    readonly what: string,
    readonly ms: number,
  ) {
    super(`${what} did not complete within ${ms} ms`);
  }
}

/** `promise`, or a DeadlineExceededError after `ms` (or the signal's reason if it aborts first). */
export function withDeadline<T>(
  promise: Promise<T>,
  ms: number,
  clock: Clock,
  what: string,
  signal?: AbortSignal,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) {
      promise.catch(() => {}); // settled later or never; nobody waits for it any more
      reject(signal.reason);
      return;
    }
    const timer = clock.setTimer(ms, () => {
      cleanup();
      reject(new DeadlineExceededError(what, ms));
    });
    function abortWait() {
      cleanup();
      reject(signal?.reason);
    }
    // One listener per signal however many calls wait on it (abort-fanout.ts).
    const unsubscribe = signal ? onAbort(signal, abortWait) : () => {};
    const cleanup = () => {
      timer.cancel();
      unsubscribe();
    };
    promise.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (e: unknown) => {
        cleanup();
        reject(e);
      },
    );
  });
}
