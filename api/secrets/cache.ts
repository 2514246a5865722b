// SecretCache: GET /v2/secrets answered from an informer over every stored record, as the
// orchestrator answers its GETs from informer caches (api/orchestrator/records.ts). A GET then
// costs no store round trip: bench:secrets measured the etcd call and etcd's own read as about 40 %
// of the machine's CPU per GET.
//
// What is cached is what the store holds: the ciphertext, never plaintext. Records are decrypted
// per request under the vault's key, so sealing the service makes the cache unreadable exactly as
// it makes the store unreadable, and a record moved to another key still fails authentication.
//
// Consistency (docs/secrets.md, "Reads"), the PodGroup API's rules:
// - read-your-own-writes on a replica: PUT and DELETE note their revision per app (wrote); a GET of
//   the app waits until the cache reflects them (ReadYourWrites), so it never answers older than a
//   write this replica acknowledged;
// - a miss is confirmed by the store: a GET that finds no cached record for its app, proc and path
//   reads the store, so a record written through another replica a moment ago is never answered
//   as absent;
// - when the cache is not synced, or does not reach this replica's write within the catch-up bound,
//   the GET reads the store;
// - otherwise a write through another replica shows here once its watch event arrives: normally
//   milliseconds, but while the watch is broken and not yet detected (up to the informer's
//   liveness timeout, then a relist) a GET that finds cached records may answer from before it.
import type { Registry } from "prom-client";
import { sameSecretFile } from "../resources/secret-path.ts";
import type { Store } from "../../adapters/store/store.ts";
import { Informer } from "../../runtime/informer.ts";
import type { KeyValueLike, ListWatchSource } from "../../runtime/listwatch.ts";
import type { Logger } from "../../runtime/log.ts";
import { ReadYourWrites } from "../../runtime/read-your-writes.ts";
import { decryptEntry, readSecret, readSecrets, sortEntries, type SecretEntry } from "./read.ts";
import { parseSecretKey, secretsPrefix } from "./record.ts";
import type { Vault } from "./vault.ts";

/** A stored value as cached: its address (null for the _sys keys and stray keys) and ciphertext. */
interface CachedValue {
  address: { app: string; proc: string; path: string } | null;
  value: string;
  modRevision: number;
}

export interface SecretCacheOptions {
  log?: Logger;
  registry?: Registry;
  /** How long a GET waits for the cache to reach this replica's write before reading the store (default 1000 ms). */
  catchUpMs?: number;
  /** Where the cache lists and watches (default: the store; tests hand in a late watch). */
  source?: ListWatchSource;
}

export class SecretCache {
  readonly informer: Informer<CachedValue>;
  /** Cached keys of each app, so a GET touches only its app's records. Kept by the informer's handlers. */
  private readonly byApp = new Map<string, Set<string>>();
  private readonly writes: ReadYourWrites;

  constructor(
    private readonly store: Store,
    private readonly vault: Vault,
    options: SecretCacheOptions = {},
  ) {
    this.informer = new Informer<CachedValue>({
      name: "secrets",
      source: options.source ?? store,
      prefix: secretsPrefix,
      // Records may be up to ~1.4 MB stored; a page of 100 stays within a call deadline even then,
      // where the default 5000 could be gigabytes.
      pageSize: 100,
      decode: decodeCachedValue,
      ...(options.log !== undefined ? { log: options.log } : {}),
      ...(options.registry !== undefined ? { registry: options.registry } : {}),
    });
    this.writes = new ReadYourWrites(this.informer, options.catchUpMs);
    this.informer.addEventHandler({
      onAdd: (obj, key) => this.index(obj, key),
      onUpdate: (_old, obj, key) => this.index(obj, key),
      onDelete: (obj, key) => this.unindex(obj, key),
    });
  }

  /**
   * After a write of `app` committed at `revision`: a PUT, a DELETE that removed a record, or a
   * DELETE that found none while this cache still holds the key (the cache is behind a delete made
   * elsewhere, and the client was just told the record is gone).
   */
  wrote(app: string, revision: number): void {
    this.writes.wrote(app, revision);
  }

  /**
   * The cached keys of `proc`'s records of the file `path` names, under any spelling (the API
   * once stored `/platform/app/x` and `//platform/app/x` beside `x`).
   */
  keysOfFile(app: string, proc: string, path: string): string[] {
    const keys: string[] = [];
    for (const key of this.byApp.get(app) ?? []) {
      const address = this.informer.get(key)?.address;
      if (address != null && address.proc === proc && sameSecretFile(address.path, path)) keys.push(key);
    }
    return keys;
  }

  /** True when the cache holds `key` now. */
  holds(key: string): boolean {
    return this.informer.get(key) !== undefined;
  }

  /**
   * The records of `app`, of one proc, and/or at one path, sorted by proc then path. Throws
   * SealedError when sealed. Nothing cached that matches (or a cache that is behind) means a store
   * read with the same filter: an empty answer always comes from the store.
   */
  async read(app: string, proc?: string, path?: string): Promise<SecretEntry[]> {
    const cached = (await this.writes.caughtUp(app)) ? this.entriesOf(app, proc, path) : [];
    if (cached.length > 0) return cached;
    if (proc !== undefined && path !== undefined) {
      const exact = await readSecret(this.store, this.vault, app, proc, path);
      if (exact.length > 0) return exact;
    }
    const stored = await readSecrets(this.store, this.vault, app, proc);
    // A path matches every spelling of the same file (docs/secret-sync.md).
    return path === undefined ? stored : stored.filter((e) => sameSecretFile(e.path, path));
  }

  private entriesOf(app: string, proc?: string, path?: string): SecretEntry[] {
    const entries: SecretEntry[] = [];
    for (const key of this.byApp.get(app) ?? []) {
      const cached = this.informer.get(key);
      const address = cached?.address;
      if (address == null || (proc !== undefined && address.proc !== proc) || (path !== undefined && !sameSecretFile(address.path, path))) continue;
      entries.push(decryptEntry(this.vault, address, cached!.value, cached!.modRevision));
    }
    return sortEntries(entries);
  }

  private index(obj: CachedValue, key: string): void {
    if (obj.address === null) return;
    let keys = this.byApp.get(obj.address.app);
    if (keys === undefined) this.byApp.set(obj.address.app, (keys = new Set()));
    keys.add(key);
  }

  private unindex(obj: CachedValue, key: string): void {
    if (obj.address === null) return;
    const keys = this.byApp.get(obj.address.app);
    keys?.delete(key);
    if (keys?.size === 0) this.byApp.delete(obj.address.app);
  }
}

function decodeCachedValue(kv: KeyValueLike): CachedValue {
  return { address: parseSecretKey(kv.key), value: kv.value, modRevision: kv.modRevision };
}
