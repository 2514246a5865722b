// PutBatcher on the real stores (etcd on the shared services, SQLite on a fresh file): many puts in
// flight at once land in far fewer transactions, every put resolves with the revision its value
// was stored at, and puts of one key made in order are stored in that order.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { PutBatcher } from "../../../adapters/store/put-batcher.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const dirs: string[] = [];
const stores: Store[] = [];
afterAll(async () => {
  for (const s of stores) await s.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const implementations: [string, () => Promise<Store>][] = [
  ["EtcdStore", async () => new EtcdStore({ endpoints: loadServices().etcdEndpoints })],
  [
    "SqliteStore",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "capstan-batcher-"));
      dirs.push(dir);
      return new SqliteStore({ path: join(dir, "state.db") });
    },
  ],
];

describe.each(implementations)("PutBatcher on %s", (_name, open) => {
  it("groups 400 concurrent puts of 40 keys into few transactions, each answered with its stored revision, in order per key", async () => {
    const store = await open();
    stores.push(store);
    const prefix = `/${uniqueName("batcher")}/`;
    let transactions = 0;
    const counted = { txn: (...args: Parameters<Store["txn"]>) => (transactions++, store.txn(...args)) };
    const batcher = new PutBatcher(counted);
    // Ten rounds over 40 keys, all issued before any answer: key k's values go v0..v9 in order.
    const puts = Array.from({ length: 400 }, (_, i) => ({ key: `${prefix}k${i % 40}`, value: `v${Math.floor(i / 40)}` }));
    const revisions = await Promise.all(puts.map((p) => batcher.put(p.key, p.value)));
    try {
      expect(transactions).toBeLessThanOrEqual(20); // duplicates split batches: at least 10, never 400
      expect(transactions).toBeGreaterThanOrEqual(10);
      const { items } = await store.list(prefix);
      expect(items).toHaveLength(40);
      for (const kv of items) {
        expect(kv.value).toBe("v9");
        expect(kv.version).toBe(10);
        const last = puts.map((p, i) => [p, i] as const).filter(([p]) => p.key === kv.key).at(-1)![1];
        expect(revisions[last]).toBe(kv.modRevision);
      }
      // Revisions never go back along a key's puts.
      for (let i = 40; i < puts.length; i++) expect(revisions[i]!).toBeGreaterThan(revisions[i - 40]!);
    } finally {
      await store.deletePrefix(prefix);
    }
  });
});
