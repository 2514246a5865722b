// ReadYourWrites: the bookkeeping that lets an API answer reads from an informer cache without ever
// answering older than a write it made itself (read-your-own-writes on one replica).
//
// Every write the API makes is noted with the store revision it committed at, under an id (a
// PodGroup's name, a secret's app). A read of an id first asks caughtUp(id): true once the cache is
// synced and reflects every noted write of that id, waiting at most `catchUpMs` for the watch to
// deliver it; false when the cache is not synced or does not reach those writes in time (watch
// down or relisting), and the caller then reads the store instead. A cache behind writes made
// elsewhere is not detected here: those show once the watch delivers them. Waiting per id rather than for the replica's latest write keeps a
// read of one id from queueing behind the watch events of other ids' writes under a busy mix.
//
// Invariant: every mark whose revision is above the cache's revision is kept. A mark at or below
// it is redundant (the cache only moves forward) and is dropped when read, or by a sweep once more
// than `sweepAbove` ids are marked.

/** What ReadYourWrites needs of an informer (runtime/informer.ts). */
export interface RevisionedCache {
  hasSynced(): boolean;
  cacheRevision(): number;
  waitForRevision(revision: number, signal?: AbortSignal, timeoutMs?: number): Promise<void>;
}

/** Marks are swept when more ids than this are held: one pass per this many writes at most, in steady state. */
const sweepAbove = 1_000;

export class ReadYourWrites {
  /** The revision of this replica's last write of each id, until the cache has reached it. */
  private readonly marks = new Map<string, number>();
  /** Highest revision ever noted (what a read of every id must wait for). */
  private latest = 0;
  /**
   * A wait for this revision timed out: until the cache passes it, reads that would wait answer
   * false at once. A watch that is down stays down for seconds, and without this every read with a
   * pending mark would first sit out the full catchUpMs.
   */
  private stuckBelow = 0;

  constructor(
    private readonly cache: RevisionedCache,
    private readonly catchUpMs = 1_000,
  ) {}

  /** After a write of `id` through this replica committed at `revision`: later reads reflect it. */
  wrote(id: string, revision: number): void {
    if (revision > (this.marks.get(id) ?? 0)) this.marks.set(id, revision);
    if (revision > this.latest) this.latest = revision;
    if (this.marks.size > sweepAbove) this.sweep();
  }

  /**
   * True when the cache is synced and reflects every write of `id` noted here (of every id when
   * `id` is undefined), waiting up to catchUpMs for it; false when the cache is behind.
   */
  async caughtUp(id?: string): Promise<boolean> {
    if (!this.cache.hasSynced()) return false;
    const revision = id === undefined ? this.latest : (this.marks.get(id) ?? 0);
    const cached = this.cache.cacheRevision();
    if (cached < revision) {
      if (cached < this.stuckBelow) return false;
      const reached = await this.cache.waitForRevision(revision, undefined, this.catchUpMs).then(
        () => true,
        () => false,
      );
      if (!reached) {
        this.stuckBelow = Math.max(this.stuckBelow, revision);
        return false;
      }
    }
    // Reached: the cache holds the write from now on (unless a newer one came in meanwhile).
    if (id !== undefined) {
      const mark = this.marks.get(id);
      if (mark !== undefined && mark <= this.cache.cacheRevision()) this.marks.delete(id);
    }
    return true;
  }

  /** Drops the marks the cache has reached (ids written and never read back here). */
  private sweep(): void {
    const reached = this.cache.cacheRevision();
    for (const [id, revision] of this.marks) if (revision <= reached) this.marks.delete(id);
  }
}
