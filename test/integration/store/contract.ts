// The Store contract, as one describe block applied to every implementation (contract.test.ts).
// Revisions are shared with whatever else writes to the same store (other test files use the same
// etcd), so tests compare revisions by order and by what the store answered, never by arithmetic
// on "the next revision".
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompactedError, LeaseLostError } from "../../../adapters/store/errors.ts";
import type { Compare, Store, Watch, WatchEvent } from "../../../adapters/store/store.ts";
import { uniqueName } from "../../helpers/services.ts";

export interface ContractTarget {
  /** Opens the store under test; called once for the whole block. */
  open(): Promise<Store>;
  /** Removes what open() created, after the store is closed. */
  dispose?(): Promise<void>;
}

/** A watch that records everything it is told. */
export interface Recorder {
  watch: Watch;
  batches: WatchEvent[][];
  events: WatchEvent[];
  progress: number[];
  errors: Error[];
}

export function record(store: Store, prefix: string, fromRevision: number): Recorder {
  const r: Omit<Recorder, "watch"> = { batches: [], events: [], progress: [], errors: [] };
  const watch = store.watch(prefix, fromRevision, {
    onEvents: (events) => {
      r.batches.push(events);
      r.events.push(...events);
    },
    onProgress: (revision) => r.progress.push(revision),
    onError: (error) => r.errors.push(error),
  });
  return { watch, ...r };
}

