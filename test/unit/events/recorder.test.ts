// The EventRecorder on a fake clock: aggregation of repeats, the per-object rate limit, bounds,
// and writes that fail or hang without the caller noticing (docs/events.md).
import { afterEach, describe, expect, it } from "vitest";
import { NotLeaderError } from "../../../adapters/store/fenced.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Compare, Op, Store, TxnResult } from "../../../adapters/store/store.ts";
import { decodeEventRecord, eventsKeyPrefix, type EventInput, type EventRecord } from "../../../api/resources/event.ts";
import { EventRecorder, maxMessageLength, type EventRecorderOptions } from "../../../controllers/shared/events.ts";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";

const epoch = Date.parse("2026-11-26T10:00:00Z");
const prefix = eventsKeyPrefix("/t/");

/** A store whose puts (transactions of puts, as the recorder's batcher sends them) are recorded, and can be made to fail or hang; everything else is unused. */
class PutStore {
  readonly puts: { key: string; record: EventRecord }[] = [];
  readonly values = new Map<string, EventRecord>();
  /** Puts per transaction, in order. */
  readonly txns: number[] = [];
  mode: "ok" | "fail" | "hang" | "not-leader" = "ok";
  readonly store = {
    txn: (_compares: Compare[], ops: Op[]): Promise<TxnResult> => {
      if (this.mode === "fail") return Promise.reject(new Error("store down"));
      if (this.mode === "not-leader") return Promise.reject(new NotLeaderError("/leader", "no term"));
      if (this.mode === "hang") return new Promise(() => {});
      for (const op of ops) {
        if (op.type !== "put") throw new Error(`unexpected ${op.type}`);
        const record = decodeEventRecord(op.value)!;
        this.puts.push({ key: op.key, record });
        this.values.set(op.key, record);
      }
      this.txns.push(ops.length);
      return Promise.resolve({ succeeded: true, revision: this.txns.length + 1 });
    },
  } as unknown as Store;
}

const crash = (message = "instance 0 exited with code 3", name = "shop.web"): EventInput => ({
  type: "Warning",
  reason: "InstanceCrashed",
  kind: "podgroup",
  name,
  app: "shop",
  instance: 0,
  node: "n1",
  message,
});

let clock: FakeClock;
let s: PutStore;

function recorder(extra: Partial<EventRecorderOptions> = {}): EventRecorder {
  clock = new FakeClock(0);
  s = new PutStore();
  return new EventRecorder({ store: s.store, prefix, clock, now: () => epoch + clock.now(), ...extra });
}

async function settle(r: EventRecorder): Promise<void> {
  await flushMicrotasks();
  await r.idle();
  await flushMicrotasks();
}

afterEach(() => {
  s?.puts.splice(0);
});

