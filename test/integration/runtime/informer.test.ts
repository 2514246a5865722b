// The informer against real stores: a private etcd process (these tests compact, and compaction
// is store-wide, so the shared etcd is left alone), one that is SIGKILLed mid-write, and the
// embedded SQLite store when it is present.
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { StoreCompactor } from "../../../runtime/compactor.ts";
import { Informer } from "../../../runtime/informer.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { uniqueName } from "../../helpers/services.ts";
import {
  decodeObj,
  eventually,
  EventRecorder,
  PartitionableSource,
  putMany,
  readAll,
  retrying,
  privateEtcd,
  sqliteFactory,
  type Obj,
  type StoreFactory,
} from "./support.ts";

async function metric(registry: Registry, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
}

const factories: StoreFactory[] = [privateEtcd()];
const sqlite = await sqliteFactory();
factories.push(sqlite);

describe.each(factories)("Informer over $name", (factory) => {
  let store: Store;
  const prefixes: string[] = [];

  beforeAll(async () => {
    store = await factory.open();
  });

  afterAll(async () => {
    for (const p of prefixes) await store.deletePrefix(p);
    await store.close();
    await factory.cleanup();
  });

  function newPrefix(): string {
    const p = `/test/${uniqueName("informer")}/`;
    prefixes.push(p);
    return p;
  }

  it("syncs 10,000 keys into a cache equal to the store, then follows writes", async () => {
    const prefix = newPrefix();
    const value = (i: number) => JSON.stringify({ name: `obj-${i}`, pad: "x".repeat(150), i });
    await putMany(
      store,
      Array.from({ length: 10_000 }, (_, i) => [`${prefix}${String(i).padStart(5, "0")}`, value(i)]),
    );
    const registry = new Registry();
    const informer = new Informer<Obj>({ name: "sync", source: store, prefix, decode: decodeObj, registry, pageSize: 1000 });
    const recorder = new EventRecorder();
    recorder.attach(informer);
    informer.start();
    await informer.waitForSync(undefined, 30_000);
    expect(informer.size).toBe(10_000);
    expect(recorder.values()).toEqual(await readAll(store, prefix));
    expect(await metric(registry, "informer_objects", { name: "sync" })).toBe(10_000);

    const r1 = (await store.put(`${prefix}00001`, "changed")).revision;
    const r2 = (await store.delete(`${prefix}00002`)).revision;
    const r3 = (await store.put(`${prefix}new`, "new")).revision;
    await informer.waitForRevision(Math.max(r1, r2, r3), undefined, 10_000);
    expect(informer.get(`${prefix}00001`)?.value).toBe("changed");
    expect(informer.get(`${prefix}00002`)).toBeUndefined();
    expect(informer.get(`${prefix}new`)?.modRevision).toBe(r3);
    expect(recorder.values()).toEqual(await readAll(store, prefix));
    expect(recorder.violations).toEqual([]);
    await informer.stop();
  });

  it("after a partition during which keys changed and history was compacted, relists and converges", async () => {
    const prefix = newPrefix();
    await putMany(store, Array.from({ length: 50 }, (_, i) => [`${prefix}k${i}`, `v${i}`]));
    const source = new PartitionableSource(store);
    const registry = new Registry();
    const informer = new Informer<Obj>({ name: "partition", source, prefix, decode: decodeObj, registry });
    const recorder = new EventRecorder();
    recorder.attach(informer);
    informer.start();
    await informer.waitForSync(undefined, 10_000);
    const resumeBefore = informer.resumeRevision;

    source.partition();
    for (let i = 0; i < 10; i++) await store.delete(`${prefix}k${i}`);
    for (let i = 10; i < 20; i++) await store.put(`${prefix}k${i}`, `changed${i}`);
    await store.put(`${prefix}added`, "added");
    const now = await store.revision();
    await store.compact(now);
    // The history the informer would need to resume is gone:
    const compacted = await new Promise<Error>((resolve) => {
      const w = store.watch(prefix, resumeBefore, { onEvents: () => {}, onError: resolve });
      setTimeout(() => void w.close(), 5_000);
    });
    expect(compacted.name).toBe("CompactedError");

    source.heal();
    const converged = await eventually(async () => informer.cacheRevision() >= now, 15_000);
    expect(converged).toBe(true);
    expect(recorder.values()).toEqual(await readAll(store, prefix));
    expect(new Set(recorder.tombstones)).toEqual(new Set(Array.from({ length: 10 }, (_, i) => `${prefix}k${i}`)));
    expect(recorder.violations).toEqual([]);
    expect(await metric(registry, "informer_relists_total", { name: "partition", reason: "watch-error" })).toBeGreaterThanOrEqual(1);
    await informer.stop();
  });

  it("the compactor keeps only its retention window of history", async () => {
    const prefix = newPrefix();
    const first = (await store.put(`${prefix}a`, "1")).revision;
    await store.put(`${prefix}a`, "2");
    // A watch from the first revision replays history while it exists, and fails once it is gone.
    const historyGone = async () => {
      let watch: { close(): Promise<void> } | undefined;
      const err = await new Promise<Error | undefined>((resolve) => {
        watch = store.watch(prefix, first, { onEvents: () => resolve(undefined), onError: resolve });
        setTimeout(() => resolve(undefined), 1_000);
      });
      await watch?.close();
      return err?.name === "CompactedError";
    };
    expect(await historyGone()).toBe(false);
    const compactor = new StoreCompactor({ store, retentionMs: 200, intervalMs: 50 });
    const stop = new AbortController();
    const running = compactor.start(stop.signal);
    const gone = await eventually(historyGone, 10_000, 100);
    stop.abort();
    await running;
    expect(gone).toBe(true);
    // Current data is untouched.
    expect((await store.get(`${prefix}a`))?.value).toBe("2");
  });
});

