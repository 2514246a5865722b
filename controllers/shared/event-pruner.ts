// The event pruner: keeps the events in the store bounded (docs/events.md). Leader-only (run it
// with Manager.add, the default) and through the fenced store. Every interval it lists the events
// and deletes those whose lastTime is older than the TTL (-event-ttl, 1 h), then the oldest beyond
// the newest `maxEvents` (5000), and anything under the prefix that is not an event record.
// Deletes go in transactions of at most 64 keys (etcd allows 128 operations per transaction).
import type { Store } from "../../adapters/store/store.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import { compareEvents, decodeEventRecord, eventsKeyPrefix, type EventRecord } from "../../api/resources/event.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { withDeadline } from "../../runtime/deadline.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";

export const defaultEventTtlMs = 60 * 60_000;
export const defaultMaxEvents = 5000;
const deletesPerTxn = 64;

export interface EventPrunerOptions {
  /** The FENCED store. */
  store: Store;
  prefix?: string;
  /** Events not seen again for this long are deleted (1 h). */
  ttlMs?: number;
  /** At most this many are kept, the newest (5000). */
  maxEvents?: number;
  /** How often it prunes (1 min, or the TTL when that is shorter). */
  intervalMs?: number;
  /** Deadline of each store call (30 s). */
  requestTimeoutMs?: number;
  clock?: Clock;
  /** Wall clock, compared with the records' lastTime; default Date.now. */
  now?: () => number;
  log?: Logger;
}

export class EventPruner {
  readonly name = "event-pruner";
  private readonly store: Store;
  private readonly prefix: string;
  private readonly ttlMs: number;
  private readonly maxEvents: number;
  private readonly intervalMs: number;
  private readonly requestTimeoutMs: number;
  private readonly clock: Clock;
  private readonly now: () => number;
  private readonly log: Logger;

  constructor(opts: EventPrunerOptions) {
    this.store = opts.store;
    this.prefix = opts.prefix ?? eventsKeyPrefix();
    this.ttlMs = opts.ttlMs ?? defaultEventTtlMs;
    this.maxEvents = opts.maxEvents ?? defaultMaxEvents;
    this.intervalMs = opts.intervalMs ?? Math.min(60_000, this.ttlMs);
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.clock = opts.clock ?? realClock;
    this.now = opts.now ?? Date.now;
    this.log = (opts.log ?? silentLogger).child({ runnable: this.name });
    if (!(this.ttlMs > 0 && this.maxEvents >= 0 && this.intervalMs > 0)) throw new RangeError("event pruner: ttlMs and intervalMs must be > 0, maxEvents >= 0");
  }

  async start(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.prune(signal);
      } catch (e) {
        if (signal.aborted) break;
        this.log.warn({ err: e }, "pruning events failed; retrying next interval");
      }
      await this.clock.sleep(this.intervalMs, signal).catch(() => {});
    }
  }

  /** One pass: what it deleted and kept. */
  async prune(signal?: AbortSignal): Promise<{ deleted: number; kept: number }> {
    const { items } = await withDeadline(listAll(this.store, this.prefix), this.requestTimeoutMs, this.clock, "list events", signal);
    const oldest = this.now() - this.ttlMs;
    const doomed: string[] = [];
    const live: { key: string; record: EventRecord }[] = [];
    for (const kv of items) {
      const record = decodeEventRecord(kv.value);
      const last = record === undefined ? NaN : Date.parse(record.lastTime);
      if (record === undefined || Number.isNaN(last) || last < oldest) doomed.push(kv.key);
      else live.push({ key: kv.key, record });
    }
    live.sort((a, b) => compareEvents(b.record, a.record)); // newest first
    for (const e of live.slice(this.maxEvents)) doomed.push(e.key);
    for (let i = 0; i < doomed.length; i += deletesPerTxn) {
      const batch = doomed.slice(i, i + deletesPerTxn);
      await withDeadline(this.store.txn([], batch.map((key) => ({ type: "delete" as const, key }))), this.requestTimeoutMs, this.clock, "delete events", signal);
    }
    const kept = items.length - doomed.length;
    if (doomed.length > 0) this.log.info({ deleted: doomed.length, kept }, "events pruned");
    return { deleted: doomed.length, kept };
  }
}
