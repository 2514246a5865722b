// Restart policy and back-off, pure. The original system ignored restart_policy on PATCH and
// restarted crashing pods on every refresh without back-off; here:
//   never   a stopped pod stays stopped (state exited, or failed on a non-zero exit);
//   onfail  restarted only after a non-zero exit (an OOM kill is one: 137);
//   always  restarted after any exit.
// A restart waits initialMs x 2^(failures-1), capped at maxMs (1 s doubling to 5 min by default);
// failures count consecutive exits and start over when the container had been running for
// resetAfterMs (10 min) before it exited. The record lives in status.internal, so an orchestrator
// restart neither resets the back-off nor counts an exit twice (lastExit names the exit counted).
// Shared by the PodGroup controller (its group's policy) and the Dependency controller (always).
import type { RestartPolicy } from "../../api/resources/podgroup.ts";
import { restartDelayMs, type RestartBackoff, type RestartRecord } from "./backoff.ts";

export function wantsRestart(policy: RestartPolicy, exitCode: number | undefined): boolean {
  if (policy === "always") return true;
  if (policy === "onfail") return exitCode !== 0; // unknown exit code: treat as a failure
  return false;
}

export interface ExitObservation {
  /** Identifies this one exit: `<container id>#<restarts so far>`. */
  key: string;
  exitCode: number | undefined;
  oomKilled: boolean;
  /** Engine wall-clock ms; undefined when unknown. */
  startedAt: number | undefined;
  finishedAt: number | undefined;
}

export function describeExit(e: ExitObservation): string {
  const code = e.exitCode === undefined ? "an unknown code" : `code ${e.exitCode}`;
  return `exited with ${code}${e.oomKilled ? " (out of memory)" : ""}`;
}

/**
 * The record after seeing `exit`: a new exit (not yet counted) is counted as a failure and sets
 * the next attempt time; an exit already counted under the same policy leaves the record as it
 * is; one counted under another policy (a PATCH since) is judged again under the policy in force,
 * without counting it twice. `restarts` is counted when the restart is made, not here.
 */
export function countExit<R extends RestartRecord>(record: R, exit: ExitObservation, policy: RestartPolicy, now: number, b: RestartBackoff): R {
  const seen = record.lastExit === exit.key;
  if (seen && record.lastExitPolicy === policy) return record;
  const ranMs = exit.startedAt !== undefined && exit.finishedAt !== undefined ? exit.finishedAt - exit.startedAt : 0;
  const failures = seen ? record.failures : (ranMs >= b.resetAfterMs ? 0 : record.failures) + 1;
  const next: R = { ...record, failures, lastExit: exit.key, lastExitPolicy: policy };
  if (wantsRestart(policy, exit.exitCode)) {
    // From the exit, not from when we noticed it (an engine clock ahead of ours counts as now).
    const at = Math.min(exit.finishedAt ?? now, now) + restartDelayMs(failures, b);
    next.nextAttemptAt = at;
    next.lastError = `${describeExit(exit)}; restart ${record.restarts + 1} at ${new Date(at).toISOString()}`;
  } else {
    delete next.nextAttemptAt;
    next.lastError = `${describeExit(exit)}; restart policy ${policy}: not restarted`;
  }
  return next;
}

/**
 * The record after a failed attempt, counted like an exit with `error` as the reason: a failed
 * deploy of a missing instance delays the next deploy, a failed start the next start.
 */
export function countFailure<R extends RestartRecord>(record: R, error: string, kind: "deploy" | "start", now: number, b: RestartBackoff): R {
  const failures = record.failures + 1;
  const at = now + restartDelayMs(failures, b);
  const field = kind === "deploy" ? "nextDeployAt" : "nextAttemptAt";
  return { ...record, failures, [field]: at, lastError: `${error}; next attempt at ${new Date(at).toISOString()}` };
}
