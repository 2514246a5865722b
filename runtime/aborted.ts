// A promise for "this signal has fired": a Runnable's start() awaits it to run until stopped.

/** Resolves when `signal` aborts (at once when it already has). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((done) => signal.addEventListener("abort", () => done(), { once: true }));
}