export async function waitFor(what: string, condition: () => boolean, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Lease TTL for tests: etcd's minimum with default election settings. */
const TTL = 2;

export function describeStoreContract(name: string, target: ContractTarget): void {
  describe(`Store contract: ${name}`, () => {
    let store: Store;
    const root = `/capstan-test/${uniqueName("store")}/`;
    let n = 0;
    /** A fresh prefix per test, so tests never see each other's keys. */
    const fresh = () => `${root}t${++n}/`;

    beforeAll(async () => {
      store = await target.open();
    });
    afterAll(async () => {
      await store.deletePrefix(root);
      await store.close();
      await target.dispose?.();
    });

    it("puts, gets, deletes and lists with etcd's revision metadata", async () => {
      const p = fresh();
      const before = await store.revision();
      const r1 = await store.put(`${p}a`, "1");
      expect(r1).toMatchObject({ succeeded: true });
      expect(r1.revision).toBeGreaterThan(before);
      expect(await store.get(`${p}a`)).toEqual({
        key: `${p}a`,
        value: "1",
        createRevision: r1.revision,
        modRevision: r1.revision,
        version: 1,
      });

      const r2 = await store.put(`${p}a`, "2");
      expect(r2.revision).toBeGreaterThan(r1.revision);
      expect(await store.get(`${p}a`)).toMatchObject({
        value: "2",
        createRevision: r1.revision,
        modRevision: r2.revision,
        version: 2,
      });

      await store.put(`${p}b`, "x");
      await store.put(`${p}c/d`, "y");
      await store.put(`${root}t${n}x`, "outside the prefix");
      const listed = await store.list(p);
      expect(listed.items.map((kv) => kv.key)).toEqual([`${p}a`, `${p}b`, `${p}c/d`]);
      expect(listed.more).toBe(false);
      expect(listed.revision).toBeGreaterThanOrEqual(listed.items[2]!.modRevision);
      expect(listed.revision).toBeLessThanOrEqual(await store.revision());

      const del = await store.delete(`${p}a`);
      expect(del.succeeded).toBe(true);
      expect(del.revision).toBeGreaterThan(r2.revision);
      expect(await store.get(`${p}a`)).toBeNull();

      // A re-created key starts a new life: new createRevision, version 1.
      const r3 = await store.put(`${p}a`, "3");
      expect(await store.get(`${p}a`)).toMatchObject({ createRevision: r3.revision, version: 1 });
      await store.delete(`${root}t${n}x`);
    });

    it("lists at a past revision", async () => {
      const p = fresh();
      const r1 = await store.put(`${p}a`, "1");
      await store.put(`${p}b`, "1");
      const snapshot = await store.revision();
      await store.put(`${p}a`, "2");
      await store.delete(`${p}b`);
      await store.put(`${p}c`, "1");

      const past = await store.list(p, { revision: snapshot });
      expect(past.revision).toBe(snapshot);
      expect(past.items.map((kv) => [kv.key, kv.value])).toEqual([
        [`${p}a`, "1"],
        [`${p}b`, "1"],
      ]);
      expect(past.items[0]).toMatchObject({ createRevision: r1.revision, modRevision: r1.revision, version: 1 });

      const now = await store.list(p);
      expect(now.items.map((kv) => [kv.key, kv.value])).toEqual([
        [`${p}a`, "2"],
        [`${p}c`, "1"],
      ]);
      await expect(store.list(p, { revision: (await store.revision()) + 1000 })).rejects.toBeInstanceOf(RangeError);
    });

    it("paginates with limit/startAfter pinned at one revision", async () => {
      const p = fresh();
      const keys = Array.from({ length: 10 }, (_, i) => `${p}k${String(i).padStart(2, "0")}`);
      for (const k of keys) await store.put(k, `v-${k}`);

      const first = await store.list(p, { limit: 3 });
      expect(first.items).toHaveLength(3);
      expect(first.more).toBe(true);
      // Changes after the first page must not show up in later pages of the same snapshot.
      await store.put(`${p}k045`, "new");
      await store.put(keys[7]!, "changed");
      await store.delete(keys[9]!);

      const seen = [...first.items];
      let page = first;
      while (page.more) {
        page = await store.list(p, { limit: 3, revision: first.revision, startAfter: seen.at(-1)!.key });
        expect(page.revision).toBe(first.revision);
        seen.push(...page.items);
      }
      expect(seen.map((kv) => kv.key)).toEqual(keys);
      expect(seen.map((kv) => kv.value)).toEqual(keys.map((k) => `v-${k}`));

      const exact = await store.list(p, { limit: 11 });
      expect(exact.more).toBe(false);
      expect(exact.items).toHaveLength(10); // k045 added, k09 deleted
    });

    it("create-only put succeeds once and then reports a failed compare", async () => {
      const p = fresh();
      const createOnly: Compare[] = [{ key: `${p}a`, target: "createRevision", equals: 0 }];
      const first = await store.put(`${p}a`, "first", { expect: createOnly });
      expect(first.succeeded).toBe(true);
      const second = await store.put(`${p}a`, "second", { expect: createOnly });
      expect(second).toEqual({ succeeded: false, revision: expect.any(Number) });
      expect(second.revision).toBeGreaterThanOrEqual(first.revision);
      expect((await store.get(`${p}a`))?.value).toBe("first");
    });

    it("compare-and-swaps on modRevision, for put and delete", async () => {
      const p = fresh();
      const r1 = await store.put(`${p}a`, "1");
      const stale: Compare[] = [{ key: `${p}a`, target: "modRevision", equals: r1.revision }];
      const r2 = await store.put(`${p}a`, "2", { expect: stale });
      expect(r2.succeeded).toBe(true);
      expect((await store.put(`${p}a`, "3", { expect: stale })).succeeded).toBe(false);
      expect((await store.delete(`${p}a`, { expect: stale })).succeeded).toBe(false);
      expect((await store.get(`${p}a`))?.value).toBe("2");
      const current: Compare[] = [{ key: `${p}a`, target: "modRevision", equals: r2.revision }];
      expect((await store.delete(`${p}a`, { expect: current })).succeeded).toBe(true);
      expect(await store.get(`${p}a`)).toBeNull();
    });

    it("keeps a counter exact under 20 racing read-CAS-retry writers", async () => {
      const p = fresh();
      const key = `${p}counter`;
      const start = await store.revision();
      const increment = async () => {
        for (;;) {
          const kv = await store.get(key);
          const expect: Compare[] = kv
            ? [{ key, target: "modRevision", equals: kv.modRevision }]
            : [{ key, target: "createRevision", equals: 0 }];
          const result = await store.put(key, String(Number(kv?.value ?? "0") + 1), { expect });
          if (result.succeeded) return;
        }
      };
      const writers = Array.from({ length: 20 }, async () => {
        for (let i = 0; i < 5; i++) await increment();
      });
      await Promise.all(writers);
      expect((await store.get(key))?.value).toBe("100");

      // History agrees: exactly 100 puts, values 1..100 in revision order.
      const r = record(store, key, start + 1);
      await waitFor("100 counter events", () => r.events.length >= 100);
      expect(r.events.map((e) => e.kv.value)).toEqual(Array.from({ length: 100 }, (_, i) => String(i + 1)));
      await r.watch.close();
    });

    it("lets exactly one of 20 racing create-only writers win", async () => {
      const p = fresh();
      const key = `${p}owner`;
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.put(key, `writer-${i}`, { expect: [{ key, target: "createRevision", equals: 0 }] }),
        ),
      );
      const winners = results.flatMap((r, i) => (r.succeeded ? [i] : []));
      expect(winners).toHaveLength(1);
      expect((await store.get(key))?.value).toBe(`writer-${winners[0]}`);
    });

    it("applies a multi-key transaction atomically, success and failure branches", async () => {
      const p = fresh();
      const ra = await store.put(`${p}a`, "A");
      const ok = await store.txn(
        [{ key: `${p}a`, target: "modRevision", equals: ra.revision }],
        [
          { type: "put", key: `${p}b`, value: "B" },
          { type: "put", key: `${p}c`, value: "C" },
          { type: "delete", key: `${p}a` },
        ],
        [{ type: "put", key: `${p}d`, value: "D" }],
      );
      expect(ok.succeeded).toBe(true);
      expect(ok.revision).toBeGreaterThan(ra.revision);
      expect(await store.get(`${p}a`)).toBeNull();
      expect(await store.get(`${p}b`)).toMatchObject({ value: "B", modRevision: ok.revision });
      expect(await store.get(`${p}c`)).toMatchObject({ value: "C", modRevision: ok.revision });
      expect(await store.get(`${p}d`)).toBeNull();

      const failed = await store.txn(
        [{ key: `${p}b`, target: "modRevision", equals: ra.revision }],
        [
          { type: "put", key: `${p}b`, value: "B2" },
          { type: "delete", key: `${p}c` },
        ],
        [{ type: "put", key: `${p}d`, value: "D" }],
      );
      expect(failed.succeeded).toBe(false);
      expect(await store.get(`${p}b`)).toMatchObject({ value: "B", modRevision: ok.revision });
      expect(await store.get(`${p}c`)).not.toBeNull();
      expect(await store.get(`${p}d`)).toMatchObject({ value: "D", modRevision: failed.revision });

      // Every compare target, and the etcd rule that a value compare on an absent key fails.
      const all = await store.txn(
        [
          { key: `${p}b`, target: "value", equals: "B" },
          { key: `${p}b`, target: "version", equals: 1 },
          { key: `${p}b`, target: "lease", equals: "0" },
          { key: `${p}b`, target: "createRevision", equals: ok.revision },
          { key: `${p}absent`, target: "modRevision", equals: 0 },
          { key: `${p}absent`, target: "version", equals: 0 },
        ],
        [{ type: "put", key: `${p}e`, value: "E" }],
      );
      expect(all.succeeded).toBe(true);
      const absentValue = await store.txn(
        [{ key: `${p}absent`, target: "value", equals: "" }],
        [{ type: "put", key: `${p}f`, value: "F" }],
      );
      expect(absentValue.succeeded).toBe(false);
      expect(await store.get(`${p}f`)).toBeNull();
    });

    it("refuses ambiguous or malformed requests with typed errors", async () => {
      const p = fresh();
      await expect(store.deletePrefix("")).rejects.toBeInstanceOf(TypeError);
      await expect(store.put("", "x")).rejects.toBeInstanceOf(TypeError);
      await expect(
        store.txn(
          [],
          [
            { type: "put", key: `${p}a`, value: "1" },
            { type: "put", key: `${p}a`, value: "2" },
          ],
        ),
      ).rejects.toBeInstanceOf(TypeError);
      await expect(
        store.txn(
          [],
          [
            { type: "put", key: `${p}dir/a`, value: "1" },
            { type: "deletePrefix", prefix: `${p}dir/` },
          ],
        ),
      ).rejects.toBeInstanceOf(TypeError);
      await expect(store.list(p, { limit: 0 })).rejects.toBeInstanceOf(RangeError);
      expect(() => store.watch(p, 0, { onEvents: () => {}, onError: () => {} })).toThrow(RangeError);
      expect((await store.list(p)).items).toEqual([]);
    });

    it("deletes a prefix in one revision, with one watch call for all its deletes", async () => {
      const p = fresh();
      for (let i = 0; i < 5; i++) await store.put(`${p}dir/${i}`, "x");
      await store.put(`${p}dirx`, "not under dir/");
      const r = record(store, `${p}`, (await store.revision()) + 1);
      const result = await store.deletePrefix(`${p}dir/`);
      expect(result.succeeded).toBe(true);
      await waitFor("delete events", () => r.events.length >= 5);
      expect(r.batches).toHaveLength(1);
      expect(r.events.map((e) => [e.type, e.kv.key, e.kv.modRevision, e.kv.value])).toEqual(
        Array.from({ length: 5 }, (_, i) => ["delete", `${p}dir/${i}`, result.revision, ""]),
      );
      expect(r.events[0]!.prevKv).toMatchObject({ key: `${p}dir/0`, value: "x" });
      expect((await store.list(`${p}dir/`)).items).toEqual([]);
      expect(await store.get(`${p}dirx`)).not.toBeNull();
      await r.watch.close();
    });

    it("watches from a revision with nothing missed: 500 writes, and a resume from the middle", async () => {
      const p = fresh();
      const from = (await store.revision()) + 1;
      const w1 = record(store, p, from);
      const written = new Map<number, string>(); // revision -> key
      const chains = Array.from({ length: 10 }, async (_, c) => {
        for (let i = 0; i < 50; i++) {
          const key = `${p}c${c}/k${i}`;
          const { revision } = await store.put(key, `v${i}`);
          written.set(revision, key);
        }
      });
      await Promise.all(chains);
      await waitFor("500 events on the first watch", () => w1.events.length >= 500, 30_000);
      expect(w1.errors).toEqual([]);
      expect(w1.events).toHaveLength(500);
      const revisions = w1.events.map((e) => e.kv.modRevision);
      for (let i = 1; i < revisions.length; i++) expect(revisions[i]).toBeGreaterThan(revisions[i - 1]!);
      expect(w1.events.map((e) => [e.kv.modRevision, e.kv.key])).toEqual(
        [...written.entries()].sort((a, b) => a[0] - b[0]),
      );
      expect(w1.events.every((e) => e.type === "put" && e.kv.version === 1 && e.prevKv === undefined)).toBe(true);

      const middle = w1.events[250]!.kv.modRevision;
      const w2 = record(store, p, middle);
      await waitFor("the resumed watch to catch up", () => w2.events.length >= 250, 30_000);
      expect(w2.errors).toEqual([]);
      expect(w2.events).toEqual(w1.events.slice(250));
      await Promise.all([w1.watch.close(), w2.watch.close()]);
    });

    it("delivers all events of one transaction in one onEvents call, with prevKv", async () => {
      const p = fresh();
      await store.put(`${p}a`, "old");
      const r = record(store, p, (await store.revision()) + 1);
      const txn = await store.txn(
        [],
        [
          { type: "put", key: `${p}a`, value: "new" },
          { type: "put", key: `${p}b`, value: "1" },
          { type: "put", key: `${p}c`, value: "1" },
        ],
      );
      await store.put(`${p}d`, "later");
      await waitFor("4 events", () => r.events.length >= 4);
      const txnBatch = r.batches.find((b) => b.some((e) => e.kv.modRevision === txn.revision))!;
      expect(txnBatch.filter((e) => e.kv.modRevision === txn.revision).map((e) => e.kv.key)).toEqual([
        `${p}a`,
        `${p}b`,
        `${p}c`,
      ]);
      expect(r.events[0]).toMatchObject({
        type: "put",
        kv: { value: "new", version: 2 },
        prevKv: { value: "old", version: 1 },
      });
      await r.watch.close();
    });

    it("sends progress notifications with a revision covering what was delivered", async () => {
      const p = fresh();
      const r = record(store, p, (await store.revision()) + 1);
      const put = await store.put(`${p}a`, "1");
      await waitFor("the event", () => r.events.length === 1);
      r.watch.requestProgress();
      // etcd before 3.4.31/3.5.13 cannot answer a progress request safely; its periodic progress
      // notification (5 s on the test etcd) is what arrives there.
      await waitFor("a progress notification", () => r.progress.length > 0, 20_000);
      expect(r.progress[0]).toBeGreaterThanOrEqual(put.revision);
      expect(r.errors).toEqual([]);
      await r.watch.close();
    }, 30_000);

    it("waits on a watch started at a future revision", async () => {
      const p = fresh();
      const from = (await store.revision()) + 3;
      const r = record(store, p, from);
      const puts: number[] = [];
      for (let i = 0; i < 6; i++) puts.push((await store.put(`${p}k${i}`, "x")).revision);
      const expected = puts.filter((rev) => rev >= from);
      await waitFor("events at or after the start revision", () => r.events.length >= expected.length);
      await sleep(100);
      expect(r.events.map((e) => e.kv.modRevision)).toEqual(expected);
      await r.watch.close();
    });

    it("stops delivering after close and after a throwing handler", async () => {
      const p = fresh();
      const from = (await store.revision()) + 1;
      const closed = record(store, p, from);
      await closed.watch.close();
      const thrown: Error[] = [];
      let calls = 0;
      store.watch(p, from, {
        onEvents: () => {
          calls++;
          throw new Error("consumer bug");
        },
        onError: (e) => thrown.push(e),
      });
      await store.put(`${p}a`, "1");
      await store.put(`${p}b`, "1");
      await waitFor("the watch to fail", () => thrown.length > 0);
      await sleep(200);
      expect(calls).toBe(1);
      expect(thrown).toHaveLength(1);
      expect(thrown[0]!.name).toBe("WatchBrokenError");
      expect(closed.events).toEqual([]);
      expect(closed.errors).toEqual([]);
    });

    it("fails lists and watches below the compact revision with CompactedError", async () => {
      const p = fresh();
      const r1 = await store.put(`${p}k`, "1");
      await store.put(`${p}k`, "2");
      const r3 = await store.put(`${p}k`, "3");
      const r4 = await store.put(`${p}k`, "4");
      await store.compact(r3.revision);
      await store.compact(r1.revision); // already compacted past: a no-op

      const listError = await store.list(p, { revision: r1.revision }).catch((e: unknown) => e);
      expect(listError).toBeInstanceOf(CompactedError);
      // >=: the shared etcd may be compacted further by someone else meanwhile.
      expect((listError as CompactedError).compactRevision).toBeGreaterThanOrEqual(r3.revision);
      expect((listError as CompactedError).compactRevision).toBeLessThanOrEqual(await store.revision());
      expect((listError as CompactedError).requestedRevision).toBe(r1.revision);
      const atCompaction = await store.list(p, { revision: r3.revision });
      expect(atCompaction.items.map((kv) => kv.value)).toEqual(["3"]);

      const below = record(store, p, r1.revision);
      await waitFor("the compaction error", () => below.errors.length > 0);
      expect(below.errors).toHaveLength(1);
      expect(below.errors[0]).toBeInstanceOf(CompactedError);
      expect((below.errors[0] as CompactedError).compactRevision).toBeGreaterThanOrEqual(r3.revision);
      expect(below.events).toEqual([]);

      const at = record(store, p, r3.revision);
      await waitFor("events from the compact revision", () => at.events.length >= 2);
      expect(at.events.map((e) => [e.kv.modRevision, e.kv.value])).toEqual([
        [r3.revision, "3"],
        [r4.revision, "4"],
      ]);
      await at.watch.close();
    });

    it("expires a lease without keep-alive: its keys vanish with delete events", async () => {
      const p = fresh();
      const lease = await store.grantLease(TTL);
      expect(lease.ttlSeconds).toBeGreaterThanOrEqual(TTL);
      await store.put(`${p}a`, "1", { lease: lease.id });
      await store.put(`${p}b`, "1", { lease: lease.id });
      expect((await store.get(`${p}a`))?.lease).toBe(lease.id);
      const r = record(store, p, (await store.revision()) + 1);
      await waitFor("lease expiry deletes", () => r.events.length >= 2, 10_000);
      expect(r.events.map((e) => [e.type, e.kv.key])).toEqual([
        ["delete", `${p}a`],
        ["delete", `${p}b`],
      ]);
      expect(r.events[0]!.kv.modRevision).toBe(r.events[1]!.kv.modRevision);
      expect(await store.get(`${p}a`)).toBeNull();
      await expect(lease.keepAliveOnce()).rejects.toBeInstanceOf(LeaseLostError);
      await r.watch.close();
    });

    it("keeps a lease alive with keepAliveOnce; revoke deletes at once; a revoked lease is lost", async () => {
      const p = fresh();
      const lease = await store.grantLease(TTL);
      await store.put(`${p}a`, "1", { lease: lease.id });
      const until = Date.now() + (TTL + 1.5) * 1000;
      while (Date.now() < until) {
        expect(await lease.keepAliveOnce()).toBeGreaterThan(0);
        await sleep(500);
      }
      expect(await store.get(`${p}a`)).toMatchObject({ value: "1", lease: lease.id });

      const r = record(store, p, (await store.revision()) + 1);
      await lease.revoke();
      expect(await store.get(`${p}a`)).toBeNull();
      await waitFor("the revoke's delete event", () => r.events.length >= 1);
      expect(r.events[0]).toMatchObject({ type: "delete", kv: { key: `${p}a` } });
      await expect(lease.keepAliveOnce()).rejects.toBeInstanceOf(LeaseLostError);
      await expect(store.put(`${p}b`, "1", { lease: lease.id })).rejects.toBeInstanceOf(LeaseLostError);
      await lease.revoke(); // idempotent
      await r.watch.close();
    }, 30_000);
  });
}
