import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";
import { CacheSyncTimeoutError, Informer, InformerStoppedError, type EventHandler } from "../../../runtime/informer.ts";
import type { KeyValueLike, ListWatchSource } from "../../../runtime/listwatch.ts";
import { FakeListWatch } from "./fake-listwatch.ts";

type Obj = { v: string; rev: number };
type Seen =
  | { type: "add"; key: string; v: string; initial: boolean }
  | { type: "update"; key: string; old: string; v: string }
  | { type: "delete"; key: string; v: string; unknown: boolean };

const decode = (kv: KeyValueLike): Obj => {
  const parsed = JSON.parse(kv.value) as { v?: unknown };
  if (typeof parsed.v !== "string") throw new Error("no v");
  return { v: parsed.v, rev: kv.modRevision };
};
const val = (v: string) => JSON.stringify({ v });

function setup(opts: { pageSize?: number } = {}) {
  const store = new FakeListWatch();
  const clock = new FakeClock();
  const registry = new Registry();
  const informer = new Informer<Obj>({
    name: "things",
    source: store,
    prefix: "/t/",
    decode,
    clock,
    registry,
    random: () => 0, // back-off delays exactly 800, 1600, ... ms
    ...(opts.pageSize !== undefined && { pageSize: opts.pageSize }),
  });
  const seen: Seen[] = [];
  const handler: EventHandler<Obj> = {
    onAdd: (o, key, m) => seen.push({ type: "add", key, v: o.v, initial: m.isInInitialList }),
    onUpdate: (o, n, key) => seen.push({ type: "update", key, old: o.v, v: n.v }),
    onDelete: (o, key, m) => seen.push({ type: "delete", key, v: o.v, unknown: m.finalStateUnknown }),
  };
  informer.addEventHandler(handler);
  return { store, clock, registry, informer, seen };
}

async function metric(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
}

