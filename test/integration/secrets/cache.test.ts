// SecretCache (api/secrets/cache.ts) on a private etcd (the vault's _sys keys are global), read
// through a source whose watch delivers 400 ms late, so each consistency rule is exercised in the
// window where the cache is behind the store: read-your-own-writes (PUT and DELETE), a miss
// confirmed by the store, a cache that does not catch up in time bypassed, answers from the cache
// alone once it is current, and nothing readable while sealed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { SecretCache } from "../../../api/secrets/cache.ts";
import { readSecrets, secretKey, SealedError, Vault } from "../../../api/secrets/index.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { CountingStore, lateWatch } from "../../helpers/store-doubles.ts";

const watchDelayMs = 400;
const app = "cacheapp";
const proc = `${app}.web.web`;
const record = (content: string) => ({ content, owner: "root", group: "root", mode: "400" });

let etcd: EtcdProcess;
let store: EtcdStore;
let counting: CountingStore;
let vault: Vault;
let shares: string[];
const caches: SecretCache[] = [];

/** A cache over the late watch; its reads through `counting`. */
async function startedCache(catchUpMs?: number): Promise<SecretCache> {
  const cache = new SecretCache(counting.store, vault, { source: lateWatch(store, watchDelayMs), ...(catchUpMs !== undefined ? { catchUpMs } : {}) });
  caches.push(cache);
  cache.informer.start();
  await cache.informer.waitForSync();
  return cache;
}

/** Writes as PUT does: encrypted under its address, one put. */
const put = async (p: string, path: string, content: string) => (await store.put(secretKey(app, p, path), vault.encrypt(app, p, path, record(content)))).revision;
const contents = (entries: { path: string; content: string }[]) => entries.map((e) => `${e.path}=${e.content}`);

beforeAll(async () => {
  etcd = await startEtcd();
  store = new EtcdStore({ endpoints: [etcd.endpoint] });
  counting = new CountingStore(store);
  vault = new Vault(store);
  shares = (await vault.init(1, 1)).keys;
  await vault.unseal(shares[0]!);
  await put(proc, "a.conf", "one");
});

afterAll(async () => {
  for (const cache of caches) await cache.informer.stop();
  await store?.close();
  await etcd?.stop();
});

describe("SecretCache", () => {
  it("answers from the cache alone once it is current, as the store reader would", async () => {
    const cache = await startedCache();
    const before = counting.reads;
    expect(contents(await cache.read(app))).toEqual(["a.conf=one"]);
    expect(contents(await cache.read(app, proc))).toEqual(["a.conf=one"]);
    expect(contents(await cache.read(app, proc, "a.conf"))).toEqual(["a.conf=one"]);
    expect(counting.reads).toBe(before);
    expect(await cache.read(app)).toEqual(await readSecrets(store, vault, app));
  });

  it("reads its own writes: a read after a write through it waits for the late watch, without a store read", async () => {
    const cache = await startedCache();
    const before = counting.reads;
    cache.wrote(app, await put(proc, "a.conf", "two"));
    const started = performance.now();
    expect(contents(await cache.read(app, proc))).toEqual(["a.conf=two"]);
    expect(performance.now() - started).toBeGreaterThan(watchDelayMs / 2); // it waited for the event
    expect(counting.reads).toBe(before);
  });

  it("reads its own deletes", async () => {
    const cache = await startedCache();
    await put(proc, "gone.conf", "x");
    await cache.informer.waitForRevision(await store.revision());
    const { revision } = await store.delete(secretKey(app, proc, "gone.conf"));
    cache.wrote(app, revision);
    expect(contents(await cache.read(app, proc))).toEqual(["a.conf=two"]);
  });

  it("after a DELETE here that found nothing but the cache still holds the key (deleted elsewhere), waits for the cache", async () => {
    const cache = await startedCache();
    const key = secretKey(app, proc, "elsewhere.conf");
    await put(proc, "elsewhere.conf", "x");
    await cache.informer.waitForRevision(await store.revision());
    const { revision } = await store.delete(key); // another replica's DELETE
    expect(cache.holds(key)).toBe(true); // its event is still on the way
    cache.wrote(app, revision); // what DELETE does when it found nothing and holds(key)
    expect(contents(await cache.read(app, proc))).toEqual(["a.conf=two"]);
    expect(cache.holds(key)).toBe(false);
  });

  it("confirms a miss with the store: a record written elsewhere a moment ago is not answered absent", async () => {
    const cache = await startedCache();
    const before = counting.reads;
    const other = `${app}.worker.w`;
    await put(other, "new.conf", "fresh"); // through another replica: no wrote() here
    expect(contents(await cache.read(app, other, "new.conf"))).toEqual(["new.conf=fresh"]);
    expect(contents(await cache.read(app, other))).toEqual(["new.conf=fresh"]);
    // By path alone, while the cache holds other records of the app: still found.
    expect(contents(await cache.read(app, undefined, "new.conf"))).toEqual(["new.conf=fresh"]);
    expect(counting.reads).toBe(before + 3);
  });

  it("reads the store when the cache does not reach this replica's write within catchUpMs", async () => {
    const cache = await startedCache(100);
    const before = counting.reads;
    cache.wrote(app, await put(proc, "a.conf", "three"));
    const started = performance.now();
    expect(contents(await cache.read(app, proc))).toEqual(["a.conf=three"]);
    expect(performance.now() - started).toBeLessThan(watchDelayMs);
    expect(counting.reads).toBe(before + 1);
  });

  it("holds ciphertext only: sealed, nothing is readable; unsealed again, it is", async () => {
    const cache = await startedCache();
    await cache.informer.waitForRevision(await store.revision());
    await vault.seal();
    await expect(cache.read(app)).rejects.toBeInstanceOf(SealedError);
    await vault.unseal(shares[0]!);
    expect(contents(await cache.read(app, proc))).toEqual(["a.conf=three"]);
  });
});
