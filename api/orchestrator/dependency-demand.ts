// What dependency pods add to a PodGroup's demand, for the feasibility check (feasibility.ts;
// docs/orchestrator.md, "Feasibility"). A group that lists dependency D needs D's pod on every
// node one of its instances runs on, one per slot (node, scope), unless a pod of that slot is
// there already (docs/dependencies.md, "What runs where"): scope "" for `policy: node`, the
// group's namespace for `policy: namespace`.
//
// In desired state, as the rest of the check: the placement spreads a group's instances, so N
// instances on M ready nodes occupy min(N, M) nodes, and each slot needs at least as many pods as
// the group using it that spans the most nodes; a slot never has fewer pods than its status shows
// on ready nodes (pods waiting for garbage collection still hold their limits). Dependencies that
// are not stored (a group may list one before it is created) or are being deleted add nothing.
//
// The informers and the index that feed it are at the end; the decisions are plain functions.
import type { Registry } from "prom-client";
import type { Store } from "../../adapters/store/store.ts";
import { Informer } from "../../runtime/informer.ts";
import type { KeyValueLike } from "../../runtime/listwatch.ts";
import type { Logger } from "../../runtime/log.ts";
import { keys, nameOf } from "../resources/keys.ts";
import type { PodSpec } from "../resources/podgroup.ts";
import { addDemand, noDemand, podDemand, type Demand } from "./feasibility.ts";

/** One (dependency, scope) a group's pods need on each node they run on. */
export interface DependencyUse {
  dependency: string;
  scope: string;
}

/** What the check needs of a group: its instances and the slots its pods need. */
export interface GroupUses {
  numInstances: number;
  uses: readonly DependencyUse[];
}

/** What the check knows of the stored dependencies and their pods. */
export interface DependencyFacts {
  /** One pod's demand of a stored dependency that is not being deleted; undefined otherwise. */
  demandOf(dependency: string): Demand | undefined;
  /** The nodes that hold a pod of the slot now (its status), whatever their state. */
  podNodes(dependency: string, scope: string): readonly string[];
}

export const noDependencies: DependencyFacts = { demandOf: () => undefined, podNodes: () => [] };

/** The distinct slots (dependency, scope) of a group's pod.dependencies (each entry scoped on its own). */
export function usesOf(group: { namespace: string; pod: { dependencies?: readonly { podName: string; policy: "namespace" | "node" }[] } }): DependencyUse[] {
  const out = new Map<string, DependencyUse>();
  for (const entry of group.pod.dependencies ?? []) {
    const scope = entry.policy === "node" ? "" : group.namespace;
    out.set(`${entry.podName}\n${scope}`, { dependency: entry.podName, scope });
  }
  return [...out.values()];
}

/**
 * The dependency pods that `groups` need at least, on `readyNodes` (see the file's head): their
 * summed demand, and how many pods that is.
 */
export function dependencyPodsDemand(groups: Iterable<GroupUses>, readyNodes: readonly string[], facts: DependencyFacts): { demand: Demand; pods: number } {
  const ready = new Set(readyNodes);
  const spans = new Map<string, { use: DependencyUse; nodes: number }>();
  for (const group of groups) {
    const nodes = Math.min(group.numInstances, ready.size);
    if (nodes <= 0) continue;
    for (const use of group.uses) {
      const key = slotKey(use);
      const seen = spans.get(key);
      if (seen === undefined || seen.nodes < nodes) spans.set(key, { use, nodes });
    }
  }
  let demand = noDemand;
  let pods = 0;
  for (const { use, nodes } of spans.values()) {
    const each = facts.demandOf(use.dependency);
    if (each === undefined) continue;
    const there = facts.podNodes(use.dependency, use.scope).filter((node) => ready.has(node)).length;
    const count = Math.max(nodes, there);
    pods += count;
    demand = addDemand(demand, { memoryBytes: count * each.memoryBytes, nanoCpus: count * each.nanoCpus });
  }
  return { demand, pods };
}

/** What one pod of a group needs on `node` besides itself: the pods of its slots not there yet. */
export function dependencyPodsOnNode(uses: readonly DependencyUse[], node: string, facts: DependencyFacts): Demand {
  let demand = noDemand;
  for (const use of uses) {
    const each = facts.demandOf(use.dependency);
    if (each === undefined || facts.podNodes(use.dependency, use.scope).includes(node)) continue;
    demand = addDemand(demand, each);
  }
  return demand;
}

// ---- caches ------------------------------------------------------------------------------------

/** A stored dependency as the check reads it. */
export interface DependencyDemandRecord {
  name: string;
  demand: Demand;
  deleting: boolean;
}

/** A dependency's status as the check reads it: the nodes that hold a pod, by scope. */
export interface DependencySlotsRecord {
  name: string;
  /** Built once when the status is decoded, so a check looks a slot up instead of filtering every pod. */
  nodesByScope: ReadonlyMap<string, readonly string[]>;
}

export function decodeDependencyDemand(kv: KeyValueLike): DependencyDemandRecord {
  const v = JSON.parse(kv.value) as { name?: unknown; containers?: unknown; deleting?: unknown };
  if (v === null || typeof v !== "object" || v.name !== nameOf(kv.key) || !Array.isArray(v.containers)) {
    throw new TypeError(`dependency record ${kv.key} lacks its name or containers`);
  }
  return { name: v.name, demand: podDemand({ containers: v.containers as PodSpec["containers"] }), deleting: v.deleting !== undefined && v.deleting !== null };
}

