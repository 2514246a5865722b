// The status record (podgroup-status/<name>), recomputed from live cluster data on every pass:
// whatever the store held before (even garbage) does not leak into it, except the controller's
// own bookkeeping (internal) and what cannot be observed while a node is unreachable. Pure.
//
// Pod states: running (every container up), pending (created, not started yet; or not created yet
// while its image is pulled), exited (stopped with code 0, not restarted), failed (non-zero exit,
// waiting for a restart, deploy error or failed image pull, name taken by a foreign container,
// paused), missing (no container: about to be deployed, or waiting for its node), upgrading (the
// instance a spec update is replacing), drifting (moving to another node for a drift task;
// driftCount counts the moves done), removed (being removed).
// Group states, first match wins: removing, failed (a pod failed or the rollout halted), updating
// (a pod runs an older version), scaling (pods beyond numInstances still exist, or pods are
// missing), pending (nothing runs yet), degraded (some pods do not run, or their node is
// unreachable so that their state is unknown), running.
import { firstInstanceNo, instanceNumbers, isCurrentInstance, type GroupState, type PodGroupStatus, type PodState, type PodStatus } from "../../api/resources/podgroup.ts";
import { containerStatus, podContainersState } from "../shared/containers.ts";
import { currentFormat } from "../shared/format.ts";
import { decodePodDependencies, podDependenciesLabel, type PodDependency } from "../shared/pod-dependencies.ts";
import { podContainers, type GroupView, type PodCandidate } from "./observe.ts";
import type { Internal, StoredPodGroup } from "./stored.ts";

export interface StatusInput {
  spec: StoredPodGroup | undefined;
  removing: boolean;
  view: GroupView;
  internal: Internal;
  previous: PodGroupStatus | undefined;
  reachable: (node: string) => boolean;
  nodeAddress: (node: string) => string;
  /** Created pods held back until their secret files are installed, with why (shown as lastError). */
  waitingForSecrets?: ReadonlyMap<number, string>;
  /** Pods waiting for an image pull on their node, with its progress (shown as lastError; a pod not yet created is pending). */
  pulling?: ReadonlyMap<number, string>;
  /** Why the rollout does not proceed, if it does not. */
  halted?: string;
  /** Group-level problems (unplaceable containers, a node that must confirm a removal, ...). */
  notes: string[];
  /** Wall-clock ms, for updatedAt. */
  now: number;
}

