// Restart back-off shared by the controllers: attempt n waits initialMs x 2^(n-1), capped at maxMs
// (1 s doubling to 5 min by default); the failure count starts over once a container has run for
// resetAfterMs (10 min). Pure.

export interface RestartBackoff {
  initialMs: number;
  maxMs: number;
  resetAfterMs: number;
}

export const defaultRestartBackoff: RestartBackoff = { initialMs: 1_000, maxMs: 300_000, resetAfterMs: 600_000 };

/** The defaults overridden by `partial`; a RangeError unless 0 < initialMs <= maxMs and resetAfterMs > 0. */
export function restartBackoff(partial: Partial<RestartBackoff> = {}): RestartBackoff {
  const b = { ...defaultRestartBackoff, ...partial };
  if (!(b.initialMs > 0 && b.maxMs >= b.initialMs && b.resetAfterMs > 0)) {
    throw new RangeError("restartBackoff needs 0 < initialMs <= maxMs and resetAfterMs > 0");
  }
  return b;
}

/** Delay before attempt number `failures` (1-based). */
export function restartDelayMs(failures: number, b: Pick<RestartBackoff, "initialMs" | "maxMs">): number {
  const n = Math.max(1, failures);
  // 2^(n-1) overflows to Infinity long after the cap, which Math.min absorbs.
  return Math.min(b.maxMs, b.initialMs * 2 ** Math.min(n - 1, 60));
}
