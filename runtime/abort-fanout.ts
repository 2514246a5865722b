// One abort listener per signal, however many waiters: `onAbort(signal, fn)` is
// `signal.addEventListener("abort", fn, { once: true })` with the returned function as its
// removeEventListener, except that every waiter on one signal shares a single listener.
//
// Why: a pass's signal (or a controller's, or a leadership term's) is handed to every call made
// under it, and each call that stops waiting on abort registered a listener of its own. A pass
// that deploys 16 pods at once, a controller with many reconciles in flight, or a term with a
// dozen runnables then holds more than Node's default of 10 listeners on one AbortSignal, and
// Node prints a MaxListenersExceededWarning (docs/runtime.md, "Abort signals"), although every
// listener is removed when its call settles. Sharing one listener keeps the signal's own count at
// one; the waiters are a Set that each call leaves when it settles.
//
// The shared listener hides a leak from Node's own check (the signal only ever holds one listener),
// so the Set has a check of its own: when one signal's waiters pass `waiterWarningThreshold`, one
// process warning (AbortWaitersWarning) names the signal's owner, if the caller gave one, and the
// code that registered the waiter past the threshold. Once per signal, so a leak is reported and
// not repeated on every call.

/** Waiters on one signal beyond which a leak is suspected and reported once. */
export const waiterWarningThreshold = 1000;

interface Shared {
  waiters: Set<() => void>;
  listener: () => void;
  warned: boolean;
}

const sharedOf = new WeakMap<AbortSignal, Shared>();

/**
 * Run `fn` once when `signal` aborts (never when it has already aborted: check `aborted` first,
 * as with addEventListener). Returns the function that unregisters it; the shared listener leaves
 * the signal with its last waiter. `owner` (e.g. "controller podgroup") only names the signal in
 * the leak warning.
 */
export function onAbort(signal: AbortSignal, fn: () => void, owner?: string): () => void {
  let shared = sharedOf.get(signal);
  if (shared === undefined) {
    const waiters = new Set<() => void>();
    const listener = () => {
      sharedOf.delete(signal);
      // The live Set, as an EventTarget dispatches: a waiter that another waiter unregisters
      // during the dispatch is skipped (a Set's iteration skips entries deleted before they are
      // reached). Each leaves the Set before it runs, so its own unregister is a no-op.
      for (const waiter of waiters) {
        waiters.delete(waiter);
        try {
          waiter();
        } catch (error) {
          // As an EventTarget listener's throw: reported, and the other waiters still run.
          queueMicrotask(() => {
            throw error;
          });
        }
      }
      waiters.clear();
    };
    shared = { waiters, listener, warned: false };
    sharedOf.set(signal, shared);
    signal.addEventListener("abort", listener, { once: true });
  }
  // A function object of its own, so the same `fn` registered twice is two registrations.
  const entry = () => fn();
  const registered = shared;
  registered.waiters.add(entry);
  if (!registered.warned && registered.waiters.size > waiterWarningThreshold) {
    registered.warned = true;
    warnLeak(registered.waiters.size, owner);
  }
  return () => {
    if (!registered.waiters.delete(entry) || registered.waiters.size > 0) return;
    if (sharedOf.get(signal) === registered) sharedOf.delete(signal);
    signal.removeEventListener("abort", registered.listener);
  };
}

function warnLeak(count: number, owner: string | undefined): void {
  // The first stack frame outside this file: the code that registered the waiter.
  const frames = (new Error().stack ?? "").split("\n").slice(1).map((line) => line.trim());
  const caller = frames.find((line) => !line.includes("abort-fanout.ts:"));
  process.emitWarning(
    `${count} waiters on one AbortSignal${owner !== undefined ? ` (${owner})` : ""}: possible leak of abort waiters` +
      (caller !== undefined ? `; the last registered ${caller}` : ""),
    { type: "AbortWaitersWarning", code: "CAPSTAN_ABORT_WAITERS" },
  );
}