export function buildStatus(i: StatusInput): PodGroupStatus {
  const spec = i.spec;
  const n = i.removing || !spec ? 0 : spec.numInstances;
  const version = spec?.pod.version ?? 0;
  const numbers = new Set<number>([...i.view.instances.keys()]);
  for (const k of instanceNumbers(n)) numbers.add(k);
  const previousPods = new Map((i.previous?.pods ?? []).map((p) => [p.instanceNo, p]));
  const unseen = unseenPods(i.view, i.previous?.pods ?? [], i.reachable);
  for (const k of unseen.keys()) numbers.add(k);

  const pods: PodStatus[] = [];
  let unknown = false;
  for (const instance of [...numbers].sort((a, b) => a - b)) {
    const v = i.view.instances.get(instance);
    const rec = i.internal.instances[String(instance)];
    const kept = v?.kept;
    const last = unseen.get(instance);
    if (last && !rec?.move) {
      // Not in the cache because its node has not answered since this controller started (a
      // restart during an outage): unknown, not gone. The last observation stands, so nothing
      // treats the instance as missing and redeploys it before a drift moves it (R5).
      pods.push({ ...last, state: isCurrentInstance(instance, n) ? last.state : "removed", lastError: `node ${last.node} is unreachable: state unknown` });
      unknown = true;
      continue;
    }
    const containers = kept ? podContainers(kept).map((o) => containerStatus(o.c, i.nodeAddress(o.c.node), o.id.format)) : [];
    let state: PodState;
    let lastError = rec?.lastError ?? "";
    if (!isCurrentInstance(instance, n)) {
      state = "removed";
    } else if (rec?.move) {
      // Moving off rec.move.from (drift): the old pod is being removed or the new one deployed.
      state = "drifting";
    } else if (kept && !i.reachable(kept.node)) {
      // Unknown, not gone: keep what was last observed (I4 of the container cache).
      state = previousPods.get(instance)?.state ?? "pending";
      lastError = `node ${kept.node} is unreachable: state unknown`;
      unknown = true;
    } else if (!kept) {
      state = i.internal.rollout?.instance === instance ? "upgrading" : rec?.lastError ? "failed" : "missing";
    } else {
      state = podContainersState(podContainers(kept).map((o) => o.c));
      const waiting = i.waitingForSecrets?.get(instance);
      if (state === "pending" && waiting !== undefined) lastError = waiting;
      if (state === "running" && i.internal.rollout?.instance === instance) state = "upgrading";
      if (state === "running" && kept.version === version) lastError = "";
    }
    const pull = isCurrentInstance(instance, n) ? i.pulling?.get(instance) : undefined;
    if (pull !== undefined) {
      lastError = pull;
      if (!kept && (state === "missing" || state === "failed")) state = "pending";
    }
    const pod: PodStatus = {
      instanceNo: instance,
      state,
      lastError,
      restartCount: rec?.restarts ?? 0,
      driftCount: kept?.drift ?? rec?.drift ?? 0,
      version: kept?.version ?? version,
      node: kept?.node ?? rec?.node ?? "",
      containers,
    };
    const dependencies = kept && runsWith(kept);
    if (dependencies) pod.dependencies = dependencies;
    // The kept previous containers (docs/podgroup-controller.md, "The previous container"): shown,
    // for the logs API to find, never counted.
    const previous = i.view.previous?.get(instance);
    if (previous && previous.length > 0) pod.previous = previous.map((p) => containerStatus(p.c, i.nodeAddress(p.c.node), currentFormat));
    pods.push(pod);
  }

  const current = pods.filter((p) => isCurrentInstance(p.instanceNo, n));
  const firstError = pods.find((p) => p.lastError !== "");
  let state: GroupState;
  if (i.removing) state = "removing";
  else if (i.halted !== undefined || current.some((p) => p.state === "failed")) state = "failed";
  else if (i.internal.rollout || current.some((p) => p.containers.length > 0 && p.version !== version)) state = "updating";
  else if (pods.some((p) => !isCurrentInstance(p.instanceNo, n)) || current.some((p) => p.state === "missing")) state = "scaling";
  else if (current.length > 0 && current.every((p) => p.state === "pending")) state = "pending";
  else if (unknown || current.some((p) => p.state !== "running")) state = "degraded";
  else state = "running";

  const converged = current.every((p) => p.containers.length > 0 && p.version === version) && !i.internal.rollout;
  const lastError = i.halted ?? i.notes[0] ?? (firstError ? `instance ${firstError.instanceNo}: ${firstError.lastError}` : "");
  const status: PodGroupStatus = {
    state,
    lastError,
    updatedAt: new Date(i.now).toISOString(),
    // Never above the spec's version, whatever a tampered previous record claimed.
    observedVersion: converged ? version : Math.min(Number.isInteger(i.previous?.observedVersion) ? i.previous!.observedVersion : 0, version),
    pods,
    instanceBase: firstInstanceNo,
  };
  const internal = pruneInternal(i.internal, n, i.view);
  if (internal.rollout || Object.keys(internal.instances).length > 0) status.internal = internal as unknown as Record<string, unknown>;
  return status;
}

/**
 * The dependency list the pod runs with, from its first container's label; undefined for a
 * container without the label (older format) or with a malformed one: then the Dependency
 * controller falls back to the spec history rather than trust it.
 */
function runsWith(p: PodCandidate): PodDependency[] | undefined {
  const value = p.containers.get(0)?.c.labels[podDependenciesLabel];
  return value === undefined ? undefined : decodePodDependencies(value);
}

/**
 * Pods of the previous status that the cache cannot see because their node is unreachable: a pod
 * with containers on a node that does not answer, whose instance has no kept pod in the cache.
 * After a restart during an outage the cache has nothing of that node, so the previous status is
 * the only record of what runs there (kept, by buildStatus, until the node answers or a drift
 * moves the instance).
 */
export function unseenPods(view: GroupView, previous: readonly PodStatus[], reachable: (node: string) => boolean): Map<number, PodStatus> {
  const out = new Map<number, PodStatus>();
  for (const p of previous) {
    if (p.containers.length === 0 || p.node === "" || reachable(p.node) || view.instances.get(p.instanceNo)?.kept) continue;
    out.set(p.instanceNo, p);
  }
  return out;
}

/** Records of instances that are gone for good (beyond the count, no container left) are dropped. */
function pruneInternal(internal: Internal, n: number, view: GroupView): Internal {
  const instances: Internal["instances"] = {};
  for (const [k, rec] of Object.entries(internal.instances)) {
    if (isCurrentInstance(Number(k), n) || view.instances.has(Number(k))) instances[k] = rec;
  }
  return internal.rollout ? { rollout: internal.rollout, instances } : { instances };
}
