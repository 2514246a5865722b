// A watch on the embedded store. It has no stream to trust: it reads the revision log itself, from
// the next revision it owes its consumer, whenever the store says something may have changed (a
// local commit, a poll that saw the revision move, a progress request). Because every delivery is
// a read of committed rows from a position, events can be neither lost nor duplicated, whichever
// process wrote them.
import { CompactedError, WatchBrokenError } from "./errors.ts";
import type { Watch, WatchEvent, WatchHandlers } from "./store.ts";

/** etcd's watchBatchMaxRevs: at most this many revisions per onEvents call while catching up. */
export const BATCH_REVISIONS = 1000;

/** One consistent read of the log for a watch (one SQLite read transaction). */
export type LogRead =
  | { compacted: true; compactRevision: number }
  | {
      compacted: false;
      /** Store revision at the time of the read. */
      revision: number;
      /** Events with revision in [from, upTo], in revision then key order. */
      events: WatchEvent[];
      upTo: number;
    };

export interface SqliteWatchSource {
  /** Reads events in [from, from + BATCH_REVISIONS) of [start, end), or reports compaction. */
  read(from: number, start: Buffer, end: Buffer): LogRead;
  /** Called once when the watch ends, however it ends. */
  onDone(watch: SqliteWatch): void;
}

export class SqliteWatch implements Watch {
  /** The next revision the consumer has not been shown. */
  private next: number;
  private done = false;
  private progressWanted = false;

  constructor(
    private readonly source: SqliteWatchSource,
    private readonly start: Buffer,
    private readonly end: Buffer,
    fromRevision: number,
    private readonly handlers: WatchHandlers,
  ) {
    this.next = fromRevision;
  }

  get wantsProgress(): boolean {
    return this.progressWanted;
  }

  requestProgress(): void {
    // Answered by the next catchUp, after every event up to the revision it reports.
    if (!this.done) this.progressWanted = true;
  }

  async close(): Promise<void> {
    if (this.done) return;
    this.done = true;
    this.source.onDone(this);
  }

  /** Delivers everything committed since the last call, then a progress notification if asked. */
  catchUp(): void {
    while (!this.done) {
      let read: LogRead;
      try {
        read = this.source.read(this.next, this.start, this.end);
      } catch (error) {
        this.fail(new WatchBrokenError("reading the store's revision log failed", error));
        return;
      }
      if (read.compacted) {
        this.fail(new CompactedError(read.compactRevision, this.next));
        return;
      }
      this.next = Math.max(this.next, read.upTo + 1);
      if (read.events.length > 0) {
        const events = read.events;
        if (!this.invoke(() => this.handlers.onEvents(events))) return;
      }
      if (read.upTo >= read.revision) {
        if (this.progressWanted && !this.done) {
          this.progressWanted = false;
          this.invoke(() => this.handlers.onProgress?.(read.revision));
        }
        return;
      }
    }
  }

  /** A throwing handler stops the watch (its cache may be half-updated): the consumer relists. */
  private invoke(handler: () => void): boolean {
    try {
      handler();
      return true;
    } catch (error) {
      this.fail(new WatchBrokenError("a watch handler threw; the watch is stopped", error));
      return false;
    }
  }

  private fail(error: Error): void {
    if (this.done) return;
    this.done = true;
    this.source.onDone(this);
    try {
      this.handlers.onError(error);
    } catch (handlerError) {
      setImmediate(() => {
        throw handlerError;
      });
    }
  }
}