export function decodeDependencySlots(kv: KeyValueLike): DependencySlotsRecord {
  const v = JSON.parse(kv.value) as { pods?: unknown };
  const pods = v !== null && typeof v === "object" && Array.isArray(v.pods) ? (v.pods as { node?: unknown; namespace?: unknown }[]) : [];
  const nodesByScope = new Map<string, string[]>();
  for (const p of pods) {
    if (!p || typeof p.node !== "string") continue;
    const scope = typeof p.namespace === "string" ? p.namespace : "";
    const nodes = nodesByScope.get(scope);
    if (nodes === undefined) nodesByScope.set(scope, [p.node]);
    else nodes.push(p.node);
  }
  return { name: nameOf(kv.key), nodesByScope };
}

export interface DependencyInformers {
  specs: Informer<DependencyDemandRecord>;
  statuses: Informer<DependencySlotsRecord>;
}

/** The API's caches of dependency definitions and statuses (every replica runs them: cli/orchestrator.ts). */
export function dependencyInformers(store: Store, options: { log?: Logger; registry?: Registry } = {}): DependencyInformers {
  return {
    specs: new Informer({ name: "api-dependency-specs", source: store, prefix: keys.depends, decode: decodeDependencyDemand, ...options }),
    statuses: new Informer({ name: "api-dependency-status", source: store, prefix: keys.dependStatus, decode: decodeDependencySlots, ...options }),
  };
}

/** DependencyFacts read from the caches at the moment of the call. */
export function factsOf(informers: DependencyInformers): DependencyFacts {
  return {
    demandOf: (dependency) => {
      const record = informers.specs.get(`${keys.depends}${dependency}`);
      return record === undefined || record.deleting ? undefined : record.demand;
    },
    podNodes: (dependency, scope) => informers.statuses.get(`${keys.dependStatus}${dependency}`)?.nodesByScope.get(scope) ?? [],
  };
}

type UsingGroup = { namespace: string; numInstances: number; deleting?: boolean; pod: { dependencies?: { podName: string; policy: "namespace" | "node" }[] } };

/** One slot's users: how many stored groups use it, by their numInstances. */
interface SlotUsers {
  use: DependencyUse;
  byInstances: Map<number, number>;
}

/**
 * The stored groups that list dependencies, kept from the podgroups informer (groups being
 * deleted left out), folded by slot as they change, so a check costs the number of slots, not
 * the number of groups: a slot needs min(instances, ready nodes) pods for its widest user, and
 * the max of min(n, R) over the users is min(max n, R), so the widest user's numInstances is all
 * a check needs of a slot. The slot keeps its users' numInstances with counts (few distinct
 * values), so one group can be left out (the group a request changes) without a walk.
 */
export class DependencyUseIndex {
  private readonly byKey = new Map<string, GroupUses>();
  private readonly slots = new Map<string, SlotUsers>();
  readonly close: () => void;

  constructor(podGroups: Informer<{ name: string } & UsingGroup>) {
    const set = (key: string, group: UsingGroup | undefined) => {
      const old = this.byKey.get(key);
      if (old !== undefined) this.fold(old, -1);
      const uses = group === undefined || group.deleting ? [] : usesOf(group);
      if (uses.length === 0) {
        this.byKey.delete(key);
        return;
      }
      const entry = { numInstances: group!.numInstances, uses };
      this.byKey.set(key, entry);
      this.fold(entry, 1);
    };
    this.close = podGroups.addEventHandler({
      onAdd: (group, key) => set(key, group),
      onUpdate: (_old, group, key) => set(key, group),
      onDelete: (_group, key) => set(key, undefined),
    });
  }

  /**
   * Every stored group's uses except `name`'s, folded: one entry per slot with the numInstances
   * of its widest user (dependencyPodsDemand gives the same answer as with every group).
   */
  othersThan(name: string): GroupUses[] {
    const skip = this.byKey.get(keys.podGroup(name));
    const skipped = new Set(skip?.uses.map(slotKey));
    const out: GroupUses[] = [];
    for (const [key, slot] of this.slots) {
      let widest = 0;
      for (const [instances, count] of slot.byInstances) {
        const left = skip !== undefined && instances === skip.numInstances && skipped.has(key) ? count - 1 : count;
        if (left > 0 && instances > widest) widest = instances;
      }
      if (widest > 0) out.push({ numInstances: widest, uses: [slot.use] });
    }
    return out;
  }

  private fold(group: GroupUses, delta: 1 | -1): void {
    for (const use of group.uses) {
      const key = slotKey(use);
      let slot = this.slots.get(key);
      if (slot === undefined) {
        slot = { use, byInstances: new Map() };
        this.slots.set(key, slot);
      }
      const count = (slot.byInstances.get(group.numInstances) ?? 0) + delta;
      if (count > 0) slot.byInstances.set(group.numInstances, count);
      else slot.byInstances.delete(group.numInstances);
      if (slot.byInstances.size === 0) this.slots.delete(key);
    }
  }
}

function slotKey(use: DependencyUse): string {
  return `${use.dependency}\n${use.scope}`;
}
