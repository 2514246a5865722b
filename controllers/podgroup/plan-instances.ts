// What a pass does to the group's instances besides the rollout step and the drift moves
// (docs/podgroup-controller.md, "One pass" and the operations table): the extras to remove (R1),
// the surplus instance to remove (scale down, highest first, one per pass), the previous
// containers of instances scaled away, the instances to deploy, the partial pods to complete, the
// pods to start or restart under the restart policy and back-off (R9), waiting for secret files
// (R10). Pure: the pass acts on the plan. The older-format containers to rename (planRenames) are
// not part of it: the pass renames them first, to completion, before it decides anything else.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import { instanceNumbers, isCurrentInstance, isStateful, type PodStatus } from "../../api/resources/podgroup.ts";
import type { RestartBackoff } from "../shared/backoff.ts";
import { pausedError, stoppedPod } from "../shared/containers.ts";
import { currentFormat } from "../shared/format.ts";
import { exitObservation } from "../shared/exit-observation.ts";
import { countExit } from "../shared/restart.ts";
import { asap } from "../shared/wakeups.ts";
import { previousContainerName } from "../shared/previous.ts";
import { containerName, labelKeys, numberedFromZero } from "./naming.ts";
import { instanceContainers, podComplete, podContainers, podRunning, type GroupView, type InstanceView, type PodCandidate } from "./observe.ts";
import { rolloutHoldsDeploy } from "./plan-rollout.ts";
import { secretsNotReady, type SecretMarkerEntry } from "./secret-marker.ts";
import type { DriftMove, InstanceRecord, Internal, StoredPodGroup } from "./stored.ts";

/** Requeue "as soon as possible" (the rest of a bounded batch): controllers/shared/wakeups.ts. */
export { asap };
/** A pod whose engine is busy with one of its containers (restarting, removing) is looked at again after this long. */
export const busyRecheckMs = 1_000;
/**
 * A pod waiting for its secret files is looked at again after this long even without a marker
 * event: a safety net only, since the markers informer enqueues the group the moment one is written.
 */
export const secretsRecheckMs = 5_000;

export interface InstancesInput {
  spec: StoredPodGroup;
  view: GroupView;
  /** Bookkeeping as it stands after the drift and rollout decisions of this pass. */
  internal: Internal;
  /** The instance whose old pod the rollout step removes in this pass. */
  rolloutRemoval: number | undefined;
  /** Instances moving for a drift task (their moves deploy them). */
  moving: ReadonlyMap<number, DriftMove>;
  /** The pods of the last status (a pod on a node unreachable since start is known only there, R5). */
  lastPods: readonly PodStatus[];
  /** Secret-sync's marker of a container, by id (R10). */
  secretMarker: (containerId: string) => SecretMarkerEntry | undefined;
  reachable: (node: string) => boolean;
  now: number;
  updateWaitMs: number;
  backoff: RestartBackoff;
  maxDeploysPerPass: number;
}

export interface PodStart {
  instance: number;
  pod: PodCandidate;
  /** A restart under the restart policy (counted), not the first start of a created pod. */
  restart: boolean;
}

export interface InstancesPlan {
  /** Duplicates and stale copies next to kept pods (R1), on reachable nodes. */
  extras: CachedContainer[];
  /** The surplus instance removed in this pass (scale down). */
  surplus: InstanceView | undefined;
  /** Kept previous containers of instances scaled away (whose pod is gone already). */
  orphans: CachedContainer[];
  /** Instances to place and deploy, lowest first, at most maxDeploysPerPass. */
  deploy: number[];
  /** Partial pods of the current version: the containers missing from them, on the pod's node. */
  complete: { instance: number; pod: PodCandidate; indexes: number[] }[];
  /** Pods to start (created) or restart (stopped, per policy and back-off). */
  starts: PodStart[];
  /** Instance records that change (an exit counted, a paused pod's error). */
  records: Map<number, InstanceRecord>;
  /** Created pods held back for their secret files, with why (R10). */
  waitingForSecrets: Map<number, string>;
  wakeAt: number[];
}

