// The status a pass writes, built from what it observed and decided. Pure.
//
// Per slot: its record (refCount, verifyTime, deployStartedAt; reclaimAt while unreferenced), the
// kept pod's containers and version, and a state:
//   unknown    its node is unreachable (D4)
//   upgrading  the rollout's slot (D3)
//   failed / missing   no pod, with / without an error
//   pending    no pod while its images are pulled (D7; the pull's progress is the lastError)
//   otherwise the state of the pod's containers
// The dependency's state: removing, idle (no pods), updating (a step in progress or a pod at
// another version), pending (every pod pending), degraded (a pod not running), else running.
// status.internal keeps the rollout step and the slots' restart records that say something.
import type { DependencyPodStatus, DependencyState, DependencyStatus } from "../../api/resources/dependency.ts";
import { containerStatus, podContainersState } from "../shared/containers.ts";
import { parseSlotKey } from "./naming.ts";
import { podContainers, type DependencyView } from "./observe.ts";
import { reclaimAt } from "./records.ts";
import type { Internal, SlotMemory, SlotRecord, StoredDependency } from "./stored.ts";

export interface StatusInput {
  spec: StoredDependency | undefined;
  view: DependencyView;
  /** The records the pass keeps, by slot key. */
  records: ReadonlyMap<string, SlotRecord>;
  internal: Internal;
  /** Notes of the pass; the first is the status's lastError. */
  notes: readonly string[];
  /** Slots whose images are being pulled, with the pull's progress. */
  pulling: ReadonlyMap<string, string>;
  reachable: (node: string) => boolean;
  address: (node: string) => string;
  /** The pass's time: the record of a slot without one (removal) is counted from it. */
  now: number;
  /** updatedAt (wall-clock ms). */
  writtenAt: number;
  gcMs: number;
}

export function buildStatus(input: StatusInput): DependencyStatus {
  const { spec, view, records, internal, now } = input;
  const version = spec?.version ?? 0;
  const removing = !spec || spec.deleting !== undefined;
  const step = internal.rollout;
  const pods: DependencyPodStatus[] = [];
  const keys = removing ? [...view.slots.keys()].sort() : [...records.keys()].sort();
  for (const key of keys) {
    const slot = parseSlotKey(key);
    const record = records.get(key) ?? { refCount: 0, verifyTime: now, deployStartedAt: now };
    const memory = internal.slots[key] ?? { restarts: 0, failures: 0 };
    const kept = view.slots.get(key)?.kept;
    let state: DependencyPodStatus["state"];
    let lastError = memory.lastError ?? "";
    if (!input.reachable(slot.node)) {
      state = "unknown";
      lastError = `node ${slot.node} is unreachable: state unknown`;
    } else if (step?.slot === key) {
      state = "upgrading";
    } else if (!kept) {
      state = memory.lastError ? "failed" : "missing";
    } else {
      state = podContainersState(podContainers(kept).map((observed) => observed.container));
      if (state === "running" && kept.version === version) lastError = "";
    }
    const pull = input.pulling.get(key);
    if (pull !== undefined) {
      lastError = pull;
      if (!kept && (state === "missing" || state === "failed")) state = "pending";
    }
    const pod: DependencyPodStatus = {
      node: slot.node,
      namespace: slot.scope,
      refCount: record.refCount,
      verifyTime: new Date(record.verifyTime).toISOString(),
      deployStartedAt: new Date(record.deployStartedAt).toISOString(),
      state,
      version: kept?.version ?? version,
      restartCount: memory.restarts,
      lastError,
      containers: kept ? podContainers(kept).map((observed) => containerStatus(observed.container, input.address(observed.container.node), observed.id.format)) : [],
    };
    if (record.refCount === 0 && !removing) pod.reclaimAt = new Date(reclaimAt(record, input.gcMs)).toISOString();
    pods.push(pod);
  }
  let state: DependencyState;
  if (removing) state = "removing";
  else if (pods.length === 0) state = "idle";
  else if (step || pods.some((pod) => pod.containers.length > 0 && pod.version !== version)) state = "updating";
  else if (pods.every((pod) => pod.state === "pending")) state = "pending";
  else if (pods.some((pod) => pod.state !== "running")) state = "degraded";
  else state = "running";
  const firstError = pods.find((pod) => pod.lastError !== "");
  const status: DependencyStatus = {
    state,
    lastError: input.notes[0] ?? (firstError ? `pod on ${firstError.node}${firstError.namespace ? ` for ${firstError.namespace}` : ""}: ${firstError.lastError}` : ""),
    updatedAt: new Date(input.writtenAt).toISOString(),
    pods,
  };
  const slots: Record<string, SlotMemory> = {};
  for (const key of keys) {
    const memory = internal.slots[key];
    if (memory && (memory.restarts > 0 || memory.failures > 0 || memory.lastExit !== undefined || memory.lastError !== undefined)) slots[key] = memory;
  }
  if (step || Object.keys(slots).length > 0) status.internal = { ...(step && { rollout: step }), slots } as unknown as Record<string, unknown>;
  return status;
}
