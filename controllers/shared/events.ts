// The EventRecorder: how the controllers record events (docs/events.md). One public call,
// record(event), which never throws and never waits: the write happens in the background.
//
// - Aggregation (as Kubernetes' event correlator does): the same event (object, instance, node,
//   reason, message) again within `aggregateWindowMs` (10 min) of its last occurrence updates the
//   one record, count + 1 and lastTime, instead of writing a new one. The index of recent events
//   is in memory, bounded (`maxAggregates`, least recently seen dropped first); a process that
//   forgot an event (restart, eviction) starts a new record for its next occurrence.
// - A per-object rate limit (token bucket per kind/name: `burst` writes, then one per `refillMs`)
//   keeps a crash loop from flooding the store. An event over the limit is held in memory (at
//   most `maxHeldPerObject` per object, the rest dropped and counted) and written, with its count
//   by then, once the object's bucket has a token again.
// - Writes never fail or slow a reconcile: they run in a bounded queue, each with a deadline
//   (`writeTimeoutMs`), one write per record at a time (a repeat during a write is written after
//   it, so counts only grow; the one exception, a write given up at its deadline that the store
//   applies later still, can put a record's count back by the repeats written meanwhile until its
//   next repeat); failures are logged and counted. The store is the fenced one: a
//   process that is not the leader writes nothing (NotLeaderError, logged at debug).
// - Records waiting to be written go together, one transaction of puts (at most `maxBatch`
//   records and `maxBatchBytes`) per write: the events of one status write (a create's
//   DeployStarted and DeploySucceeded) and those of reconciles running side by side share one
//   round trip, raft entry and watch message. A write of its own per event had made every POST of
//   a group cost two more etcd round trips (docs/benchmarks.md, orchestrator (c)).
import PQueue from "p-queue";
import { randomBytes } from "node:crypto";
import { Registry } from "prom-client";
import { NotLeaderError } from "../../adapters/store/fenced.ts";
import { batchLength } from "../../adapters/store/put-batcher.ts";
import type { Store } from "../../adapters/store/store.ts";
import { eventsKeyPrefix, type EventInput, type EventRecord } from "../../api/resources/event.ts";
import { realClock, type Clock, type TimerHandle } from "../../runtime/clock.ts";
import { withDeadline } from "../../runtime/deadline.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { counter } from "../../runtime/metrics.ts";

/** What a controller is given: somewhere to record events. */
export interface EventSink {
  record(event: EventInput): void;
}

/** Records nothing (controllers built without a recorder, tests). */
export const noEvents: EventSink = { record() {} };

export interface EventRecorderOptions {
  /** The FENCED store: only the leader records. */
  store: Store;
  /** Key prefix (default /platform/orchestrator/events/). */
  prefix?: string;
  /** Timers, deadlines, the rate limit and the aggregation window. */
  clock?: Clock;
  /** Wall clock (ms since the epoch) for firstTime and lastTime; default Date.now. */
  now?: () => number;
  log?: Logger;
  registry?: Registry;
  /** Repeats within this long of the last occurrence are counted in one record (10 min). */
  aggregateWindowMs?: number;
  /** Events remembered for aggregation (4096). */
  maxAggregates?: number;
  /** Per object: writes allowed at once (25)... */
  burst?: number;
  /** ...then one more per this long (10 s). */
  refillMs?: number;
  /** Events held per object while it is over its rate (32); more are dropped. */
  maxHeldPerObject?: number;
  /** Objects whose rate is tracked (4096). */
  maxObjects?: number;
  /** Deadline of one write (5 s). */
  writeTimeoutMs?: number;
  /** Writes (transactions) in flight (4), and records waiting for one (1000; more are dropped). */
  writeConcurrency?: number;
  maxQueuedWrites?: number;
  /** Records per transaction at most (64; etcd's --max-txn-ops is 128 by default)... */
  maxBatch?: number;
  /** ...and bytes of keys and values (512 KiB; etcd's --max-request-bytes is 1.5 MiB): one large record fails no other. */
  maxBatchBytes?: number;
}

