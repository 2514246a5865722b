// Shared pieces of the runtime integration tests: store factories, batched writes, an event
// recorder that rebuilds state from handler events only, and a partition wrapper.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { WatchBrokenError } from "../../../adapters/store/errors.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Op, Store } from "../../../adapters/store/store.ts";
import type { Informer } from "../../../runtime/informer.ts";
import type { KeyValueLike, ListWatchSource, WatchHandlersLike, WatchLike } from "../../../runtime/listwatch.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { loadServices } from "../../helpers/services.ts";

export interface StoreFactory {
  name: string;
  /** A client of the same store each call (sqlite: the same file, which only one process opens). */
  open(): Promise<Store>;
  cleanup(): Promise<void>;
}

export function sharedEtcd(): StoreFactory {
  const { etcdEndpoints } = loadServices();
  return {
    name: "etcd",
    open: async () => new EtcdStore({ endpoints: etcdEndpoints }),
    cleanup: async () => {},
  };
}

/** A private etcd process: for tests that compact (compaction is store-wide) or kill etcd. */
export function privateEtcd(): StoreFactory {
  let etcd: Promise<EtcdProcess> | undefined;
  return {
    name: "etcd",
    open: async () => {
      etcd ??= startEtcd();
      return new EtcdStore({ endpoints: [(await etcd).endpoint] });
    },
    cleanup: async () => {
      await (await etcd)?.stop();
    },
  };
}

/** The embedded store on a temp file. */
export async function sqliteFactory(): Promise<StoreFactory> {
  const dir = mkdtempSync(join(tmpdir(), "capstan-runtime-sqlite-"));
  const path = join(dir, "state.db");
  let store: Store | undefined;
  return {
    name: "sqlite",
    // One SqliteStore per file and process: every "client" is the same instance.
    open: async () => (store ??= new SqliteStore({ path })),
    cleanup: async () => {
      await store?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Put many keys in transactions of at most 128 ops (etcd's default --max-txn-ops). */
export async function putMany(store: Store, entries: [string, string][]): Promise<number> {
  let revision = 0;
  for (let i = 0; i < entries.length; i += 128) {
    const ops: Op[] = entries.slice(i, i + 128).map(([key, value]) => ({ type: "put", key, value }));
    revision = (await store.txn([], ops)).revision;
  }
  return revision;
}

/** Every key/value under a prefix, read page by page. */
export async function readAll(store: Store, prefix: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let startAfter: string | undefined;
  let revision: number | undefined;
  for (;;) {
    const page = await store.list(prefix, { limit: 1000, ...(startAfter && { startAfter }), ...(revision && { revision }) });
    revision ??= page.revision;
    for (const kv of page.items) out.set(kv.key, kv.value);
    if (!page.more || page.items.length === 0) return out;
    startAfter = page.items.at(-1)!.key;
  }
}

export interface Obj {
  value: string;
  modRevision: number;
}

export const decodeObj = (kv: KeyValueLike): Obj => ({ value: kv.value, modRevision: kv.modRevision });

/**
 * Records handler events and rebuilds the prefix's state from them alone, checking on the way
 * that each key's revisions only move forward.
 */
export class EventRecorder {
  readonly state = new Map<string, Obj>();
  readonly violations: string[] = [];
  readonly tombstones: string[] = [];
  readonly deletes: string[] = [];
  events = 0;
  private readonly lastRevision = new Map<string, number>();

  attach(informer: Informer<Obj>): void {
    informer.addEventHandler({
      onAdd: (obj, key) => this.put(key, obj, undefined),
      onUpdate: (old, obj, key) => this.put(key, obj, old),
      onDelete: (obj, key, { finalStateUnknown }) => {
        this.events++;
        if (!this.state.has(key)) this.violations.push(`delete of unknown ${key}`);
        this.state.delete(key);
        (finalStateUnknown ? this.tombstones : this.deletes).push(key);
        if (obj.modRevision < (this.lastRevision.get(key) ?? 0)) this.violations.push(`delete of stale ${key}`);
      },
    });
  }

  values(): Map<string, string> {
    return new Map([...this.state].map(([k, o]) => [k, o.value]));
  }

  private put(key: string, obj: Obj, old: Obj | undefined): void {
    this.events++;
    const last = this.lastRevision.get(key) ?? 0;
    if (obj.modRevision <= last) this.violations.push(`${key}: revision ${obj.modRevision} after ${last}`);
    if (old && this.state.get(key)?.modRevision !== old.modRevision) this.violations.push(`${key}: update from an unknown old state`);
    this.lastRevision.set(key, obj.modRevision);
    this.state.set(key, obj);
  }
}

/**
 * A ListWatchSource in front of a real store that a test can cut off: while partitioned, lists
 * fail and live watches end with WatchBrokenError, as when the network to the store goes down.
 */
export class PartitionableSource implements ListWatchSource {
  partitioned = false;
  private readonly live = new Set<{ watch: WatchLike; handlers: WatchHandlersLike }>();

  constructor(private readonly store: Store) {}

  partition(): void {
    this.partitioned = true;
    for (const w of this.live) {
      this.live.delete(w);
      void w.watch.close();
      w.handlers.onError(new WatchBrokenError("partitioned"));
    }
  }

  heal(): void {
    this.partitioned = false;
  }

  async list(prefix: string, options?: { revision?: number; limit?: number; startAfter?: string }) {
    if (this.partitioned) throw new WatchBrokenError("partitioned");
    return this.store.list(prefix, options);
  }

  watch(prefix: string, fromRevision: number, handlers: WatchHandlersLike): WatchLike {
    if (this.partitioned) throw new WatchBrokenError("partitioned");
    const entry = { watch: undefined as unknown as WatchLike, handlers };
    entry.watch = this.store.watch(prefix, fromRevision, {
      onEvents: (e) => handlers.onEvents(e),
      onProgress: (r) => handlers.onProgress?.(r),
      onError: (e) => {
        if (this.live.delete(entry)) handlers.onError(e);
      },
    });
    this.live.add(entry);
    return {
      requestProgress: () => entry.watch.requestProgress(),
      close: async () => {
        this.live.delete(entry);
        await entry.watch.close();
      },
    };
  }

  revision(): Promise<number> {
    return this.store.revision();
  }
}

/** Poll `check` until it returns true or `ms` pass; returns whether it did. */
export async function eventually(check: () => boolean | Promise<boolean>, ms: number, everyMs = 50): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return check();
}

/** Retry a write until it succeeds (the store may be down), for at most `ms`. */
export async function retrying<T>(fn: () => Promise<T>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
