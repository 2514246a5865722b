// Reference counts of dependency pods, DERIVED from the store (pure functions): the add, remove
// and verify events (docs/dependencies.md, "Reference counts, VerifyTime and garbage collection")
// are not sent in-process by the PodGroup controller; they are what a change of these counts
// means. Deriving them from PodGroup specs and statuses makes them survive an orchestrator restart
// as they are: the counts are recomputed from the same records.
//
// One reference = one PodGroup instance (a pod in the group's status that has a node and at least
// one container) x one distinct (dependency, scope) that the pod's OWN version lists, where scope is
//   ""                   for policy "node"      (one pod per node, shared by every namespace)
//   the group namespace  for policy "namespace" (one pod per namespace per node)
// Every entry of pod.dependencies is scoped on its own: the original system set a variable to the
// node name on a node-level entry and never reset it, so every namespace-level entry after it was
// counted as node-level too (docs/dependencies.md, "What runs where").
//
// Which list a pod runs with, best source first (dependenciesOf):
//   1. the pod's own list in the status (the PodGroup controller reads it from its containers'
//      io.capstan.dependencies label, controllers/shared/pod-dependencies.ts): survives anything;
//   2. the list of the spec version the pod runs, as this process saw that version of the spec;
//   3. the group's current list (a pod of a version never seen, e.g. after a restart mid-rollout
//      while the PodGroup side does not report 1.).
// So a spec update that drops a dependency does not take it from the old version's instances
// while they still run (docs/dependencies.md, "Reference counts, VerifyTime and garbage
// collection").
import { slotKey } from "./naming.ts";

export type DependencyPolicy = "namespace" | "node";

export interface DependencyEntry {
  podName: string;
  policy: DependencyPolicy;
}

export interface ReferencingPod {
  node: string;
  containers: number;
  /** Spec pod.version the pod runs (absent in a status that does not say). */
  version?: number;
  /** The list the pod runs with, when its status reports it. */
  dependencies?: readonly DependencyEntry[];
}

/** What references are derived from, per PodGroup (deleting groups included: their pods still run). */
export interface GroupReferenceInput {
  namespace: string;
  /** The current spec's list. */
  dependencies: readonly DependencyEntry[];
  /** The list of each earlier spec version seen (pod.version -> list). */
  history?: ReadonlyMap<number, readonly DependencyEntry[]>;
  /** The instances of the group's status. */
  pods: readonly ReferencingPod[];
}

export interface Reference {
  dependency: string;
  node: string;
  scope: string;
}

/** The scope of one dependency entry of a group in `namespace`. */
export function scopeOf(policy: DependencyPolicy, namespace: string): string {
  return policy === "node" ? "" : namespace;
}

/** The list `pod` runs with (sources in the order of the header comment). */
export function dependenciesOf(group: GroupReferenceInput, pod: ReferencingPod): readonly DependencyEntry[] {
  if (pod.dependencies) return pod.dependencies;
  const seen = pod.version === undefined ? undefined : group.history?.get(pod.version);
  return seen ?? group.dependencies;
}

/** Every reference the group makes, one per instance and distinct (dependency, scope) its version lists. */
export function referencesOf(group: GroupReferenceInput): Reference[] {
  const out: Reference[] = [];
  for (const pod of group.pods) {
    if (pod.node === "" || pod.containers < 1) continue;
    const targets = new Map<string, { dependency: string; scope: string }>();
    for (const entry of dependenciesOf(group, pod)) {
      const scope = scopeOf(entry.policy, group.namespace); // per entry: nothing carries over to the next
      targets.set(`${entry.podName}|${scope}`, { dependency: entry.podName, scope });
    }
    for (const target of targets.values()) out.push({ dependency: target.dependency, node: pod.node, scope: target.scope });
  }
  return out;
}

/** dependency -> slotKey -> count. */
export type ReferenceCounts = Map<string, Map<string, number>>;

export function countReferences(groups: Iterable<GroupReferenceInput>): ReferenceCounts {
  const out: ReferenceCounts = new Map();
  for (const group of groups) addReferences(out, referencesOf(group), 1);
  return out;
}

/** Add (sign 1) or take away (sign -1) references; slots and dependencies that reach 0 are dropped. */
export function addReferences(counts: ReferenceCounts, refs: readonly Reference[], sign: 1 | -1): void {
  for (const reference of refs) {
    let slots = counts.get(reference.dependency);
    if (!slots) counts.set(reference.dependency, (slots = new Map()));
    const key = slotKey(reference);
    const count = (slots.get(key) ?? 0) + sign;
    if (count > 0) slots.set(key, count);
    else slots.delete(key);
    if (slots.size === 0) counts.delete(reference.dependency);
  }
}