interface Aggregate {
  key: string;
  record: EventRecord;
  object: string;
  /** clock.now() of the last occurrence. */
  lastAt: number;
  writing: boolean;
  /** Changed while a write was in flight: write again after it. */
  dirty: boolean;
}

interface Bucket {
  tokens: number;
  at: number;
  held: Set<Aggregate>;
  timer: TimerHandle | undefined;
}

/** Characters of an event's message kept (the rest cut, "..." at the end). */
export const maxMessageLength = 1024;

let sequence = 0;
/**
 * This process's random part: drawn once, as two processes' ids must differ, not two ids of one
 * process (its sequence does that). Drawing it per id was a fifth of the recorder's CPU.
 */
const processPart = randomBytes(3).toString("hex");

/** A time-sortable id: the ms zero-padded, a process sequence number, the process's random part (two leaders' ids never collide). */
export function eventId(ms: number): string {
  sequence = (sequence + 1) % 36 ** 6;
  return `${String(Math.max(0, Math.floor(ms))).padStart(13, "0")}-${sequence.toString(36).padStart(6, "0")}-${processPart}`;
}

export class EventRecorder implements EventSink {
  private readonly store: Store;
  private readonly prefix: string;
  private readonly clock: Clock;
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly windowMs: number;
  private readonly maxAggregates: number;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly maxHeld: number;
  private readonly maxObjects: number;
  private readonly writeTimeoutMs: number;
  private readonly maxQueued: number;
  private readonly queue: PQueue;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  /** Records to write, with their value as of now, in the order scheduled; each write takes a batch. */
  private pending: { agg: Aggregate; value: string }[] = [];
  private readonly aggregates = new Map<string, Aggregate>();
  private readonly buckets = new Map<string, Bucket>();
  private readonly outcomes: ReturnType<typeof counter<"result">>;
  private lastWarnAt = -Infinity;
  private suppressedWarnings = 0;

  constructor(opts: EventRecorderOptions) {
    this.store = opts.store;
    this.prefix = opts.prefix ?? eventsKeyPrefix();
    this.clock = opts.clock ?? realClock;
    this.now = opts.now ?? Date.now;
    this.log = (opts.log ?? silentLogger).child({ component: "events" });
    this.windowMs = opts.aggregateWindowMs ?? 10 * 60_000;
    this.maxAggregates = opts.maxAggregates ?? 4096;
    this.burst = opts.burst ?? 25;
    this.refillMs = opts.refillMs ?? 10_000;
    this.maxHeld = opts.maxHeldPerObject ?? 32;
    this.maxObjects = opts.maxObjects ?? 4096;
    this.writeTimeoutMs = opts.writeTimeoutMs ?? 5_000;
    this.maxQueued = opts.maxQueuedWrites ?? 1000;
    this.maxBatch = opts.maxBatch ?? 64;
    this.maxBatchBytes = opts.maxBatchBytes ?? 512 * 1024;
    if (!(this.windowMs >= 0 && this.maxAggregates >= 1 && this.burst >= 1 && this.refillMs > 0 && this.maxHeld >= 0 && this.maxObjects >= 1 && this.writeTimeoutMs > 0 && this.maxBatch >= 1 && this.maxBatchBytes >= 1)) {
      throw new RangeError("event recorder: bad bounds");
    }
    this.queue = new PQueue({ concurrency: opts.writeConcurrency ?? 4 });
    this.outcomes = counter(opts.registry ?? new Registry(), {
      name: "events_recorded_total",
      help: "Events recorded, by outcome: written, aggregated (a repeat counted), held (over the object's rate), dropped, failed (the write)",
      labelNames: ["result"],
    });
  }

  /** Record `event`. Never throws, never waits. */
  record(event: EventInput): void {
    try {
      this.add(event);
    } catch (e) {
      this.warn(e, "recording an event failed");
    }
  }

