// Feasibility: may a create or a change of a PodGroup be accepted, given the cluster's capacity?
// Decided from desired state, as Kubernetes decides from requests against allocatable, never from
// what happens to run right now (that would refuse a group while another is briefly down, and
// accept two groups that cannot both ever run):
//
//   capacity  the ready node records (cpus, memoryBytes), in full;
//   demand    every stored, not-deleting PodGroup's numInstances x its pod's summed container
//             limits, with the changing group counted as it would be after the change, plus the
//             dependency pods those groups need (dependency-demand.ts: a pod of each listed
//             dependency on every node a group's instances occupy, unless one is there already);
//   accepted  when demand fits capacity in total, for memory and for CPU, and one pod fits whole,
//             with the dependency pods it would need on that node, on at least one ready node that
//             matches its placement filters.
//
// A change that asks for no more than before (fewer instances, smaller limits, no new dependency
// pods, or a spec change of the same size) is always accepted: a cluster that lost a node must
// still be able to scale down. Containers without limits reserve nothing, so such pods only need
// a ready node.
//
// The totals check does not bin-pack every instance: it can accept a spec that fragmentation then
// leaves partly unplaced (the controller reports that pod as pending with the reason). A precise
// check would be a scheduler run per request; the API's job is to refuse what can never fit.
import { rankNodes, type NodeCapacity, type PlacementFilter } from "../../adapters/cluster/index.ts";
import type { NodeRecord } from "../resources/node.ts";
import type { PodSpec } from "../resources/podgroup.ts";

/** Resources in integer units, so sums over thousands of groups are exact. */
export interface Demand {
  memoryBytes: number;
  nanoCpus: number;
}

export const noDemand: Demand = { memoryBytes: 0, nanoCpus: 0 };

const nanoCpusPerCpu = 1e9;

/** What one pod reserves: the sum of its containers' limits (absent limit = 0). */
export function podDemand(pod: Pick<PodSpec, "containers">): Demand {
  let memoryBytes = 0;
  let nanoCpus = 0;
  for (const c of pod.containers) {
    memoryBytes += c.memoryLimit ?? 0;
    nanoCpus += Math.round((c.cpuLimit ?? 0) * nanoCpusPerCpu);
  }
  return { memoryBytes, nanoCpus };
}

/** What a stored group reserves in desired state; a group being deleted reserves nothing. */
export function groupDemand(group: { numInstances: number; pod: Pick<PodSpec, "containers">; deleting?: boolean }): Demand {
  if (group.deleting) return noDemand;
  const pod = podDemand(group.pod);
  return { memoryBytes: group.numInstances * pod.memoryBytes, nanoCpus: group.numInstances * pod.nanoCpus };
}

export function addDemand(a: Demand, b: Demand): Demand {
  return { memoryBytes: a.memoryBytes + b.memoryBytes, nanoCpus: a.nanoCpus + b.nanoCpus };
}

export function subtractDemand(a: Demand, b: Demand): Demand {
  return { memoryBytes: a.memoryBytes - b.memoryBytes, nanoCpus: a.nanoCpus - b.nanoCpus };
}

export interface GroupShape {
  numInstances: number;
  pod: Pick<PodSpec, "containers">;
}

export interface FeasibilityInput {
  nodes: readonly NodeRecord[];
  /** Desired demand of every other stored group (not the one changing). */
  others: Demand;
  /** The group as stored now; absent for a create. */
  before?: GroupShape;
  after: GroupShape;
  /** The pod's placement filters (already parsed). */
  filters?: readonly PlacementFilter[];
  /** Dependency pods (dependency-demand.ts); none when absent. */
  dependencies?: DependencyDemand;
}

/** The dependency pods of a change: every stored group's, with this group before and after it. */
export interface DependencyDemand {
  before: Demand;
  after: Demand;
  /** How many pods `after` is (for the message). */
  afterPods: number;
  /** What one pod of the group needs on `node` besides itself: its dependencies' pods not there yet. */
  onNode(node: string): Demand;
}

export type Verdict = { ok: true } | { ok: false; message: string };

/** Whether the change asks for more than the group had: more instances, or a bigger pod. */
export function grows(before: GroupShape | undefined, after: GroupShape): boolean {
  if (after.numInstances === 0) return false;
  if (before === undefined || after.numInstances > before.numInstances) return true;
  const a = podDemand(after.pod);
  const b = podDemand(before.pod);
  return a.memoryBytes > b.memoryBytes || a.nanoCpus > b.nanoCpus;
}