describe("Informer", () => {
  it("lists in pages pinned at one revision, then watches from the next revision without a gap", async () => {
    const { store, informer, seen } = setup({ pageSize: 2 });
    for (const k of ["a", "b", "c", "d", "e"]) store.put(`/t/${k}`, val(k));
    store.put("/other/x", val("x"));
    const listRevision = store.rev;
    // Writes that land between pages must not leak into the snapshot; the watch delivers them.
    store.beforeListPage = (call) => {
      if (call === 1) {
        store.put("/t/a", val("a2"));
        store.del("/t/e");
        store.put("/t/f", val("f"));
      }
    };
    informer.start();
    await informer.waitForSync();
    await flushMicrotasks();
    expect(store.listCalls).toBe(3);
    expect(informer.lastSyncRevision).toBe(listRevision);
    expect(seen.filter((s) => s.type === "add" && s.initial).map((s) => s.key)).toEqual(["/t/a", "/t/b", "/t/c", "/t/d", "/t/e"]);
    expect(seen.slice(5)).toEqual([
      { type: "update", key: "/t/a", old: "a", v: "a2" },
      { type: "delete", key: "/t/e", v: "e", unknown: false },
      { type: "add", key: "/t/f", v: "f", initial: false },
    ]);
    expect(new Set(informer.keys())).toEqual(new Set(store.snapshot("/t/").keys()));
    expect(informer.get("/t/a")).toEqual({ v: "a2", rev: listRevision + 1 });
    await informer.stop();
  });

  it("keeps its own resume revision: last event + 1, progress revision + 1", async () => {
    const { store, informer } = setup();
    store.put("/t/a", val("a"));
    informer.start();
    await informer.waitForSync();
    expect(informer.resumeRevision).toBe(store.rev + 1);
    const r = store.put("/t/b", val("b"));
    store.put("/unrelated", val("u")); // advances the store, not the cache
    await flushMicrotasks();
    expect(informer.resumeRevision).toBe(r + 1);
    expect(informer.cacheRevision()).toBe(r);
    // A progress notification at N says everything <= N was delivered: resume from N + 1.
    const watch = store.watches.at(-1)!;
    watch.handlers.onProgress?.(store.rev);
    expect(informer.resumeRevision).toBe(store.rev + 1);
    // A stale progress never moves it back.
    watch.handlers.onProgress?.(1);
    expect(informer.resumeRevision).toBe(store.rev + 1);
    await informer.stop();
  });

  it("relists after a watch error and diffs: update, delete with finalStateUnknown, add; unchanged keys silent", async () => {
    const { store, clock, registry, informer, seen } = setup();
    for (const k of ["a", "b", "c"]) store.put(`/t/${k}`, val(k));
    informer.start();
    await informer.waitForSync();
    seen.length = 0;
    store.breakWatches();
    await flushMicrotasks();
    // While the watch is down:
    store.put("/t/a", val("a2"));
    store.del("/t/b");
    store.put("/t/d", val("d"));
    expect(seen).toEqual([]);
    await clock.advanceAsync(800); // back-off before the relist
    expect(seen).toEqual([
      { type: "update", key: "/t/a", old: "a", v: "a2" },
      { type: "add", key: "/t/d", v: "d", initial: false },
      { type: "delete", key: "/t/b", v: "b", unknown: true },
    ]);
    expect(await metric(registry, "informer_relists_total", { reason: "watch-error" })).toBe(1);
    expect(await metric(registry, "informer_relists_total", { reason: "compacted" })).toBe(0);
    expect(informer.resumeRevision).toBe(store.rev + 1);
    // And it watches again from there.
    store.put("/t/c", val("c2"));
    await flushMicrotasks();
    expect(seen.at(-1)).toEqual({ type: "update", key: "/t/c", old: "c", v: "c2" });
    expect(await metric(registry, "informer_objects")).toBe(3);
    await informer.stop();
  });

  it("treats compaction past its resume revision as a relist, labelled compacted", async () => {
    const { store, clock, registry, informer, seen } = setup();
    store.put("/t/a", val("a"));
    store.put("/t/b", val("b"));
    informer.start();
    await informer.waitForSync();
    seen.length = 0;
    store.silent = true; // the watch falls behind ...
    store.del("/t/a");
    store.put("/t/c", val("c"));
    store.compact(store.rev); // ... and its history is compacted away
    store.silent = false;
    await flushMicrotasks();
    await clock.advanceAsync(800);
    expect(await metric(registry, "informer_relists_total", { reason: "compacted" })).toBe(1);
    expect(seen).toEqual([
      { type: "add", key: "/t/c", v: "c", initial: false },
      { type: "delete", key: "/t/a", v: "a", unknown: true },
    ]);
    expect(informer.keys().sort()).toEqual(["/t/b", "/t/c"]);
    await informer.stop();
  });

  it("declares a silent watch broken after the liveness deadline, but not one that answers progress requests", async () => {
    const { store, clock, registry, informer } = setup();
    informer.start();
    await informer.waitForSync();
    // Quiet but alive: progress requests are answered, so no relist however long it is quiet.
    await clock.advanceAsync(60_000);
    expect(await metric(registry, "informer_relists_total", { reason: "liveness" })).toBe(0);
    expect(store.liveWatches()).toBe(1);
    // Half-open: nothing arrives any more.
    store.silent = true;
    await clock.advanceAsync(29_000);
    expect(await metric(registry, "informer_relists_total", { reason: "liveness" })).toBe(0);
    await clock.advanceAsync(6_000); // the 30 s liveness deadline passes at a check in this window
    store.silent = false;
    await clock.advanceAsync(1_600); // covers the 800 ms back-off before the relist
    expect(await metric(registry, "informer_relists_total", { reason: "liveness" })).toBe(1);
    expect(store.liveWatches()).toBe(1);
    await informer.stop();
  });

  it("skips values that do not decode, counts them, and drops a cached key whose new value does not decode", async () => {
    const { store, registry, informer, seen } = setup();
    store.put("/t/good", val("g"));
    store.put("/t/bad", "not json");
    informer.start();
    await informer.waitForSync();
    expect(informer.keys()).toEqual(["/t/good"]);
    expect(await metric(registry, "informer_decode_errors_total")).toBe(1);
    store.put("/t/good", JSON.stringify({ v: 42 }));
    await flushMicrotasks();
    expect(informer.get("/t/good")).toBeUndefined();
    expect(seen.at(-1)).toEqual({ type: "delete", key: "/t/good", v: "g", unknown: false });
    expect(await metric(registry, "informer_decode_errors_total")).toBe(2);
    await informer.stop();
  });

  it("retries a failing list with 800 ms doubling back-off, reset after 2 min healthy", async () => {
    const { store, clock, informer } = setup();
    store.failLists = 3;
    informer.start();
    await flushMicrotasks();
    expect(store.listCalls).toBe(1);
    await clock.advanceAsync(799);
    expect(store.listCalls).toBe(1);
    await clock.advanceAsync(1);
    expect(store.listCalls).toBe(2);
    await clock.advanceAsync(1_600);
    expect(store.listCalls).toBe(3);
    await clock.advanceAsync(3_200);
    expect(store.listCalls).toBe(4);
    expect(informer.hasSynced()).toBe(true);
    // Healthy for more than 2 min: the next failure starts again at 800 ms.
    await clock.advanceAsync(121_000);
    store.breakWatches();
    await flushMicrotasks();
    const before = store.listCalls;
    await clock.advanceAsync(800);
    expect(store.listCalls).toBe(before + 1);
    await informer.stop();
  });

  it("never stops on its own: a throwing handler is counted and later events still arrive", async () => {
    const { store, registry, informer, seen } = setup();
    informer.addEventHandler({
      onAdd: () => {
        throw new Error("handler bug");
      },
    });
    informer.start();
    await informer.waitForSync();
    store.put("/t/x", val("x"));
    store.put("/t/y", val("y"));
    await flushMicrotasks();
    expect(seen.map((s) => s.key)).toEqual(["/t/x", "/t/y"]);
    expect(await metric(registry, "informer_handler_errors_total")).toBe(2);
    await informer.stop();
  });

  it("replays the cache to a handler added after sync, as initial-list adds", async () => {
    const { store, informer } = setup();
    store.put("/t/a", val("a"));
    informer.start();
    await informer.waitForSync();
    const late: string[] = [];
    informer.addEventHandler({ onAdd: (_o, key, m) => late.push(`${key}:${m.isInInitialList}`) });
    expect(late).toEqual(["/t/a:true"]);
    await informer.stop();
  });

  it("waitForSync times out with CacheSyncTimeoutError; waitForRevision resolves once the cache reaches it", async () => {
    const { store, clock, informer } = setup();
    store.failLists = 100;
    informer.start();
    const sync = informer.waitForSync(undefined, 5_000);
    const check = expect(sync).rejects.toBeInstanceOf(CacheSyncTimeoutError);
    await clock.advanceAsync(5_000);
    await check;
    store.failLists = 0;
    await clock.advanceAsync(30_000);
    expect(informer.hasSynced()).toBe(true);
    let reached = false;
    const target = store.rev + 2;
    const wait = informer.waitForRevision(target).then(() => (reached = true));
    store.put("/t/a", val("a"));
    await flushMicrotasks();
    expect(reached).toBe(false);
    store.put("/t/b", val("b"));
    await wait;
    expect(informer.cacheRevision()).toBeGreaterThanOrEqual(target);
    await informer.stop();
  });

  it("a watch that a progress request ends at once is not checked again after it finished", async () => {
    const store = new FakeListWatch();
    const clock = new FakeClock();
    let lateRequests = 0;
    // Every watch breaks when asked for progress, inside requestProgress() itself.
    const source: ListWatchSource = {
      list: (prefix, options) => store.list(prefix, options),
      revision: () => store.revision(),
      watch: (prefix, from, handlers) => {
        const w = store.watch(prefix, from, handlers);
        let closed = false;
        return {
          requestProgress: () => {
            if (closed) lateRequests++;
            handlers.onError(new Error("stream reset"));
          },
          close: async () => {
            closed = true;
            await w.close();
          },
        };
      },
    };
    const informer = new Informer<Obj>({ name: "t", source, prefix: "/t/", decode, clock, random: () => 0 });
    informer.start();
    await informer.waitForSync();
    await clock.advanceAsync(60_000); // several watches, each ended by its first progress request
    expect(lateRequests).toBe(0);
    await informer.stop();
    expect(clock.pendingTimers()).toBe(0); // no liveness check outlives its watch
  });

  it("forgets sync and revision waiters that timed out or were aborted", async () => {
    const { store, clock, informer } = setup();
    store.failLists = 1_000;
    informer.start();
    const waiters = informer as unknown as { syncWaiters: unknown[]; revisionWaiters: unknown[] };
    for (let i = 0; i < 5; i++) {
      const sync = expect(informer.waitForSync(undefined, 1_000)).rejects.toBeInstanceOf(CacheSyncTimeoutError);
      const revision = expect(informer.waitForRevision(100, undefined, 1_000)).rejects.toThrow(/did not complete/);
      await clock.advanceAsync(1_000);
      await sync;
      await revision;
    }
    const abort = new AbortController();
    const aborted = expect(informer.waitForRevision(100, abort.signal)).rejects.toThrow("gave up");
    abort.abort(new Error("gave up"));
    await aborted;
    expect(waiters.syncWaiters).toHaveLength(0);
    expect(waiters.revisionWaiters).toHaveLength(0);
    await informer.stop();
  });

  it("rejects pending revision and sync waiters with InformerStoppedError on stop, and new ones at once", async () => {
    const { store, informer } = setup();
    informer.start();
    await informer.waitForSync();
    const pending = informer.waitForRevision(store.rev + 10);
    const outcome = pending.then(
      () => "resolved",
      (e: unknown) => e,
    );
    await informer.stop();
    expect(await outcome).toBeInstanceOf(InformerStoppedError);
    expect(String(await outcome)).toBe("InformerStoppedError: informer things was stopped");
    await expect(informer.waitForRevision(store.rev + 10)).rejects.toBeInstanceOf(InformerStoppedError);

    const never = setup();
    never.store.failLists = 1_000;
    never.informer.start();
    const sync = expect(never.informer.waitForSync()).rejects.toBeInstanceOf(InformerStoppedError);
    await never.informer.stop();
    await sync;
  });

  it("exports watch lag and last event age at scrape time", async () => {
    const { store, clock, registry, informer } = setup();
    informer.start();
    await informer.waitForSync();
    store.put("/elsewhere/1", val("1"));
    store.put("/elsewhere/2", val("2"));
    await clock.advanceAsync(3_000);
    expect(await metric(registry, "informer_watch_lag_revisions")).toBe(2);
    expect(await metric(registry, "informer_last_event_age_seconds")).toBe(3);
    await informer.stop();
  });
});
