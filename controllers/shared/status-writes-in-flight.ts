// A controller's status writes while they are in flight, for its status source (status-records.ts
// statusSource). The source skips the echo of the controller's own write by its revision, but the
// store may deliver a write's watch event before the write's own answer, while that revision is
// not known yet: under the API load of bench:orchestrator this was so for most new groups' first
// status, each costing a second, useless reconcile (docs/benchmarks.md, orchestrator (c)).
//
// So an event of a key with a write of ours in flight is held, not judged, and judged once the
// write has settled:
// - the write committed at revision R: an event at R is its echo (nothing to do); a later one is
//   someone else's write after ours, and the key is enqueued;
// - nothing was written, or the write failed: whatever was held is someone else's (enqueued). A
//   write that failed but was applied after all (a timeout) costs one extra reconcile, never a
//   missed one.
//
// Invariant: a status event is either judged at once or held until the write in flight settles;
// it is never dropped.

export class StatusWritesInFlight {
  /**
   * Per key: writes in flight (one at a time per key as a rule: a key is reconciled by one worker)
   * and the newest revision held. Should two overlap, only the last to settle judges what was held,
   * against its own revision: at worst one extra reconcile, never a missed one.
   */
  private readonly writes = new Map<string, { count: number; held: number | undefined }>();
  private foreign: ((name: string) => void) | undefined;

  /** Where held events judged foreign go (the status source's enqueue); undefined: nowhere (the source stopped). */
  onForeign(enqueue: ((name: string) => void) | undefined): void {
    this.foreign = enqueue;
  }

  /**
   * A status write of `name` starts. Call the function returned once it has settled, with the
   * revision it committed at, or undefined when it wrote nothing or failed; after the controller
   * has recorded that revision as its own, so later events are judged against it.
   */
  begin(name: string): (revision: number | undefined) => void {
    let write = this.writes.get(name);
    if (write === undefined) {
      write = { count: 0, held: undefined };
      this.writes.set(name, write);
    }
    write.count++;
    const current = write;
    let settled = false;
    return (revision) => {
      if (settled) return;
      settled = true;
      current.count--;
      if (current.count > 0) return;
      this.writes.delete(name);
      if (current.held !== undefined && (revision === undefined || current.held > revision)) this.foreign?.(name);
    };
  }

  /** An event of `name` at `modRevision`: true when it is held (a write is in flight), to be judged when that write settles. */
  hold(name: string, modRevision: number): boolean {
    const write = this.writes.get(name);
    if (write === undefined) return false;
    write.held = Math.max(write.held ?? 0, modRevision);
    return true;
  }
}
