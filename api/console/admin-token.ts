// The first admin token. A console whose store holds no admin token creates one on start: either
// the one given in CAPSTAN_ADMIN_TOKEN (only its hash is stored) or a fresh one written to
// -admin-token-file with mode 0600. The token itself is never logged and never stored.
// CAPSTAN_ADMIN_TOKEN is a token Capstan issued (`cst_<id>_<secret>`) or any secret the operator
// chose with enough entropy (operator-token.ts), as k3s takes any `--token`.
import { chmod, writeFile } from "node:fs/promises";
import type { Store } from "../../adapters/store/store.ts";
import { decodeRecord, TokenRecord, tokenKey, tokensPrefix, type TokenRecord as Token } from "./records.ts";
import { operatorTokenAdvice, operatorTokenParts, operatorTokenProblem } from "./operator-token.ts";
import { generateToken, hashSecret, parseToken, sameHash, type TokenParts } from "./tokens.ts";

export interface EnsureAdminTokenOptions {
  store: Store;
  /** Where a freshly created token is written (mode 0600). */
  adminTokenFile?: string;
  /** CAPSTAN_ADMIN_TOKEN: a `cst_<id>_<secret>` token or an operator-chosen secret, registered instead of creating one. */
  envToken?: string;
  /** createdAt of a new record (default now). */
  now?: () => Date;
}

export class AdminTokenError extends Error {
  override readonly name = "AdminTokenError";
}

async function hasAdminToken(store: Store): Promise<boolean> {
  const { items } = await store.list(tokensPrefix);
  return items.some((kv) => decodeRecord(TokenRecord, kv.key, kv.value).role === "admin");
}

/**
 * Make sure an admin can log in. With `envToken`: register it unless its id is already stored with
 * the same hash (a different hash under that id is an error: someone else's token). Without: when
 * no admin token exists, create one and write it to `adminTokenFile` before storing its hash, so a
 * failed write never leaves an admin token nobody holds. `created` says whether a record was written.
 */
export async function ensureAdminToken(opts: EnsureAdminTokenOptions): Promise<{ created: boolean }> {
  const { store } = opts;
  const now = opts.now ?? (() => new Date());
  if (opts.envToken !== undefined) {
    const parts = adminTokenParts(opts.envToken.trim());
    const hash = hashSecret(parts.secret);
    const existing = await store.get(tokenKey(parts.id));
    if (existing !== null) {
      const record = decodeRecord(TokenRecord, existing.key, existing.value);
      if (record.role === "admin" && sameHash(record.hash, hash)) return { created: false };
      throw new AdminTokenError(`CAPSTAN_ADMIN_TOKEN's id ${parts.id} belongs to another token in the store`);
    }
    return { created: await putToken(store, { id: parts.id, user: "admin", role: "admin", hash, createdAt: now().toISOString() }) };
  }
  if (await hasAdminToken(store)) return { created: false };
  if (opts.adminTokenFile === undefined) {
    throw new AdminTokenError("the store holds no admin token: give -admin-token-file or CAPSTAN_ADMIN_TOKEN");
  }
  const fresh = generateToken();
  // mode applies only when the file is created; chmod covers a file left by an earlier run.
  await writeFile(opts.adminTokenFile, `${fresh.token}\n`, { mode: 0o600 });
  await chmod(opts.adminTokenFile, 0o600);
  return { created: await putToken(store, { id: fresh.id, user: "admin", role: "admin", hash: hashSecret(fresh.secret), createdAt: now().toISOString() }) };
}

/**
 * CAPSTAN_ADMIN_TOKEN's id and secret: an issued token's own, or those derived from an
 * operator-chosen secret; an AdminTokenError says exactly what is wrong and how to make a good one.
 */
export function adminTokenParts(token: string): TokenParts {
  const issued = parseToken(token);
  if (issued !== null) return issued;
  const problem = operatorTokenProblem(token);
  const parts = operatorTokenParts(token);
  if (problem !== undefined || parts === null) {
    throw new AdminTokenError(
      `CAPSTAN_ADMIN_TOKEN is not usable: ${problem ?? "bad form"}. Give any secret of at least 32 printable characters without spaces ` +
        `(${operatorTokenAdvice}), or a token Capstan issued (cst_<12 hex>_<43 base64url>)`,
    );
  }
  return parts;
}

async function putToken(store: Store, record: Token): Promise<boolean> {
  const key = tokenKey(record.id);
  const result = await store.put(key, JSON.stringify(record), { expect: [{ key, target: "createRevision", equals: 0 }] });
  return result.succeeded;
}
