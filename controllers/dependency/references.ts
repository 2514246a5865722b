// Reference counts of dependency pods, DERIVED from the store (pure functions): the spec's add,
// remove and verify events are not sent in-process by the PodGroup controller; they are what a
// change of these counts means. Deriving them from PodGroup specs and statuses makes them
// survive an orchestrator restart as they are: the counts are recomputed from the same records.
//
// One reference = one PodGroup instance (a pod in the group's status that has a node and at least
// one container) x one distinct (dependency, scope) its pod lists, where scope is
//   ""                   for policy "node"      (one pod per node, shared by every namespace)
//   the group namespace  for policy "namespace" (one pod per namespace per node)
// Every entry of pod.dependencies is scoped on its own: the original system set a variable to the
// node name on a node-level entry and never reset it, so every namespace-level entry after it was
// counted as node-level too (original-system.md 1.9, 5.7).
import { slotKey } from "./naming.ts";

export type DependencyPolicy = "namespace" | "node";

/** What references are derived from, per PodGroup (deleting groups included: their pods still run). */
export interface GroupReferenceInput {
  namespace: string;
  dependencies: readonly { podName: string; policy: DependencyPolicy }[];
  /** The instances of the group's status. */
  pods: readonly { node: string; containers: number }[];
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

/** Every reference the group makes, one per instance and distinct (dependency, scope). */
export function referencesOf(g: GroupReferenceInput): Reference[] {
  const targets = new Map<string, { dependency: string; scope: string }>();
  for (const d of g.dependencies) {
    const scope = scopeOf(d.policy, g.namespace); // per entry: nothing carries over to the next
    targets.set(`${d.podName}|${scope}`, { dependency: d.podName, scope });
  }
  const out: Reference[] = [];
  for (const pod of g.pods) {
    if (pod.node === "" || pod.containers < 1) continue;
    for (const t of targets.values()) out.push({ dependency: t.dependency, node: pod.node, scope: t.scope });
  }
  return out;
}

/** dependency -> slotKey -> count. */
export type ReferenceCounts = Map<string, Map<string, number>>;

export function countReferences(groups: Iterable<GroupReferenceInput>): ReferenceCounts {
  const out: ReferenceCounts = new Map();
  for (const g of groups) addReferences(out, referencesOf(g), 1);
  return out;
}

/** Add (sign 1) or take away (sign -1) references; slots and dependencies that reach 0 are dropped. */
export function addReferences(counts: ReferenceCounts, refs: readonly Reference[], sign: 1 | -1): void {
  for (const r of refs) {
    let slots = counts.get(r.dependency);
    if (!slots) counts.set(r.dependency, (slots = new Map()));
    const key = slotKey(r);
    const n = (slots.get(key) ?? 0) + sign;
    if (n > 0) slots.set(key, n);
    else slots.delete(key);
    if (slots.size === 0) counts.delete(r.dependency);
  }
}
