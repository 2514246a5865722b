// The Dependency controller's events (docs/events.md), read from what each status write changes,
// as the PodGroup controller's are (controllers/podgroup/events.ts). A dependency pod is named by
// its node and the namespace it serves ("pod on n1 for shop", "pod on n1" for a node-level one).
//
//   DeployStarted           a pod is wanted on a node (its first reference), or an upgrade to a
//                           new version begins
//   DeploySucceeded         a pod runs (first deployed, redeployed, or upgraded)
//   DependencyPodReclaimed  an unreferenced pod was removed after -depends-gc
//   InstanceExited / InstanceCrashed / InstanceRestarted / CrashLooping / StartFailed /
//   ImagePullFailed / DeployFailed    from the pod's restart record (shared/restart-events.ts)
import type { DependencyPodStatus, DependencyStatus, StoredDependency } from "../../api/resources/dependency.ts";
import { eventTypeOf, type EventInput, type EventReason } from "../../api/resources/event.ts";
import { noEvents, type EventSink } from "../shared/events.ts";
import { restartRecordEvents } from "../shared/restart-events.ts";
import { parseSlotKey } from "./naming.ts";
import { readInternal } from "./stored.ts";

type Spec = Pick<StoredDependency, "name" | "namespace" | "version" | "deleting">;

const slotOf = (pod: Pick<DependencyPodStatus, "node" | "namespace">) => `${pod.node}|${pod.namespace}`;
const podName = (node: string, scope: string) => `pod on ${node}${scope !== "" ? ` for ${scope}` : ""}`;

export class DependencyEvents {
  constructor(private readonly sink: EventSink = noEvents) {}

  /** After a status write of dependency `name`: record what it says happened. Never throws. */
  statusWritten(name: string, spec: Spec | undefined, prev: DependencyStatus | undefined, next: DependencyStatus): void {
    try {
      for (const event of dependencyEvents(name, spec, prev, next)) this.sink.record(event);
    } catch {
      // Events are a report: a surprise here must not fail the pass that wrote the status.
    }
  }
}

export function dependencyEvents(name: string, spec: Spec | undefined, prev: DependencyStatus | undefined, next: DependencyStatus): EventInput[] {
  if (!spec) return [];
  const out: EventInput[] = [];
  const base = { kind: "dependency" as const, name, app: spec.namespace };
  const add = (reason: EventReason, message: string, node?: string) =>
    out.push({ ...base, ...(node !== undefined && { node }), type: eventTypeOf(reason), reason, message });
  const before = readInternal(prev);
  const after = readInternal(next);
  const prevPods = new Map((prev?.pods ?? []).map((pod) => [slotOf(pod), pod]));
  const nextPods = new Map(next.pods.map((pod) => [slotOf(pod), pod]));

  if (after.rollout && after.rollout.toVersion !== before.rollout?.toVersion) {
    add("DeployStarted", `upgrading its pods to version ${after.rollout.toVersion}, one at a time`);
  }
  for (const [slot, pod] of nextPods) {
    const old = prevPods.get(slot);
    const who = podName(pod.node, pod.namespace);
    if (!old && !spec.deleting) add("DeployStarted", `${who} wanted (${pod.refCount} reference(s))`, pod.node);
    const rec = after.slots[slot];
    if (rec) out.push(...restartRecordEvents({ ...base, node: pod.node }, who, before.slots[slot], rec, "(dependency pods always restart)"));
    const fresh = !old || old.containers.length === 0 || old.version !== pod.version || old.state === "pending" || old.state === "missing" || old.state === "upgrading";
    if (pod.state === "running" && old?.state !== "running" && fresh) add("DeploySucceeded", `${who} runs version ${pod.version}`, pod.node);
  }
  if (!spec.deleting) {
    for (const [slot, old] of prevPods) {
      if (!nextPods.has(slot) && old.refCount === 0) {
        const { node, scope } = parseSlotKey(slot);
        add("DependencyPodReclaimed", `${podName(node, scope)} removed: unreferenced since ${old.verifyTime}`, node);
      }
    }
  }
  return out;
}
