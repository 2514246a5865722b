// Placement of new pods (docs/podgroup-controller.md, the operations table's "Deploy, none exists"
// row, and "Volumes"): filters, the spread hint, free memory and CPU. Stateful pods keep their node;
// a moving instance goes to its move's `to`, or anywhere but its `from` (R6); no pod goes to a node
// a pending drift task of this group drains (the cordon), which also overrides a stateful pod's
// node (only a forced drift applies to a stateful group); new pods go only to reachable nodes (R5).
// Pure: the pass reads the nodes and the reservations, then acts on the plan.
import {
  freeCapacity,
  parsePlacementFilters,
  pickNode,
  type NodeResources,
  type PlacementFilter,
  type Reservation,
} from "../../adapters/cluster/index.ts";
import { isCurrentInstance, isStateful } from "../../api/resources/podgroup.ts";
import type { DriftTask } from "../../api/resources/task.ts";
import { podRequest } from "./container-spec.ts";
import { cordoned, tasksForGroup } from "./drift.ts";
import type { GroupView } from "./observe.ts";
import type { DriftMove, Internal, StoredPodGroup } from "./stored.ts";

export interface PlacementInput {
  spec: StoredPodGroup;
  /** The instances to place, in order. */
  instances: readonly number[];
  /** Moves of these instances, if they are moving. */
  moves?: ReadonlyMap<number, DriftMove>;
  view: GroupView;
  internal: Internal;
  /** Pending drift tasks (all groups). */
  drifts: readonly DriftTask[];
  nodes: readonly NodeResources[];
  /** Memory and CPU held on the nodes (this group's running pods, the dependency pods). */
  reservations: readonly Reservation[];
  reachable: (node: string) => boolean;
}

export interface PlacementPlan {
  /** The node picked per instance. */
  placed: Map<number, string>;
  /** Instances that fit nowhere, with why: a failed deploy (back-off, R9). */
  failed: Map<number, string>;
  /** Stateful instances waiting for their unreachable node, with why (their lastError; not a failure). */
  waiting: Map<number, string>;
}

/** Why the spec's placement filters cannot be read, or undefined when they can. */
export function invalidFilters(spec: StoredPodGroup): string | undefined {
  try {
    parsePlacementFilters(spec.pod.filters ?? []);
    return undefined;
  } catch (error) {
    return `placement filters: ${(error as Error).message}`;
  }
}

/** A node for each of `instances`, in order (each pick takes its share of the capacity), or why none. */
export function planPlacement(input: PlacementInput): PlacementPlan {
  const { spec, view, internal, moves, reachable } = input;
  const plan: PlacementPlan = { placed: new Map(), failed: new Map(), waiting: new Map() };
  const filterError = invalidFilters(spec);
  if (filterError !== undefined) {
    for (const instance of input.instances) plan.failed.set(instance, filterError);
    return plan;
  }
  const filters = parsePlacementFilters(spec.pod.filters ?? []);
  const cordon = cordoned(tasksForGroup(spec, input.drifts));
  const capacity = freeCapacity(input.nodes, input.reservations);
  const request = podRequest(spec.pod);
  const record = (instance: number) => internal.instances[String(instance)];
  const groupCounts: Record<string, number> = {};
  for (const instanceView of view.instances.values()) {
    // Pods on their way off a node do not count for the spread.
    if (instanceView.kept && isCurrentInstance(instanceView.instance, spec.numInstances) && !record(instanceView.instance)?.move) {
      groupCounts[instanceView.kept.node] = (groupCounts[instanceView.kept.node] ?? 0) + 1;
    }
  }
  const stateful = isStateful(spec.pod);
  for (const instance of input.instances) {
    const move = moves?.get(instance);
    const known = stateful && !move ? record(instance)?.node : undefined;
    const sticky = known !== undefined && !cordon.includes(known) ? known : undefined;
    if (sticky !== undefined && !reachable(sticky)) {
      plan.waiting.set(instance, `stateful: waiting for its node ${sticky}, which is unreachable`);
      continue;
    }
    const nodeFilters: PlacementFilter[] = [...filters, ...cordon.map((node) => ({ kind: "node" as const, op: "!=" as const, value: node }))];
    if (sticky !== undefined) nodeFilters.push({ kind: "node", op: "==", value: sticky });
    if (move?.to !== undefined) nodeFilters.push({ kind: "node", op: "==", value: move.to });
    else if (move) nodeFilters.push({ kind: "node", op: "!=", value: move.from });
    const node = pickNode(capacity, { request, filters: nodeFilters, groupCounts });
    if (!node) {
      const need = `${request.memoryBytes} bytes of memory and ${request.nanoCpus / 1e9} CPUs`;
      const where = nodeFilters.length ? ` on a node matching ${[...new Set(nodeFilters.map(filterText))].join(", ")}` : "";
      plan.failed.set(instance, `${move ? "drift: " : ""}no node fits: needs ${need}${where}`);
      continue;
    }
    plan.placed.set(instance, node);
    groupCounts[node] = (groupCounts[node] ?? 0) + 1;
    const free = capacity.find((candidate) => candidate.name === node)!;
    free.freeMemoryBytes -= request.memoryBytes;
    free.freeNanoCpus -= request.nanoCpus;
  }
  return plan;
}

function filterText(filter: PlacementFilter): string {
  return `${filter.kind === "node" ? "node" : `label:${filter.key}`}${filter.op}${filter.value}`;
}