  /** Resolves once no write is queued or in flight (held events aside). For tests and shutdown. */
  async idle(): Promise<void> {
    await this.queue.onIdle();
  }

  /** Cancel the timers of held events (they are not written). */
  close(): void {
    for (const b of this.buckets.values()) b.timer?.cancel();
    this.buckets.clear();
  }

  private add(input: EventInput): void {
    // A message of a few lines at most (an engine's or a webhook's error can be long): as
    // Kubernetes caps an event's note at 1 KiB.
    const event = input.message.length > maxMessageLength ? { ...input, message: `${input.message.slice(0, maxMessageLength - 3)}...` } : input;
    const at = this.clock.now();
    const time = new Date(this.now()).toISOString();
    // The app is part of what makes two events the same: a group deleted and made again under the
    // same name by another app must not count into (or relabel) the first one's record.
    const key = JSON.stringify([event.app ?? null, event.kind, event.name, event.instance ?? null, event.node ?? null, event.reason, event.message]);
    let agg = this.aggregates.get(key);
    if (agg !== undefined && at - agg.lastAt < this.windowMs) {
      agg.record = { ...agg.record, count: agg.record.count + 1, lastTime: time, type: event.type };
      agg.lastAt = at;
      this.aggregates.delete(key); // most recently seen last
      this.aggregates.set(key, agg);
      this.outcomes.inc({ result: "aggregated" });
    } else {
      const id = eventId(this.now());
      agg = {
        key: `${this.prefix}${id}`,
        record: { id, ...withoutUndefined(event), count: 1, firstTime: time, lastTime: time },
        object: `${event.app ?? ""}/${event.kind}/${event.name}`,
        lastAt: at,
        writing: false,
        dirty: false,
      };
      this.aggregates.delete(key);
      this.aggregates.set(key, agg);
      while (this.aggregates.size > this.maxAggregates) this.aggregates.delete(this.aggregates.keys().next().value!);
    }
    this.schedule(agg);
  }