describe("aggregation", () => {
  it("counts a repeat within 10 minutes in the same record, first and last time kept", async () => {
    const r = recorder();
    r.record(crash());
    await settle(r);
    await clock.advanceAsync(60_000);
    r.record(crash());
    await settle(r);
    await clock.advanceAsync(9 * 60_000); // 9 min after the last: still within the window
    r.record(crash());
    await settle(r);
    expect(s.values.size).toBe(1);
    const [key, rec] = [...s.values][0]!;
    expect(key).toBe(`${prefix}${rec.id}`);
    expect(rec).toMatchObject({ count: 3, reason: "InstanceCrashed", kind: "podgroup", name: "shop.web", app: "shop", instance: 0, node: "n1", type: "Warning" });
    expect(rec.firstTime).toBe(new Date(epoch).toISOString());
    expect(rec.lastTime).toBe(new Date(epoch + 10 * 60_000).toISOString());
    expect(rec.id).toMatch(/^\d{13}-[0-9a-z]{6}-[0-9a-f]{6}$/);
  });

  it("starts a new record after 10 minutes of quiet, and for another message, instance, reason or app", async () => {
    const r = recorder();
    r.record(crash());
    r.record(crash("instance 0 exited with code 4"));
    r.record({ ...crash(), instance: 1 });
    r.record({ ...crash(), reason: "InstanceRestarted", type: "Normal" });
    // The same name made again by another app: its own record, never counted into (or relabelling) the first app's.
    r.record({ ...crash(), app: "other" });
    await settle(r);
    expect(s.values.size).toBe(5);
    expect([...s.values.values()].filter((e) => e.app === "shop")).toHaveLength(4);
    await clock.advanceAsync(10 * 60_000);
    r.record(crash());
    await settle(r);
    expect(s.values.size).toBe(6);
    expect([...s.values.values()].every((e) => e.count === 1)).toBe(true);
  });

  it("ids sort by time: a later record's key sorts after an earlier one's", async () => {
    const r = recorder();
    r.record(crash("a"));
    await clock.advanceAsync(5);
    r.record(crash("b"));
    r.record(crash("c")); // same millisecond: the sequence number orders them
    await settle(r);
    const keys = [...s.values.keys()];
    expect([...keys].sort()).toEqual(keys);
    expect(keys.map((k) => s.values.get(k)!.message)).toEqual(["a", "b", "c"]);
  });

  it("remembers at most maxAggregates events: a forgotten one starts a new record", async () => {
    const r = recorder({ maxAggregates: 2 });
    r.record(crash("a"));
    r.record(crash("b"));
    r.record(crash("c")); // "a" is forgotten
    r.record(crash("a"));
    r.record(crash("c")); // still remembered: counted
    await settle(r);
    const byMessage = [...s.values.values()].map((e) => `${e.message}:${e.count}`).sort();
    expect(byMessage).toEqual(["a:1", "a:1", "b:1", "c:2"]);
  });

  it("writes one record at a time: repeats during a write are written after it, counts never go back", async () => {
    const r = recorder();
    for (let i = 0; i < 5; i++) r.record(crash());
    await settle(r);
    const counts = s.puts.map((p) => p.record.count);
    expect(counts.at(-1)).toBe(5);
    expect([...counts].sort((a, b) => a - b)).toEqual(counts);
    expect(s.puts.length).toBeLessThanOrEqual(2); // the first, then the latest state once
  });
});

describe("rate limit per object", () => {
  it("writes a burst, holds the rest and writes them (with their counts) as the bucket refills", async () => {
    const r = recorder({ burst: 3, refillMs: 1_000 });
    for (let i = 0; i < 6; i++) r.record(crash(`m${i}`));
    r.record(crash("other object", "blog.web")); // its own bucket
    await settle(r);
    expect(s.puts.map((p) => p.record.message)).toEqual(["m0", "m1", "m2", "other object"]);
    r.record(crash("m3")); // held, now counted twice
    await clock.advanceAsync(1_000);
    await settle(r);
    expect(s.puts.length).toBe(5);
    expect(s.puts.at(-1)!.record).toMatchObject({ message: "m3", count: 2 });
    await clock.advanceAsync(2_000);
    await settle(r);
    expect(s.puts.map((p) => p.record.message)).toEqual(["m0", "m1", "m2", "other object", "m3", "m4", "m5"]);
  });

  it("a crash loop costs at most burst + elapsed/refill writes", async () => {
    const r = recorder({ burst: 5, refillMs: 10_000 });
    // 600 crashes (each three events) in 10 minutes: a tight loop.
    for (let t = 0; t < 600; t++) {
      r.record(crash());
      r.record({ ...crash("instance 0 restarted by restart policy always"), reason: "InstanceRestarted", type: "Normal" });
      r.record({ ...crash("instance 0 keeps exiting: back-off restarting it"), reason: "CrashLooping" });
      await clock.advanceAsync(1_000);
      await settle(r);
    }
    expect(s.puts.length).toBeLessThanOrEqual(5 + 600_000 / 10_000 + 1);
    expect(s.values.size).toBe(3);
    // Once the loop stops, what was held is written with its final count (one record each).
    await clock.advanceAsync(60_000);
    await settle(r);
    expect([...s.values.values()].map((e) => e.count)).toEqual([600, 600, 600]);
  });

  it("holds at most maxHeldPerObject events per object and drops the rest", async () => {
    const r = recorder({ burst: 1, refillMs: 1_000, maxHeldPerObject: 2 });
    for (let i = 0; i < 5; i++) r.record(crash(`m${i}`));
    await settle(r);
    await clock.advanceAsync(10_000);
    await settle(r);
    expect(s.puts.map((p) => p.record.message)).toEqual(["m0", "m1", "m2"]);
  });
});

