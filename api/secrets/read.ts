// Reading secrets back from the store: list the app's (or the proc's) keys and decrypt each under
// its own address. The Secret-sync controller reads this way (it runs in the same process and reads
// the store directly instead of calling itself over HTTP); GET /v2/secrets reads its SecretCache
// (cache.ts), which falls back to these when the cache is behind or has no record.
import type { Store } from "../../adapters/store/store.ts";
import { ApiError } from "../http/index.ts";
import { canonicalSecretPath } from "../resources/secret-path.ts";
import { DecryptError } from "./crypto.ts";
import { appSecretsPrefix, parseSecretKey, procSecretsPrefix, secretKey, type SecretRecord } from "./record.ts";
import type { Vault } from "./vault.ts";

export interface SecretEntry extends SecretRecord {
  app: string;
  proc: string;
  path: string;
  updatedAt: string;
  /** The store revision of the record's last write (changes whenever the content may have). */
  modRevision: number;
}

/**
 * A stored value that does not decrypt under its own address: tampering, or a value copied from
 * another key. Reading fails as a whole rather than skipping the record, so a consumer never
 * mistakes a damaged secret for a missing one. The secrets API answers it as a 500 whose message
 * says which secret and what to do.
 */
export class SecretIntegrityError extends ApiError {
  override readonly name: string = "SecretIntegrityError";
  constructor(
    readonly app: string,
    readonly proc: string,
    readonly path: string,
  ) {
    super(500, { code: "InternalError", message: `secret ${path} of ${proc} does not decrypt at its address (tampered or moved); write it again` });
  }
}

/** The record at one address, as a list of zero or one entries. Throws SealedError when sealed. */
export async function readSecret(store: Store, vault: Vault, app: string, proc: string, path: string): Promise<SecretEntry[]> {
  const kv = await store.get(secretKey(app, proc, path));
  if (kv === null) return [];
  return [decryptEntry(vault, { app, proc, path }, kv.value, kv.modRevision)];
}

/** Decrypts one stored value under its own address; SecretIntegrityError when it does not belong there. */
export function decryptEntry(vault: Vault, address: { app: string; proc: string; path: string }, value: string, modRevision: number): SecretEntry {
  try {
    return { ...address, ...vault.decrypt(address.app, address.proc, address.path, value), modRevision };
  } catch (e) {
    if (e instanceof DecryptError) throw new SecretIntegrityError(address.app, address.proc, address.path);
    throw e;
  }
}

/** Every record of `app` (or of one proc), sorted by proc then path. Throws SealedError when sealed. */
export async function readSecrets(store: Store, vault: Vault, app: string, proc?: string): Promise<SecretEntry[]> {
  const { items } = await store.list(proc === undefined ? appSecretsPrefix(app) : procSecretsPrefix(app, proc));
  const entries: SecretEntry[] = [];
  for (const kv of items) {
    const address = parseSecretKey(kv.key);
    if (address === null || address.app !== app) continue;
    entries.push(decryptEntry(vault, address, kv.value, kv.modRevision));
  }
  return sortEntries(entries);
}

/** Sorts by proc, then path (the order every GET answers in), in place. */
export function sortEntries(entries: SecretEntry[]): SecretEntry[] {
  return entries.sort((a, b) => (a.proc === b.proc ? (a.path < b.path ? -1 : a.path > b.path ? 1 : 0) : a.proc < b.proc ? -1 : 1));
}

/**
 * The records as the API shows them: each path in its one spelling (canonicalSecretPath), and one
 * record per file of a proc. Two can exist only when one was stored under the absolute spelling
 * of a file under /platform/app before the API stored canonical spellings; the later write wins,
 * as Secret-sync installs it (docs/secrets.md, "Input rules"). Sorted by proc, then path.
 */
export function onePerFile(entries: readonly SecretEntry[]): SecretEntry[] {
  const byFile = new Map<string, SecretEntry>();
  for (const e of entries) {
    const path = canonicalSecretPath(e.path) ?? e.path;
    const id = `${e.proc}\0${path}`;
    const seen = byFile.get(id);
    if (seen === undefined || e.modRevision > seen.modRevision) byFile.set(id, { ...e, path });
  }
  return sortEntries([...byFile.values()]);
}
