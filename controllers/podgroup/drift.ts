// Drift: moving instances off a node (docs/nodes-and-drift.md). Pure decisions over the tasks and a
// group's observed view (plan-drift.ts builds on them); the reconciler acts on them.
//
// A drift task {from, to?, podGroup?, instance?, force} matches an instance when the instance is
// one of the group's current ones (1..numInstances), pg and pg_instance (when given) name it,
// and the group is not stateful unless force is set. An instance matching a task is moved when its
// kept pod is on `from`: the move is recorded in status.internal first (R6), then the pod on `from`
// is removed (skipped when `from` is unreachable) and the instance deployed with its drift count
// + 1 on `to`, or anywhere but `from`. The new pod's higher drift count makes classify() keep it
// and treat any copy left on `from` as an extra, removed as soon as that node answers.
//
// While a task is pending, `from` is also cordoned for the groups it matches: no new pod of theirs
// is placed there (a scale-up or a spec update would otherwise refill the node being drained).
import { isCurrentInstance, isStateful, type PodStatus } from "../../api/resources/podgroup.ts";
import type { DriftTask } from "../../api/resources/task.ts";
import type { GroupView } from "./observe.ts";
import type { Internal, StoredPodGroup, TaskEntry } from "./stored.ts";

/** The drift tasks among `tasks`. */
export function driftTasks(tasks: readonly TaskEntry[]): DriftTask[] {
  const out: DriftTask[] = [];
  for (const t of tasks) if (t.task?.kind === "drift") out.push(t.task);
  return out;
}

/** Tasks that apply to group `spec` (name, and the stateful rule). */
export function tasksForGroup(spec: StoredPodGroup, tasks: readonly DriftTask[]): DriftTask[] {
  const stateful = isStateful(spec.pod);
  return tasks.filter((t) => (t.podGroup === undefined || t.podGroup === spec.name) && (t.force || !stateful));
}

/** Whether instance `instance` of a group the task applies to is one it moves. */
export function coversInstance(t: DriftTask, instance: number, numInstances: number): boolean {
  return isCurrentInstance(instance, numInstances) && (t.instance === undefined || t.instance === instance);
}

/**
 * Moves to start now: instances whose kept pod is on a task's `from` and that are not moving yet.
 * The first matching task (in the order given) wins for an instance. Does not change `internal`.
 */
export function newMoves(
  spec: StoredPodGroup,
  view: GroupView,
  internal: Internal,
  tasks: readonly DriftTask[],
  skip: (instance: number) => boolean,
  unseen: ReadonlyMap<number, PodStatus> = new Map(),
): Map<number, { task: DriftTask; drift: number }> {
  const out = new Map<number, { task: DriftTask; drift: number }>();
  if (tasks.length === 0) return out;
  const instances = new Set([...view.instances.keys(), ...unseen.keys()]);
  for (const i of instances) {
    const v = view.instances.get(i);
    // Where the instance runs: its kept pod, or else (its node unreachable since the controller
    // started, so the cache has nothing of it) where the last status saw it.
    const kept = v?.kept ?? unseen.get(i);
    if (!kept || skip(i) || internal.instances[String(i)]?.move) continue;
    const task = tasks.find((t) => t.from === kept.node && coversInstance(t, i, spec.numInstances));
    if (!task) continue;
    // Above every copy of the instance anywhere (an extra on an unreachable node included), so the
    // new pod outranks them all in classify() and its name is new on every node.
    const known = internal.instances[String(i)]?.drift ?? 0;
    const drift = Math.max(v?.kept?.drift ?? 0, unseen.get(i)?.driftCount ?? 0, known, ...(v?.extras ?? []).map((o) => o.id.drift)) + 1;
    out.set(i, { task, drift });
  }
  return out;
}

/**
 * Whether a group still holds something a task must wait for: a matching instance whose kept pod is
 * on `from`, or a move off `from` still in progress (recorded in status.internal).
 */
export function groupPending(
  spec: StoredPodGroup,
  view: GroupView,
  internal: Internal | undefined,
  task: DriftTask,
  unseen: ReadonlyMap<number, PodStatus> = new Map(),
): boolean {
  if (spec.deleting || tasksForGroup(spec, [task]).length === 0) return false;
  for (const v of view.instances.values()) {
    if (v.kept?.node === task.from && coversInstance(task, v.instance, spec.numInstances)) return true;
  }
  // Pods the cache cannot see (their node unreachable since start) but the status places on `from`.
  for (const [i, p] of unseen) {
    if (p.node === task.from && coversInstance(task, i, spec.numInstances)) return true;
  }
  for (const [k, rec] of Object.entries(internal?.instances ?? {})) {
    if (rec.move?.from === task.from && coversInstance(task, Number(k), spec.numInstances)) return true;
  }
  return false;
}

/** Nodes cordoned for this group's new pods: the `from` of every pending task that applies to it. */
export function cordoned(tasks: readonly DriftTask[]): string[] {
  return [...new Set(tasks.map((t) => t.from))];
}
