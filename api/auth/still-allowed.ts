// Long answers and the revocation bound (docs/security.md, "How a process checks a token"): a token
// revoked or a grant withdrawn stops working within the verifier's 2 s everywhere, and an answer
// that lasts (an event watch, a log follow, an exec session) is no exception. It checks its
// caller again as often, and ends once the caller may no longer have it.

/** How often a lasting answer checks its caller again: the verifier's cache lifetime. */
export const recheckEveryMs = 2_000;

/**
 * Calls `allowed` every `everyMs` until stopped; the first time it answers false (or throws),
 * `revoked` is called once and the checks stop. Answers the stop function (idempotent).
 */
export function whileAllowed(allowed: () => Promise<boolean>, revoked: () => void, everyMs = recheckEveryMs): () => void {
  let stopped = false;
  let busy = false;
  const timer = setInterval(() => {
    if (busy || stopped) return;
    busy = true;
    void allowed()
      .catch(() => false)
      .then((ok) => {
        busy = false;
        if (ok || stopped) return;
        stop();
        revoked();
      });
  }, everyMs);
  timer.unref();
  const stop = () => {
    stopped = true;
    clearInterval(timer);
  };
  return stop;
}