/** Whether `a` asks for more than `b` of memory or CPU. */
function exceeds(a: Demand, b: Demand): boolean {
  return a.memoryBytes > b.memoryBytes || a.nanoCpus > b.nanoCpus;
}

export function checkFeasibility(input: FeasibilityInput): Verdict {
  const { before, after } = input;
  const deps = input.dependencies;
  const moreDependencyPods = deps !== undefined && after.numInstances > 0 && exceeds(deps.after, deps.before);
  if (!grows(before, after) && !moreDependencyPods) return { ok: true };
  const ready = input.nodes.filter((n) => n.state === "ready");
  if (ready.length === 0) return { ok: false, message: "no ready nodes: the node monitor has recorded no reachable Docker engine" };

  const capacity = ready.reduce<Demand>(
    (sum, n) => addDemand(sum, { memoryBytes: n.memoryBytes, nanoCpus: Math.round(n.cpus * nanoCpusPerCpu) }),
    noDemand,
  );
  const pod = podDemand(after.pod);
  const group = { memoryBytes: after.numInstances * pod.memoryBytes, nanoCpus: after.numInstances * pod.nanoCpus };
  const dependencyPods = deps?.after ?? noDemand;
  const total = addDemand(addDemand(input.others, group), dependencyPods);
  const nodes = `${ready.length} ready node${ready.length === 1 ? "" : "s"}`;
  const podsNote = (amount: string) => (deps && deps.afterPods > 0 ? ` plus ${amount} for ${deps.afterPods} dependency pod${deps.afterPods === 1 ? "" : "s"}` : "");
  if (total.memoryBytes > capacity.memoryBytes) {
    return {
      ok: false,
      message:
        `not enough memory: ${after.numInstances} x ${mib(pod.memoryBytes)} for this group plus ${mib(input.others.memoryBytes)} ` +
        `for the others${podsNote(mib(dependencyPods.memoryBytes))} needs ${mib(total.memoryBytes)}; the ${nodes} have ${mib(capacity.memoryBytes)}`,
    };
  }
  if (total.nanoCpus > capacity.nanoCpus) {
    return {
      ok: false,
      message:
        `not enough CPU: ${after.numInstances} x ${cpus(pod.nanoCpus)} for this group plus ${cpus(input.others.nanoCpus)} ` +
        `for the others${podsNote(cpus(dependencyPods.nanoCpus))} needs ${cpus(total.nanoCpus)}; the ${nodes} have ${cpus(capacity.nanoCpus)}`,
    };
  }
  const whole = ready.map(
    (n): NodeCapacity => ({ ...n, freeMemoryBytes: n.memoryBytes, freeNanoCpus: Math.round(n.cpus * nanoCpusPerCpu) }),
  );
  // Node by node: the dependency pods a pod needs differ with what each node has already.
  const fits = whole.some((node) => rankNodes([node], { request: addDemand(pod, deps?.onNode(node.name) ?? noDemand), filters: input.filters ?? [] }).length > 0);
  if (!fits) {
    const filtered = input.filters?.length ? " that matches the pod's filters" : "";
    // The smallest need of each resource on its own (the node with the least memory to add may not
    // be the one with the least CPU): lower bounds, hence "at least".
    const needs = deps ? whole.map((node) => deps.onNode(node.name)) : [];
    const least = needs.length === 0 ? noDemand : { memoryBytes: Math.min(...needs.map((d) => d.memoryBytes)), nanoCpus: Math.min(...needs.map((d) => d.nanoCpus)) };
    const withDeps =
      least.memoryBytes > 0 || least.nanoCpus > 0 ? ` (with the dependency pods it needs there: at least ${mib(pod.memoryBytes + least.memoryBytes)} and ${cpus(pod.nanoCpus + least.nanoCpus)})` : "";
    return {
      ok: false,
      message: `one pod needs ${mib(pod.memoryBytes)} and ${cpus(pod.nanoCpus)} on one node${withDeps}; no ready node${filtered} has that much`,
    };
  }
  return { ok: true };
}

function mib(bytes: number): string {
  return `${Number((bytes / (1 << 20)).toFixed(1))} MiB`;
}

function cpus(nano: number): string {
  return `${Number((nano / nanoCpusPerCpu).toFixed(3))} CPUs`;
}
