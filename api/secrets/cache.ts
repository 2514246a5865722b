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
// - a miss is confirmed by the store: an app or proc with no cached record is read from the store,
//   so a record written through another replica a moment ago is never answered as absent;
// - when the cache is behind (not synced, or the watch does not deliver within the catch-up bound),
//   the GET reads the store;
// - otherwise a write through another replica shows here once its watch event arrives (ms).
import type { Registry } from "prom-client";
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

  /** After a write (PUT, or a DELETE that removed a record) of `app` committed at `revision`. */
  wrote(app: string, revision: number): void {
    this.writes.wrote(app, revision);
  }

  /** The record at one address, as zero or one entries. Throws SealedError when sealed. */
  async readOne(app: string, proc: string, path: string): Promise<SecretEntry[]> {
    const cached = (await this.writes.caughtUp(app)) ? this.entriesOf(app, proc, path) : [];
    return cached.length > 0 ? cached : readSecret(this.store, this.vault, app, proc, path);
  }

  /** Every record of `app` (or of one proc), sorted by proc then path. Throws SealedError when sealed. */
  async read(app: string, proc?: string): Promise<SecretEntry[]> {
    const cached = (await this.writes.caughtUp(app)) ? this.entriesOf(app, proc) : [];
    return cached.length > 0 ? cached : readSecrets(this.store, this.vault, app, proc);
  }

  private entriesOf(app: string, proc?: string, path?: string): SecretEntry[] {
    const entries: SecretEntry[] = [];
    for (const key of this.byApp.get(app) ?? []) {
      const cached = this.informer.get(key);
      const address = cached?.address;
      if (address == null || (proc !== undefined && address.proc !== proc) || (path !== undefined && address.path !== path)) continue;
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
