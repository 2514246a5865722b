// The PodGroup controller's events (docs/events.md), read from what each status write changes: the
// status before and after, with the controller's own bookkeeping (status.internal: restart
// records, the rollout step, drift moves). The reconciler calls statusWritten() after every status
// write, so events follow the controller's decisions without reaching into each step, and a pass
// that writes nothing records nothing.
//
//   DeployStarted      the status is written for a pod version newer than any it showed before
//                      (a create, or a spec update's first step)
//   DeploySucceeded    that version runs on every instance (group running, observedVersion)
//   DeployFailed       the rollout halted, or an instance could not be deployed
//   InstanceExited / InstanceCrashed / InstanceRestarted / CrashLooping / StartFailed / ImagePullFailed
//                      from the instance's restart record (controllers/shared/restart-events.ts)
//   SecretFilesMissing a created pod waits for its secret files (R10)
//   Drifted            a drift move finished: the instance runs off the node it left
import type { PodGroupStatus } from "../../api/resources/podgroup.ts";
import { eventTypeOf, type EventInput, type EventReason } from "../../api/resources/event.ts";
import { noEvents, type EventSink } from "../shared/events.ts";
import { restartRecordEvents } from "../shared/restart-events.ts";
import { readInternal, type StoredPodGroup } from "./stored.ts";

type Spec = Pick<StoredPodGroup, "name" | "namespace" | "numInstances" | "restartPolicy" | "deleting"> & { pod: { version: number } };

export class PodGroupEvents {
  /** Groups with a deploy in progress: the version (forgotten on success or removal; bounded by the groups). */
  private readonly deploying = new Map<string, number>();

  constructor(private readonly sink: EventSink = noEvents) {}

  /** After a status write of group `name`: record what it says happened. Never throws. */
  statusWritten(name: string, spec: Spec | undefined, prev: PodGroupStatus | undefined, next: PodGroupStatus): void {
    try {
      for (const e of this.diff(name, spec, prev, next)) this.sink.record(e);
    } catch {
      // Events are a report: a surprise here must not fail the pass that wrote the status.
    }
  }

  /** The events of one status change, in the order they happened. */
  diff(name: string, spec: Spec | undefined, prev: PodGroupStatus | undefined, next: PodGroupStatus): EventInput[] {
    if (!spec || spec.deleting) {
      this.deploying.delete(name);
      return [];
    }
    const out: EventInput[] = [];
    const base = { kind: "podgroup" as const, name, app: spec.namespace };
    const add = (reason: EventReason, message: string, extra: { instance?: number; node?: string } = {}) =>
      out.push({ ...base, ...extra, type: eventTypeOf(reason), reason, message });
    const version = spec.pod.version;
    const before = readInternal(prev);
    const after = readInternal(next);

    // A version newer than anything the previous status showed: a deploy starts.
    const shown = prev ? Math.max(prev.observedVersion, before.rollout?.toVersion ?? 0, ...prev.pods.map((p) => p.version)) : 0;
    if (version > shown) {
      add("DeployStarted", shown === 0 ? `deploying version ${version}: ${spec.numInstances} instance(s)` : `updating from version ${shown} to version ${version}, one instance at a time`);
      this.deploying.set(name, version);
    } else if (prev && prev.observedVersion < version && !this.deploying.has(name)) {
      this.deploying.set(name, version); // under way since before this process (a restart, a new leader)
    }

    // Per instance: exits, restarts, failed deploys and starts, drift moves, secrets.
    const prevPods = new Map((prev?.pods ?? []).map((p) => [p.instanceNo, p]));
    for (const pod of next.pods) {
      const i = pod.instanceNo;
      const node = pod.node !== "" ? { node: pod.node } : {};
      const rec = after.instances[String(i)];
      const old = before.instances[String(i)];
      if (rec) out.push(...restartRecordEvents({ ...base, instance: i, ...node }, `instance ${i}`, old, rec, `by restart policy ${spec.restartPolicy}`));
      const moved = pod.containers.length > 0 && pod.node !== "" && pod.node !== old?.move?.from;
      if (old?.move && !rec?.move && moved && (rec?.drift ?? pod.driftCount) >= old.move.drift) {
        add("Drifted", `instance ${i} moved off ${old.move.from}${pod.node !== "" ? ` to ${pod.node}` : ""}`, { instance: i, ...node });
      }
      // A created pod held back with a reason of its own (not its record's): secret files (R10).
      const waiting =
        pod.state === "pending" &&
        pod.containers.length > 0 &&
        pod.lastError !== "" &&
        pod.lastError !== (rec?.lastError ?? "") &&
        !pod.lastError.startsWith("pulling ") &&
        !/^node \S+ is unreachable/.test(pod.lastError);
      if (waiting && prevPods.get(i)?.lastError !== pod.lastError) add("SecretFilesMissing", `instance ${i}: ${pod.lastError}`, { instance: i, ...node });
    }

    // The rollout halted: its runtime check failed.
    // A spec update's or a rolling restart's (docs/podgroup-controller.md, "Rolling restart").
    const halted = (s: PodGroupStatus | undefined) => s !== undefined && (s.lastError.startsWith(`update to version ${version} halted`) || /^restart requested at \S+ halted at instance /.test(s.lastError));
    if (halted(next) && !halted(prev)) add("DeployFailed", next.lastError);

    // Every instance runs the version: the deploy is done.
    const done = (s: PodGroupStatus | undefined) => s !== undefined && s.state === "running" && s.observedVersion === version;
    if (done(next) && !done(prev) && this.deploying.get(name) === version) {
      add("DeploySucceeded", `version ${version} runs on ${spec.numInstances} instance(s)`);
      this.deploying.delete(name);
    }
    return out;
  }
}
