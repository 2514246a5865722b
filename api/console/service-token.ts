// A service identity's access token, kept in a file: what `capstan up` makes for its own
// controllers, so that the orchestrator can get pull-only registry tokens for the engines
// (docs/registry.md, "How the platform pulls"). The same record format as every console token
// (records.ts): only the hash of the secret is stored; the token itself is in the file (mode 0600)
// and in the memory of the process that uses it, nowhere else.
//
// ensureServiceToken reuses the token in the file when the store still holds its record for the
// same user and role (and it has not expired); otherwise (no file, a revoked token, a store that
// was reset) it makes a new one: the file is written before the record, so a failed store write
// never leaves a token nobody holds. A token it replaces is not deleted: it is no longer in the
// file, and `capstan tokens list` / `revoke` show and remove it like any other.
import { chmod, readFile, writeFile } from "node:fs/promises";
import type { Store } from "../../adapters/store/store.ts";
import { decodeRecord, TokenRecord, tokenKey, type Role } from "./records.ts";
import { generateToken, hashSecret, parseToken, sameHash } from "./tokens.ts";

/** The user of `capstan up`'s controllers' token. */
export const controllersTokenUser = "capstan-controllers";

/**
 * The role of the controllers' token: sync, the least of the roles that may pull every repository
 * (admin may write everything; user and viewer only their apps'). Sync also reads every app's
 * secrets, so the token is kept where only the orchestrator process reads it: the file (0600) and
 * that process's memory. It is sent to nothing but the console's registry token endpoint (the realm
 * published in the store, over HTTPS or to loopback), which answers with a registry token that may
 * pull one repository for a few minutes: the only credential that reaches an engine
 * (controllers/shared/registry-credentials.ts). A role that may pull and nothing else would serve
 * better; the roles are api/auth/principal.ts's, and the token endpoint's grants registry-token.ts's.
 */
export const controllersTokenRole: Role = "sync";

export interface EnsureServiceTokenOptions {
  store: Store;
  /** Where the token is kept (mode 0600). */
  file: string;
  user: string;
  role: Role;
  /** createdAt of a new record, and "now" for an expiry check (default the system clock). */
  now?: () => Date;
}

/** `created`: whether a new token was made (and written to the file). */
export async function ensureServiceToken(o: EnsureServiceTokenOptions): Promise<{ created: boolean; tokenId: string }> {
  const now = o.now ?? (() => new Date());
  const held = await readToken(o.file);
  if (held !== undefined) {
    const kv = await o.store.get(tokenKey(held.id));
    if (kv !== null) {
      const r = decodeRecord(TokenRecord, kv.key, kv.value);
      const expired = r.expiresAt !== undefined && Date.parse(r.expiresAt) <= now().getTime();
      if (r.user === o.user && r.role === o.role && !expired && sameHash(r.hash, hashSecret(held.secret))) {
        await chmod(o.file, 0o600);
        return { created: false, tokenId: held.id };
      }
    }
  }
  const fresh = generateToken();
  // mode applies only when the file is created; chmod covers a file left by an earlier run.
  await writeFile(o.file, `${fresh.token}\n`, { mode: 0o600 });
  await chmod(o.file, 0o600);
  const record: TokenRecord = { id: fresh.id, user: o.user, role: o.role, hash: hashSecret(fresh.secret), createdAt: now().toISOString() };
  const key = tokenKey(fresh.id);
  const res = await o.store.put(key, JSON.stringify(record), { expect: [{ key, target: "createRevision", equals: 0 }] });
  if (!res.succeeded) throw new Error(`token id ${fresh.id} is already in the store; start again`);
  return { created: true, tokenId: fresh.id };
}

/** The token in `file`, when there is a well-formed one. */
async function readToken(file: string): Promise<{ id: string; secret: string } | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  return parseToken(text.trim()) ?? undefined;
}