describe("writes never fail the caller", () => {
  it("a failing store: record() returns, nothing is thrown, later writes go through", async () => {
    const r = recorder();
    s.mode = "fail";
    expect(() => r.record(crash("a"))).not.toThrow();
    await settle(r);
    s.mode = "not-leader";
    r.record(crash("b"));
    await settle(r);
    s.mode = "ok";
    r.record(crash("c"));
    await settle(r);
    expect(s.puts.map((p) => p.record.message)).toEqual(["c"]);
  });

  it("a hanging write is given up after its deadline; the queue moves on", async () => {
    const r = recorder({ writeTimeoutMs: 5_000, writeConcurrency: 1 });
    s.mode = "hang";
    r.record(crash("a"));
    await flushMicrotasks();
    s.mode = "ok";
    r.record(crash("b"));
    await flushMicrotasks();
    expect(s.puts).toEqual([]);
    await clock.advanceAsync(5_000);
    await settle(r);
    expect(s.puts.map((p) => p.record.message)).toEqual(["b"]);
  });

  it("drops writes beyond the queue bound", async () => {
    const r = recorder({ writeConcurrency: 1, maxQueuedWrites: 2, burst: 100 });
    s.mode = "hang";
    r.record(crash("m0"));
    await flushMicrotasks(); // m0's write is in flight, and hangs
    s.mode = "ok";
    for (let i = 1; i < 10; i++) r.record(crash(`m${i}`));
    await clock.advanceAsync(5_000);
    await settle(r);
    await clock.advanceAsync(5_000);
    await settle(r);
    // m1 and m2 waited (the bound), the rest were dropped; once m0 was given up, the two went in one transaction.
    expect(s.puts.map((p) => p.record.message)).toEqual(["m1", "m2"]);
    expect(s.txns).toEqual([2]);
  });

  it("records made together are written in one transaction; records made while a write is in flight, in the next", async () => {
    const r = recorder({ writeConcurrency: 1 });
    r.record(crash("a"));
    r.record({ ...crash("b"), reason: "InstanceRestarted", type: "Normal" });
    r.record(crash("c", "shop.worker"));
    await settle(r);
    expect(s.txns).toEqual([3]);
    s.mode = "hang";
    r.record(crash("d"));
    await flushMicrotasks(); // d's write is in flight
    s.mode = "ok";
    for (const m of ["e", "f", "g"]) r.record(crash(m));
    await clock.advanceAsync(5_000); // d is given up
    await settle(r);
    expect(s.txns).toEqual([3, 3]);
    expect(s.puts.map((p) => p.record.message)).toEqual(["a", "b", "c", "e", "f", "g"]);
  });

  it("a batch holds at most maxBatchBytes of keys and values; a larger record goes alone", async () => {
    const r = recorder({ maxBatchBytes: 800, burst: 100 });
    r.record(crash("a"));
    r.record(crash("b"));
    r.record(crash("x".repeat(1_000))); // over the bound alone: its own transaction, failing no other
    r.record(crash("c"));
    await settle(r);
    expect(s.txns).toEqual([2, 1, 1]);
    expect(s.puts.map((p) => p.record.message.slice(0, 1))).toEqual(["a", "b", "x", "c"]);
  });

  it("a message is cut at maxMessageLength characters, the cut marked", async () => {
    const r = recorder();
    r.record(crash("y".repeat(5_000)));
    await settle(r);
    const message = s.puts[0]!.record.message;
    expect(message).toHaveLength(maxMessageLength);
    expect(message.endsWith("y...")).toBe(true);
  });

  it("a batch holds at most maxBatch records", async () => {
    const r = recorder({ maxBatch: 4, burst: 100 });
    for (let i = 0; i < 10; i++) r.record(crash(`m${i}`));
    await settle(r);
    expect(s.txns).toEqual([4, 4, 2]);
    expect(s.puts.map((p) => p.record.message)).toEqual(Array.from({ length: 10 }, (_, i) => `m${i}`));
  });
});

describe("on a real store", () => {
  it("records land under the prefix as JSON event records", async () => {
    clock = new FakeClock(0);
    const store = new SqliteStore({ path: ":memory:" });
    try {
      const r = new EventRecorder({ store, prefix, clock, now: () => epoch + clock.now() });
      r.record(crash());
      r.record(crash());
      await settle(r);
      const { items } = await store.list(prefix);
      expect(items).toHaveLength(1);
      expect(decodeEventRecord(items[0]!.value)).toMatchObject({ count: 2, reason: "InstanceCrashed" });
    } finally {
      await store.close();
    }
  });
});
