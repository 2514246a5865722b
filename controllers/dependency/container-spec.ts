// From a stored dependency to the engine's create request of one container of the pod that serves
// one (node, scope). Pure.
//
// - The pod always goes to the node of the instances that need it: the node is the slot's, and
//   any node== filter of the spec means nothing here (the API ignores it for the fit check too).
//   The other filters (node!=, label:) still have to hold for that node (filtersFor).
// - volumes are Docker named volumes (controllers/shared/volumes.ts) owned by the dependency,
//   scope and container (naming.ts, volumeOwner), so a pod finds its data again after an upgrade
//   or a restart (volumes are per engine, so per node):
//     "/data"          -> <dep>[.N<scope>][.C<k>].data-<hash6>:/data
//     "cache:/var/c"   -> <dep>[.N<scope>][.C<k>].cache:/var/c
// - restart policy "no": the controller restarts the containers itself, with back-off.
// - env gets CAPSTAN_DEPENDENCY, CAPSTAN_POD_NAME, CAPSTAN_POD_NAMESPACE (the scope, or the
//   spec's namespace for a node-level pod) and CAPSTAN_NODE.
import { matchesFilters, parsePlacementFilters, patchEnv, type CreateSpec, type NodeResources, type PlacementFilter } from "../../adapters/cluster/index.ts";
import { containerCreateSpec } from "../shared/create-spec.ts";
import { volumeBind } from "../shared/volumes.ts";
import { containerLabels, containerName, volumeOwner, type Slot } from "./naming.ts";
import type { StoredDependency } from "./stored.ts";

export const defaultKillTimeoutSeconds = 10;

export function killTimeoutOf(spec: Pick<StoredDependency, "killTimeout">): number {
  return spec.killTimeout ?? defaultKillTimeoutSeconds;
}

/** The spec's filters that apply to a dependency pod: every one but node==. */
export function filtersFor(filters: readonly PlacementFilter[]): PlacementFilter[] {
  return filters.filter((filter) => !(filter.kind === "node" && filter.op === "=="));
}

/**
 * Throws an Error saying why the pod of `slot` cannot go on its node: the node is not among
 * `nodes`, or it does not match the spec's filters (node== aside: filtersFor). A filter that cannot
 * be parsed throws parsePlacementFilters's error.
 */
export function checkPlacement(spec: Pick<StoredDependency, "filters">, slot: Slot, nodes: readonly NodeResources[]): void {
  const node = nodes.find((candidate) => candidate.name === slot.node);
  if (!node) throw new Error(`node ${slot.node} is not in the cluster`);
  const filters = filtersFor(parsePlacementFilters(spec.filters ?? []));
  if (!matchesFilters(node, filters)) throw new Error(`node ${slot.node} does not match the dependency's filters (${(spec.filters ?? []).join(", ")})`);
}

export interface ContainerPlan {
  name: string;
  spec: CreateSpec;
  limits: { memoryBytes: number; nanoCpus: number };
}

/** Name and create request of container `index` of the pod serving `slot`, at the spec's version. */
export function planContainer(dep: StoredDependency, slot: Slot, index: number): ContainerPlan {
  const container = dep.containers[index];
  if (!container) throw new RangeError(`dependency ${dep.name} has no container ${index}`);
  const ref = { dependency: dep.name, node: slot.node, scope: slot.scope, version: dep.version, index };
  let env = [...(container.env ?? [])];
  for (const [variable, value] of [
    ["CAPSTAN_DEPENDENCY", dep.name],
    ["CAPSTAN_POD_NAME", dep.name],
    ["CAPSTAN_POD_NAMESPACE", slot.scope || dep.namespace],
    ["CAPSTAN_NODE", slot.node],
  ] as const) {
    env = patchEnv(env, variable, value);
  }
  const binds = [...(container.volumes ?? []).map((volume) => volumeBind(volumeOwner(dep.name, slot.scope, index), volume)), ...(container.systemVolumes ?? [])];
  const { spec, limits } = containerCreateSpec(container, { env, labels: containerLabels(ref), binds, stopTimeoutSeconds: killTimeoutOf(dep), network: dep.network });
  return { name: containerName(ref), spec, limits };
}
