// PutBatcher: group commit of unconditional puts. Puts that arrive while one transaction is in
// flight wait and then go together, as one transaction: N concurrent writers cost one round trip,
// one raft entry and one watch event message instead of N (a gRPC call costs its client far more
// CPU than the bytes it carries: bench:secrets). Each caller's promise settles with its own
// transaction's outcome: the revision it committed at, or the error that failed it (then nothing
// of that batch was written).
//
// When to send (the only tuning here, and why):
// - Idle (the last transaction carried at most two puts): a put is sent in the same event loop
//   turn's check phase, so every request whose bytes arrived in that poll phase shares it, and a
//   lone writer waits for nothing.
// - Under load (the last transaction carried more): the writers it just answered are about to
//   write again, so the next transaction waits, at most `lingerMs`, until as many puts are queued
//   as that transaction carried plus those already waiting when it returned. Without the wait,
//   N steady writers split into two alternating halves (one half in flight, the other queued), and
//   the measured CPU per put was about 1.4 x higher (bench:secrets, docs/benchmarks.md).
//
// Invariants:
// - At most one transaction is in flight, and batches are sent in arrival order, so two puts of the
//   same key commit in the order they were made (a later put never lands under an earlier one).
// - A batch never holds a key twice (etcd refuses "duplicate key given in txn request"): the second
//   put of a key ends the batch and leads the next one.
// - A batch holds at most `maxOps` puts (etcd's --max-txn-ops is 128 by default) and at most
//   `maxBytes` of keys and values unless it is a single put, which always goes alone if it is that
//   large (etcd's --max-request-bytes is 1.5 MiB by default): one caller's oversized value fails
//   only its own put.
import type { Store } from "./store.ts";

export interface PutBatcherOptions {
  /** Most puts per transaction (default 64). */
  maxOps?: number;
  /** Most bytes of keys and values per transaction of more than one put (default 1 MiB). */
  maxBytes?: number;
  /** Longest wait for writers to come back under load (default 2 ms; 0 sends at once). */
  lingerMs?: number;
}

interface PendingPut {
  key: string;
  value: string;
  bytes: number;
  resolve(revision: number): void;
  reject(error: unknown): void;
}

/** A transaction of at most this many puts means "idle": the next one is not waited for. */
const idleBatch = 2;

export class PutBatcher {
  private readonly maxOps: number;
  private readonly maxBytes: number;
  private readonly lingerMs: number;
  private queue: PendingPut[] = [];
  private inFlight = false;
  /** A send is scheduled for this turn's check phase. */
  private scheduled = false;
  /** While lingering: the queue length that ends the wait early, and the timer that ends it. */
  private lingerUntil = 0;
  private lingerTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Pick<Store, "txn">,
    options: PutBatcherOptions = {},
  ) {
    this.maxOps = options.maxOps ?? 64;
    this.maxBytes = options.maxBytes ?? 1024 * 1024;
    this.lingerMs = options.lingerMs ?? 2;
    if (!(this.maxOps >= 1)) throw new RangeError("PutBatcher: maxOps must be >= 1");
    if (!(this.maxBytes >= 1)) throw new RangeError("PutBatcher: maxBytes must be >= 1");
    if (!(this.lingerMs >= 0)) throw new RangeError("PutBatcher: lingerMs must be >= 0");
  }

  /** Put `value` at `key`; resolves with the revision of the transaction that wrote it. */
  put(key: string, value: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      // String length counts bytes for the ASCII (base64) values this is used with, and is a lower
      // bound otherwise; the single-put exception above makes a misestimate harmless.
      this.queue.push({ key, value, bytes: key.length + value.length, resolve, reject });
      if (this.inFlight) return;
      if (this.lingerTimer === undefined || this.queue.length >= this.lingerUntil) this.sendThisTurn();
    });
  }

  private sendThisTurn(): void {
    this.stopLingering();
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.sendNext();
    });
  }

  private sendNext(): void {
    this.stopLingering();
    if (!this.inFlight && this.queue.length > 0) void this.send(this.nextBatch());
  }

  private stopLingering(): void {
    clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
  }

  private async send(batch: PendingPut[]): Promise<void> {
    this.inFlight = true;
    try {
      const { revision } = await this.store.txn(
        [],
        batch.map((p) => ({ type: "put" as const, key: p.key, value: p.value })),
      );
      for (const p of batch) p.resolve(revision);
    } catch (error) {
      for (const p of batch) p.reject(error);
    } finally {
      this.inFlight = false;
      this.afterSend(batch.length);
    }
  }

  /** Sends the next batch now, or lingers for the writers just answered (see the top). */
  private afterSend(sent: number): void {
    const until = Math.min(this.maxOps, sent + this.queue.length);
    if (sent <= idleBatch || this.lingerMs === 0 || this.queue.length >= until) {
      if (this.queue.length > 0) this.sendThisTurn();
      return;
    }
    this.lingerUntil = until;
    this.lingerTimer = setTimeout(() => this.sendNext(), this.lingerMs);
  }

  /** Takes the longest prefix of the queue that fits one transaction (at least one put). */
  private nextBatch(): PendingPut[] {
    const n = batchLength(this.queue, this.maxOps, this.maxBytes, (p) => p);
    const batch = this.queue.slice(0, n);
    this.queue = this.queue.slice(n);
    return batch;
  }
}

/**
 * How many of `puts`, from the first, go in one transaction (at least one): at most `maxOps`, at
 * most `maxBytes` of keys and values unless it is a single put, and no key twice (the invariants
 * above). Also used by the event recorder (controllers/shared/events.ts), which batches its own.
 */
export function batchLength<T>(puts: readonly T[], maxOps: number, maxBytes: number, put: (item: T) => { key: string; bytes: number }): number {
  const keys = new Set<string>();
  let bytes = 0;
  let n = 0;
  for (const item of puts) {
    const p = put(item);
    if (n === maxOps || keys.has(p.key) || (n > 0 && bytes + p.bytes > maxBytes)) break;
    keys.add(p.key);
    bytes += p.bytes;
    n++;
  }
  return n;
}
