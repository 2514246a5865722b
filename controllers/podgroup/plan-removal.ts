// Removal of a whole group (docs/podgroup-controller.md, the operations table's "Delete group"
// row): kept previous containers at once, then instances highest first in bounded batches, then,
// once nothing is cached and every node that may hold something of the group answers, a sweep of
// every node and the deletion of the group's keys. Pure: the pass acts on the plans.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import type { PodStatus } from "../../api/resources/podgroup.ts";
import { instanceContainers, type GroupView } from "./observe.ts";
import { unseenPods } from "./status.ts";

/** How often a removal waiting for a node to answer looks again. */
export const removalNodeRecheckMs = 5_000;

export interface RemovalBatch {
  /** Kept previous containers on reachable nodes: stopped already, removed at once. */
  previous: CachedContainer[];
  /** The containers of this pass's batch of instances (highest InstanceNo first), one list per instance. */
  instances: CachedContainer[][];
}

/** The first step of a pass removing the group: what to remove now. */
export function planRemovalBatch(view: GroupView, reachable: (node: string) => boolean, removeConcurrency: number): RemovalBatch {
  const reachableContainers = (containers: CachedContainer[]) => containers.filter((container) => reachable(container.node));
  const withContainers = [...view.instances.values()].sort((a, b) => b.instance - a.instance);
  const instances = withContainers
    .map((instanceView) => reachableContainers(instanceContainers(instanceView).map((observed) => observed.c)))
    .filter((containers) => containers.length > 0)
    .slice(0, removeConcurrency);
  const previous = reachableContainers([...view.previous.values()].flat().map((previousContainer) => previousContainer.c));
  return { previous, instances };
}

export interface RemovalFinishInput {
  /** The group's containers still cached after the batch. */
  left: readonly CachedContainer[];
  /** The view after the batch. */
  view: GroupView;
  /** The pods of the last status. */
  lastPods: readonly PodStatus[];
  /** Every node of the cluster. */
  nodes: readonly string[];
  reachable: (node: string) => boolean;
  /** Whether the node was listed since the orchestrator started (the cache knows what runs there). */
  listedSinceStart: (node: string) => boolean;
}

/**
 * What comes after the batch: wait (containers left, or a node that may hold something of the
 * group does not answer: `waitingFor` names those), or sweep every node and delete the keys. A
 * down node is waited for only if it may hold something of the group: a pod the last status
 * places there (unseenPods), or anything at all when it has not been listed since start. A node
 * that was listed and holds none of the group's containers has nothing to confirm.
 */
export function planRemovalFinish(input: RemovalFinishInput): { kind: "wait"; waitingFor: string[] } | { kind: "sweep" } {
  const { left, reachable } = input;
  const unreachable = [...new Set(left.map((container) => container.node).filter((node) => !reachable(node)))];
  const unseen = [...unseenPods(input.view, input.lastPods, reachable).values()].map((pod) => pod.node);
  const down = input.nodes.filter((node) => !reachable(node) && (unseen.includes(node) || !input.listedSinceStart(node)));
  if (left.some((container) => reachable(container.node)) || unreachable.length > 0 || down.length > 0) {
    return { kind: "wait", waitingFor: [...new Set([...unreachable, ...down])] };
  }
  return { kind: "sweep" };
}