/** Records of a stateful group's instances, with the node each kept pod is on (docs/podgroup-controller.md, "Volumes"). */
export function statefulNodes(spec: StoredPodGroup, view: GroupView, internal: Internal): Map<number, InstanceRecord> {
  const records = new Map<number, InstanceRecord>();
  if (!isStateful(spec.pod)) return records;
  for (const instanceView of view.instances.values()) {
    if (instanceView.kept && isCurrentInstance(instanceView.instance, spec.numInstances)) {
      records.set(instanceView.instance, { ...recordOf(internal, instanceView.instance), node: instanceView.kept.node });
    }
  }
  return records;
}

/** Containers labelled with the group whose instance cannot be read: reported, left alone. */
export function unidentifiedNotes(group: string, view: GroupView): string[] {
  return view.unidentified.map((container) => `container ${container.name} on ${container.node} is labelled ${labelKeys.podGroup}=${group} but its instance cannot be read; left alone`);
}

export function recordOf(internal: Internal, instance: number): InstanceRecord {
  return internal.instances[String(instance)] ?? { restarts: 0, failures: 0 };
}

/**
 * R10: why a created container of `pod` may not start yet (Secret-sync's marker does not cover
 * its secret files), or undefined. The pod starts as a whole, so one waiting container holds it
 * all. Only "created" containers wait: an exited one has its files already.
 */
export function secretsWait(spec: StoredPodGroup, group: string, pod: PodCandidate, secretMarker: (containerId: string) => SecretMarkerEntry | undefined): string | undefined {
  for (const observed of podContainers(pod)) {
    if (observed.c.state !== "created") continue;
    const files = spec.pod.containers[observed.id.index]?.secretFiles ?? [];
    const why = secretsNotReady(secretMarker(observed.c.id), group, files);
    if (why !== undefined) return why;
  }
  return undefined;
}

