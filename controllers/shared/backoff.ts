// Restart back-off shared by the controllers: attempt n waits initialMs x 2^(n-1), capped at maxMs
// (1 s doubling to 5 min by default); the failure count starts over once a container has run for
// resetAfterMs (10 min). Pure.
import type { RestartPolicy } from "../../api/resources/podgroup.ts";

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

/** What a controller remembers per pod to count restarts and back off (kept in its status record). */
export interface RestartRecord {
  /** Restarts (and redeploys after failures) since the pod got its current version. */
  restarts: number;
  /** Consecutive failures; the back-off grows with it and resets after a long enough run. */
  failures: number;
  /** Wall-clock ms before which the pod's stopped container is not started again. */
  nextAttemptAt?: number;
  /**
   * Wall-clock ms before which a missing pod is not deployed again, after a failed deploy.
   * Apart from nextAttemptAt on purpose: a container removed behind our back (its die comes
   * first, and is counted) is replaced at once; only failing deploys back off.
   */
  nextDeployAt?: number;
  /** `<container id>#<restarts>` of the last exit already counted, so an exit counts once. */
  lastExit?: string;
  /**
   * The restart policy lastExit was judged under: a PATCH of the policy judges the same exit
   * again (an instance that exited under never restarts once the policy is always).
   */
  lastExitPolicy?: RestartPolicy;
  /** Why the last deploy or start failed. */
  lastError?: string;
}
