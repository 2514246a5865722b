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
// one; the waiters are a Set that each call leaves when it settles, so nothing accumulates.

interface Shared {
  waiters: Set<() => void>;
  listener: () => void;
}

const sharedOf = new WeakMap<AbortSignal, Shared>();

/**
 * Run `fn` once when `signal` aborts (never when it has already aborted: check `aborted` first,
 * as with addEventListener). Returns the function that unregisters it; the shared listener leaves
 * the signal with its last waiter.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  let shared = sharedOf.get(signal);
  if (shared === undefined) {
    const waiters = new Set<() => void>();
    const listener = () => {
      sharedOf.delete(signal);
      const due = [...waiters];
      waiters.clear();
      for (const waiter of due) {
        try {
          waiter();
        } catch (error) {
          // As an EventTarget listener's throw: reported, and the other waiters still run.
          queueMicrotask(() => {
            throw error;
          });
        }
      }
    };
    shared = { waiters, listener };
    sharedOf.set(signal, shared);
    signal.addEventListener("abort", listener, { once: true });
  }
  // A function object of its own, so the same `fn` registered twice is two registrations.
  const entry = () => fn();
  const registered = shared;
  registered.waiters.add(entry);
  return () => {
    if (!registered.waiters.delete(entry) || registered.waiters.size > 0) return;
    if (sharedOf.get(signal) === registered) sharedOf.delete(signal);
    signal.removeEventListener("abort", registered.listener);
  };
}
