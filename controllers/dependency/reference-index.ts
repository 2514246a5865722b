// The live reference counts of every dependency, kept from the PodGroup spec and status informers,
// and the Source that enqueues a dependency whenever its counts change (an add or a remove event
// of docs/dependencies.md's events table). Each group's contribution is remembered, so a change of one group costs
// O(its references), not a walk over every group.
//
// Per group it also keeps the dependency list of every spec version it saw and that a pod of the
// status may still run (`history`), so an instance keeps counting the list of its own version
// after a spec update changed the group's (references.ts, dependenciesOf).
//
// Invariant: while started, `counts` equals countReferences() over every group in both caches.
// The Controller starts this source (replaying both caches into it) and waits for both informers
// to sync before any reconcile runs, so no reconcile, and so no garbage collection, ever sees
// counts rebuilt from half a cache after a restart.
import type { Informer } from "../../runtime/informer.ts";
import type { Enqueue, Source } from "../../runtime/source.ts";
import { slotKey } from "./naming.ts";
import { addReferences, referencesOf, type DependencyEntry, type Reference, type ReferenceCounts } from "./references.ts";
import { referenceInput, type GroupSpecEntry, type GroupStatusEntry } from "./stored.ts";

export class ReferenceIndex {
  private readonly counts: ReferenceCounts = new Map();
  private readonly specs = new Map<string, GroupSpecEntry>();
  private readonly statuses = new Map<string, GroupStatusEntry>();
  private readonly contributions = new Map<string, Reference[]>();
  private readonly history = new Map<string, Map<number, readonly DependencyEntry[]>>();

  /** Reference count per slot key of `dependency` (absent slots have none). */
  of(dependency: string): ReadonlyMap<string, number> {
    return this.counts.get(dependency) ?? new Map();
  }

  clear(): void {
    this.counts.clear();
    this.specs.clear();
    this.statuses.clear();
    this.contributions.clear();
    this.history.clear();
  }

  setSpec(name: string, spec: GroupSpecEntry | undefined): string[] {
    if (spec) {
      this.specs.set(name, spec);
      let versions = this.history.get(name);
      if (!versions) this.history.set(name, (versions = new Map()));
      if (spec.version > 0) versions.set(spec.version, spec.dependencies);
    } else {
      this.specs.delete(name);
      this.history.delete(name);
    }
    return this.recompute(name);
  }

  setStatus(name: string, status: GroupStatusEntry | undefined): string[] {
    if (status) this.statuses.set(name, status);
    else this.statuses.delete(name);
    return this.recompute(name);
  }

  /** Replace the group's contribution; the dependencies whose counts changed. */
  private recompute(name: string): string[] {
    const spec = this.specs.get(name);
    const before = this.contributions.get(name) ?? [];
    const status = this.statuses.get(name);
    const versions = this.history.get(name);
    if (spec && versions) prune(versions, spec.version, status);
    const after = spec ? referencesOf(referenceInput(spec, status, versions)) : [];
    if (sameReferences(before, after)) return [];
    addReferences(this.counts, before, -1);
    addReferences(this.counts, after, 1);
    if (after.length > 0) this.contributions.set(name, after);
    else this.contributions.delete(name);
    return [...new Set([...before, ...after].map((reference) => reference.dependency))];
  }
}

/**
 * Forget the lists of versions older than every pod of the status (and than the current one): no
 * pod runs them. A version a pod may still run is kept even while the status briefly omits it.
 */
function prune(versions: Map<number, readonly DependencyEntry[]>, current: number, status: GroupStatusEntry | undefined): void {
  let oldest = current;
  for (const pod of status?.pods ?? []) if (pod.version !== undefined && pod.version < oldest) oldest = pod.version;
  for (const version of versions.keys()) if (version < oldest) versions.delete(version);
}

function sameReferences(before: readonly Reference[], after: readonly Reference[]): boolean {
  if (before.length !== after.length) return false;
  const key = (reference: Reference) => `${reference.dependency}|${slotKey(reference)}`;
  const beforeKeys = before.map(key).sort();
  const afterKeys = after.map(key).sort();
  return beforeKeys.every((k, i) => k === afterKeys[i]);
}

/** Feeds `index` from the two informers and enqueues every dependency whose counts change. */
export function referenceSource(index: ReferenceIndex, specs: Informer<GroupSpecEntry>, statuses: Informer<GroupStatusEntry>): Source {
  let unregister: (() => void)[] = [];
  const stop = () => {
    for (const unregisterOne of unregister) unregisterOne();
    unregister = [];
  };
  return {
    name: "references:podgroups",
    start(enqueue: Enqueue) {
      stop();
      index.clear();
      const changed = (deps: string[]) => {
        for (const dependency of deps) enqueue(dependency);
      };
      unregister = [
        specs.addEventHandler({
          onAdd: (spec) => changed(index.setSpec(spec.name, spec)),
          onUpdate: (_old, spec) => changed(index.setSpec(spec.name, spec)),
          onDelete: (spec) => changed(index.setSpec(spec.name, undefined)),
        }),
        statuses.addEventHandler({
          onAdd: (status) => changed(index.setStatus(status.name, status)),
          onUpdate: (_old, status) => changed(index.setStatus(status.name, status)),
          onDelete: (status) => changed(index.setStatus(status.name, undefined)),
        }),
      ];
    },
    stop,
    waitForSync: async (signal, timeoutMs) => {
      await Promise.all([specs.waitForSync(signal, timeoutMs), statuses.waitForSync(signal, timeoutMs)]);
    },
  };
}