/** Everything a pass does to the instances besides the rollout step and the drift moves (see the file's head). */
export function planInstances(input: InstancesInput): InstancesPlan {
  const { spec, view, internal, moving, reachable, now } = input;
  const numInstances = spec.numInstances;
  const podSize = spec.pod.containers.length;
  const plan: InstancesPlan = {
    extras: [],
    surplus: undefined,
    orphans: [],
    deploy: [],
    complete: [],
    starts: [],
    records: new Map(),
    waitingForSecrets: new Map(),
    wakeAt: [],
  };
  const currentRecord = (instance: number) => plan.records.get(instance) ?? recordOf(internal, instance);

  // Duplicates and stale copies next to the kept pod (R1). Instances removed whole in this pass (a
  // rollout step, a move) are left to that removal: two removals of one container race into a
  // 409 from the engine.
  plan.extras = [...view.instances.values()]
    .filter((instanceView) => isCurrentInstance(instanceView.instance, numInstances) && instanceView.instance !== input.rolloutRemoval && !moving.has(instanceView.instance))
    .flatMap((instanceView) => instanceView.extras.filter((observed) => reachable(observed.c.node)).map((observed) => observed.c));
  // Scale down: the highest surplus instance first, one per pass.
  const surplus = [...view.instances.values()]
    .filter((instanceView) => !isCurrentInstance(instanceView.instance, numInstances) && instanceContainers(instanceView).some((observed) => reachable(observed.c.node)))
    .sort((a, b) => b.instance - a.instance);
  plan.surplus = surplus[0];
  if (surplus.length > 1) plan.wakeAt.push(now + asap);
  plan.orphans = [...view.previous]
    .filter(([instance]) => !isCurrentInstance(instance, numInstances) && !view.instances.has(instance))
    .flatMap(([, previous]) => previous.map((previousContainer) => previousContainer.c))
    .filter((container) => reachable(container.node));

  const lastPods = new Map(input.lastPods.map((pod) => [pod.instanceNo, pod]));
  const toPlace: number[] = [];
  for (const i of instanceNumbers(numInstances)) {
    const kept = view.instances.get(i)?.kept;
    let record = currentRecord(i);
    if (moving.has(i)) continue; // its move deploys it
    if (rolloutHoldsDeploy(internal.rollout, i, kept !== undefined, now, input.updateWaitMs)) continue;
    if (kept && !reachable(kept.node)) continue; // R5
    if (!kept) {
      const last = lastPods.get(i);
      if (last && last.containers.length > 0 && last.node && !reachable(last.node)) continue; // R5
      if (record.nextDeployAt !== undefined && now < record.nextDeployAt) {
        plan.wakeAt.push(record.nextDeployAt); // R9
        continue;
      }
      toPlace.push(i);
      continue;
    }
    if (kept.version === spec.pod.version && !podComplete(kept, podSize)) {
      const missing = Array.from({ length: podSize }, (_, k) => k).filter((k) => !kept.containers.has(k));
      plan.complete.push({ instance: i, pod: kept, indexes: missing });
      continue;
    }
    if (podRunning(kept)) continue;
    const { blocked, lastStopped } = stoppedPod(podContainers(kept).map((observed) => observed.c));
    if (blocked === "busy") {
      plan.wakeAt.push(now + busyRecheckMs); // the engine is busy with it
      continue;
    }
    if (blocked === "paused") {
      plan.records.set(i, { ...record, lastError: pausedError });
      continue;
    }
    if (lastStopped) {
      record = countExit(record, exitObservation(lastStopped, record.restarts), spec.restartPolicy, now, input.backoff);
      plan.records.set(i, record);
      if (record.nextAttemptAt === undefined) continue; // the policy says no
    }
    if (record.nextAttemptAt !== undefined && now < record.nextAttemptAt) {
      plan.wakeAt.push(record.nextAttemptAt); // R9
      continue;
    }
    const why = secretsWait(spec, spec.name, kept, input.secretMarker);
    if (why !== undefined) {
      plan.waitingForSecrets.set(i, why);
      plan.wakeAt.push(now + secretsRecheckMs);
      continue;
    }
    plan.starts.push({ instance: i, pod: kept, restart: lastStopped !== undefined });
  }
  plan.deploy = toPlace.slice(0, input.maxDeploysPerPass);
  if (toPlace.length > input.maxDeploysPerPass) plan.wakeAt.push(now + asap);
  return plan;
}

/** One container renamed in place to the current name form. */
export interface Rename {
  instance: number;
  container: CachedContainer;
  to: string;
}

/**
 * Containers kept for their instance (on a reachable node) whose name is not the current form:
 * older-format ones, and those named under the 0-based numbering (docs/podgroup-controller.md,
 * "Instance numbers"), kept previous containers included. Highest instance first and one at a
 * time (the pass renames in this order), so `-i1` is free before `-i0` becomes `-i1` on one engine.
 * The pass carries them out before any other action and decides the rest from what they left: a
 * rename racing a removal of the same container (a rollout step keeping it as the previous one,
 * a drift move, a scale down) would undo the other's rename or lose the container.
 */
export function planRenames(view: GroupView, reachable: (node: string) => boolean): Rename[] {
  const renames: Rename[] = [];
  for (const instanceView of view.instances.values()) {
    if (!instanceView.kept || !reachable(instanceView.kept.node)) continue;
    for (const observed of instanceView.kept.containers.values()) {
      if (observed.id.format === currentFormat && !numberedFromZero(observed.c.labels)) continue;
      if (observed.id.instanceFromName) continue; // its name is where its instance is read from: the rollout replaces it (plan-rollout.ts)
      const to = containerName(observed.id);
      if (observed.c.name !== to) renames.push({ instance: instanceView.instance, container: observed.c, to });
    }
  }
  for (const [instance, previous] of view.previous) {
    for (const { c, index } of previous) {
      if (!reachable(c.node) || !numberedFromZero(c.labels) || c.labels[labelKeys.instance] === undefined) continue;
      const to = previousContainerName(c.labels[labelKeys.podGroup]!, instance, index);
      if (c.name !== to) renames.push({ instance, container: c, to });
    }
  }
  return renames.sort((a, b) => b.instance - a.instance);
}
