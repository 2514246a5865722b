// The drift-task reconciler: completes drift tasks. A drift task spans groups (every group with
// pods on `from`, or the one `pg` names), while each group's moves are carried out by that group's
// own PodGroup reconcile (drift.ts). This reconciler, keyed by the task's store key, only decides
// when the task is done and deletes it:
//
//   done  <=>  no group the task applies to has a matching instance whose kept pod is on `from`,
//              nor a move off `from` still recorded in its status (R6 of reconciler.ts).
//
// It reads the container cache (what is on `from`, as classify() sees it) and the specs and
// statuses informers; it never touches an engine. While the task is pending it looks again every
// pollMs (cheap: in-memory reads). Before deleting, it waits for the statuses informer to reach the
// store's current revision, so a move recorded a moment ago (its intent is written before the old
// pod goes, so the cache may already miss the pod) is seen and keeps the task, and for every
// PodGroup pass that started before the task existed to finish (passes.ts), so a pod such a pass
// is still creating on `from` is in the cache, and keeps the task, before the decision.
import type { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { DriftTask } from "../../api/resources/task.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { ReconcileContext, Result } from "../../runtime/result.ts";
import { groupPending } from "./drift.ts";
import { labelKeys } from "./naming.ts";
import { classify } from "./observe.ts";
import type { PassesInFlight } from "./passes.ts";
import { unseenPods } from "./status.ts";
import { readInternal, type Layout, type SpecEntry, type StatusEntry, type TaskEntry } from "./stored.ts";

export interface DriftTaskReconcilerOptions {
  store: Store;
  cache: ContainerCache;
  specs: Informer<SpecEntry>;
  statuses: Informer<StatusEntry>;
  tasks: Informer<TaskEntry>;
  /** The PodGroup reconciler's passes in flight. */
  passes: PassesInFlight;
  layout: Layout;
  /** How often a pending task is looked at again (default 1 s). */
  pollMs?: number;
}

/** How soon a task whose older passes are still running is looked at again. */
const passWaitMs = 200;

export class DriftTaskReconciler {
  private readonly pollMs: number;

  constructor(private readonly o: DriftTaskReconcilerOptions) {
    this.pollMs = o.pollMs ?? 1_000;
  }

  readonly reconcile = async (key: string, ctx: ReconcileContext): Promise<Result | void> => {
    const entry = this.o.tasks.get(key);
    if (entry?.task?.kind !== "drift") return;
    const task = entry.task;
    if (this.pending(task).length > 0) return { requeueAfterMs: this.pollMs };
    await this.o.statuses.waitForRevision(await this.o.store.revision(), ctx.signal, 5_000);
    // A pass that read the tasks before this one existed may be creating a pod on `from` that the
    // cache does not show yet (passes.ts): decide once it has finished.
    if (this.o.passes.startedBefore(entry.modRevision)) return { requeueAfterMs: passWaitMs };
    const left = this.pending(task);
    if (left.length > 0) return { requeueAfterMs: this.pollMs };
    const res = await this.o.store.delete(key, { expect: [{ key, target: "modRevision", equals: entry.modRevision }] });
    if (res.succeeded) ctx.log.info({ task: task.id, from: task.from, to: task.to, reason: task.reason }, "drift task done");
  };

  /** Groups that still hold something the task waits for. */
  pending(task: DriftTask): string[] {
    const { cache, specs, statuses, layout } = this.o;
    const candidates = new Set<string>();
    if (task.podGroup !== undefined) {
      candidates.add(task.podGroup);
    } else {
      for (const c of cache.list()) {
        const g = c.labels[labelKeys.podGroup];
        if (c.node === task.from && g !== undefined) candidates.add(g);
      }
      for (const s of statuses.list()) {
        const instances = readInternal(s.status).instances;
        if (Object.values(instances).some((r) => r.move?.from === task.from)) candidates.add(s.name);
        // A pod the status places on `from` while `from` has not answered since start (unseenPods).
        if (s.status?.pods.some((p) => p.node === task.from && p.containers.length > 0)) candidates.add(s.name);
      }
    }
    const out: string[] = [];
    for (const name of candidates) {
      const spec = specs.get(layout.podGroup(name))?.spec;
      if (!spec) continue; // gone, or unreadable (its reconcile touches nothing then either)
      const reachable = (n: string) => cache.nodeState(n) === "ready";
      const view = classify(cache.byLabel(labelKeys.podGroup, name), {
        group: name,
        version: spec.pod.version,
        podSize: spec.pod.containers.length,
        reachable,
      });
      const status = statuses.get(layout.statusOf(name))?.status;
      const unseen = unseenPods(view, status?.pods ?? [], reachable);
      if (groupPending(spec, view, status ? readInternal(status) : undefined, task, unseen)) out.push(name);
    }
    return out;
  }
}