  /** Write `agg` now if its object has a token, else hold it until one is there. */
  private schedule(agg: Aggregate): void {
    if (agg.writing) {
      agg.dirty = true;
      return;
    }
    const bucket = this.bucket(agg.object);
    if (bucket.held.has(agg)) return; // written with its latest count when the bucket refills
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      this.write(agg);
      return;
    }
    if (bucket.held.size >= this.maxHeld) {
      this.outcomes.inc({ result: "dropped" });
      this.log.debug({ object: agg.object, reason: agg.record.reason }, "event dropped: its object is over its rate");
      return;
    }
    bucket.held.add(agg);
    this.outcomes.inc({ result: "held" });
    if (bucket.timer === undefined) {
      const wait = Math.max(1, Math.ceil((1 - bucket.tokens) * this.refillMs));
      bucket.timer = this.clock.setTimer(wait, () => {
        bucket.timer = undefined;
        this.release(agg.object, bucket);
      });
    }
  }

  /** The object's bucket, refilled to now. */
  private bucket(object: string): Bucket {
    const now = this.clock.now();
    let b = this.buckets.get(object);
    if (b === undefined) {
      b = { tokens: this.burst, at: now, held: new Set(), timer: undefined };
      this.buckets.set(object, b);
      this.evictBuckets();
    } else {
      b.tokens = Math.min(this.burst, b.tokens + (now - b.at) / this.refillMs);
      b.at = now;
      this.buckets.delete(object); // most recently used last
      this.buckets.set(object, b);
    }
    return b;
  }

  /** Forget the least recently used objects beyond maxObjects (their held events with them). */
  private evictBuckets(): void {
    for (const [object, b] of this.buckets) {
      if (this.buckets.size <= this.maxObjects) break;
      b.timer?.cancel();
      this.buckets.delete(object);
    }
  }

  /** The bucket has a token again: write held events, oldest first, while tokens last. */
  private release(object: string, bucket: Bucket): void {
    if (this.buckets.get(object) !== bucket) return; // evicted meanwhile
    this.bucket(object);
    for (const agg of [...bucket.held]) {
      if (bucket.tokens < 1) break;
      bucket.held.delete(agg);
      if (agg.writing) {
        agg.dirty = true;
        continue;
      }
      bucket.tokens -= 1;
      this.write(agg);
    }
    if (bucket.held.size > 0 && bucket.timer === undefined) {
      bucket.timer = this.clock.setTimer(Math.max(1, Math.ceil((1 - bucket.tokens) * this.refillMs)), () => {
        bucket.timer = undefined;
        this.release(object, bucket);
      });
    }
  }

  private write(agg: Aggregate): void {
    if (this.pending.length >= this.maxQueued) {
      this.outcomes.inc({ result: "dropped" });
      this.warn(undefined, "event dropped: too many event writes queued (is the store slow?)");
      return;
    }
    const value = JSON.stringify(agg.record);
    agg.writing = true;
    agg.dirty = false;
    this.pending.push({ agg, value });
    // One write is queued for whatever is pending when it runs; more follow from flush() itself.
    if (this.pending.length === 1) void this.queue.add(() => this.flush());
  }

  /** Write the pending records (a batch) in one transaction. */
  private async flush(): Promise<void> {
    // The caller's synchronous code first (p-queue starts this at once, inside add()): the other
    // events one statusWritten() records join the batch. Anything recorded after an await does not.
    await Promise.resolve();
    const batch = this.nextBatch();
    if (this.pending.length > 0) void this.queue.add(() => this.flush());
    if (batch.length === 0) return;
    const what = batch.length === 1 ? `write event ${batch[0]!.agg.record.id}` : `write ${batch.length} events`;
    try {
      await withDeadline(
        this.store.txn(
          [],
          batch.map(({ agg, value }) => ({ type: "put" as const, key: agg.key, value })),
        ),
        this.writeTimeoutMs,
        this.clock,
        what,
      );
      this.outcomes.inc({ result: "written" }, batch.length);
    } catch (e) {
      this.outcomes.inc({ result: "failed" }, batch.length);
      if (e instanceof NotLeaderError) this.log.debug({ err: e, events: batch.length }, "events not written: not the leader");
      else this.warn(e, batch.length === 1 ? "event write failed" : `write of ${batch.length} events failed`);
    } finally {
      for (const { agg } of batch) {
        agg.writing = false;
        if (!agg.dirty) continue;
        agg.dirty = false;
        try {
          this.schedule(agg);
        } catch (e) {
          this.warn(e, "an event's next write could not be scheduled");
        }
      }
    }
  }

  /** The longest prefix of `pending` within maxBatch records and maxBatchBytes (at least one record), taken off it. */
  private nextBatch(): { agg: Aggregate; value: string }[] {
    const n = batchLength(this.pending, this.maxBatch, this.maxBatchBytes, (p) => ({ key: p.agg.key, bytes: p.agg.key.length + p.value.length }));
    const batch = this.pending.slice(0, n);
    this.pending = this.pending.slice(n);
    return batch;
  }

  /** A warning at most every 30 s; the ones in between are counted in the next. */
  private warn(err: unknown, message: string): void {
    const now = this.clock.now();
    if (now - this.lastWarnAt < 30_000) {
      this.suppressedWarnings++;
      return;
    }
    this.log.warn({ ...(err !== undefined && { err }), ...(this.suppressedWarnings > 0 && { suppressed: this.suppressedWarnings }) }, message);
    this.lastWarnAt = now;
    this.suppressedWarnings = 0;
  }
}

/** The event without its undefined fields (as its JSON would have it), shallow: an event's fields are strings and numbers. */
function withoutUndefined(e: EventInput): EventInput {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) if (v !== undefined) out[k] = v;
  return out as unknown as EventInput;
}