describe("Informer over an etcd that is SIGKILLed and restarted while writes continue", () => {
  let etcd: EtcdProcess;
  let writer: Store;
  let reader: Store;

  beforeAll(async () => {
    etcd = await startEtcd();
    writer = new EtcdStore({ endpoints: [etcd.endpoint], callTimeoutMs: 1_000 });
    reader = new EtcdStore({ endpoints: [etcd.endpoint], callTimeoutMs: 1_000 });
  });

  afterAll(async () => {
    await writer?.close();
    await reader?.close();
    await etcd?.stop();
  });

  it("ends with the cache equal to the store and every key's last write observed, revisions monotonic", async () => {
    const prefix = "/kill/";
    const registry = new Registry();
    const informer = new Informer<Obj>({ name: "kill", source: reader, prefix, decode: decodeObj, registry, requestTimeoutMs: 2_000 });
    const recorder = new EventRecorder();
    recorder.attach(informer);
    informer.start();
    await informer.waitForSync(undefined, 10_000);

    // The writer's view of each key's final state (null: deleted). A write whose answer was lost
    // may have been applied; retrying it writes the same state again, so the final state holds.
    const expected = new Map<string, string | null>();
    let stop = false;
    let writes = 0;
    const writing = (async () => {
      for (let i = 0; !stop; i++) {
        const key = `${prefix}k${i % 40}`;
        if (i % 7 === 6) {
          await retrying(() => writer.delete(key));
          expected.set(key, null);
        } else {
          const value = JSON.stringify({ i });
          await retrying(() => writer.put(key, value));
          expected.set(key, value);
        }
        writes++;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    await new Promise((r) => setTimeout(r, 1_000));
    const beforeKill = writes;
    await etcd.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 1_500));
    await etcd.start();
    // Keep writing until the writer has made progress after the restart.
    expect(await eventually(() => writes > beforeKill + 100, 30_000)).toBe(true);
    stop = true;
    await writing;

    const want = new Map([...expected].filter((e): e is [string, string] => e[1] !== null));
    const converged = await eventually(async () => {
      const have = new Map(informer.keys().map((k) => [k, informer.get(k)!.value]));
      return JSON.stringify([...have].sort()) === JSON.stringify([...want].sort());
    }, 30_000);
    expect(converged, etcd.logTail()).toBe(true);
    // The cache, the store, the writer's view and the state rebuilt from events alone all agree.
    expect(await readAll(reader, prefix)).toEqual(want);
    expect(recorder.values()).toEqual(want);
    expect(recorder.violations).toEqual([]);
    expect(recorder.events).toBeGreaterThan(100);
    // It got there by relisting after the broken watch, not by luck.
    expect(await metric(registry, "informer_relists_total", { name: "kill", reason: "watch-error" })).toBeGreaterThanOrEqual(1);
    await informer.stop();
  });
});
