// Events read from a pod's restart record (RestartRecord, kept in a status's internal part) as the
// controller rewrites it: the PodGroup and Dependency controllers derive what happened to a pod
// from the record before and after a pass (docs/events.md). Pure.
import { eventTypeOf, type EventInput, type EventReason } from "../../api/resources/event.ts";
import type { RestartRecord } from "./backoff.ts";

/** Consecutive failures from which a restart back-off is reported as a crash loop. */
export const crashLoopAfter = 3;

/** The parts of an event the caller fills in (object, app, instance, node). */
export type EventBase = Omit<EventInput, "type" | "reason" | "message">;

/** `error` without the "; next attempt at ..." or "; restart N at ..." the back-off adds. */
export function withoutSchedule(error: string): string {
  return error.replace(/; (next attempt|restart \d+) at \S+$/, "");
}

/**
 * What changed between `before` and `after` of one pod: an exit counted (InstanceExited for code
 * 0, else InstanceCrashed; CrashLooping once it has failed crashLoopAfter times in a row and waits
 * for a back-off), a restart made (InstanceRestarted), a failed deploy (ImagePullFailed or
 * DeployFailed) or start (StartFailed). `who` names the pod in messages ("instance 0").
 */
export function restartRecordEvents(base: EventBase, who: string, before: RestartRecord | undefined, after: RestartRecord, restartedBy: string): EventInput[] {
  const out: EventInput[] = [];
  const add = (reason: EventReason, message: string) => out.push({ ...base, type: eventTypeOf(reason), reason, message });
  const prev = before ?? { restarts: 0, failures: 0 };
  const newExit = after.lastExit !== undefined && after.lastExit !== prev.lastExit;
  if (newExit) {
    const what = withoutSchedule(after.lastError ?? "").split("; ")[0] || "exited";
    add(/^exited with code 0\b/.test(what) ? "InstanceExited" : "InstanceCrashed", `${who} ${what}`);
    if (after.nextAttemptAt !== undefined && after.failures >= crashLoopAfter) add("CrashLooping", `${who} keeps exiting: back-off restarting it`);
  }
  if (after.restarts > prev.restarts) add("InstanceRestarted", `${who} restarted ${restartedBy}`);
  if (after.failures > prev.failures && !newExit && after.lastError !== undefined) {
    const error = withoutSchedule(after.lastError);
    if (after.nextDeployAt !== undefined && after.nextDeployAt !== prev.nextDeployAt) {
      add(/image pull failed/.test(error) ? "ImagePullFailed" : "DeployFailed", `${who}: ${error}`);
    } else if (after.nextAttemptAt !== undefined && after.nextAttemptAt !== prev.nextAttemptAt) {
      add("StartFailed", `${who}: ${error}`);
    }
  }
  return out;
}
