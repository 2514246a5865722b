// Access tokens the console makes for a person without POST /api/v1/tokens: a single sign-on login
// (sso.ts) and a web console session (docs/web-console.md, "Sessions and CSRF"). Each is an
// ordinary token record with an expiry and an `origin` naming what made it, so every API checks it
// as any token, and an admin sees and revokes it on the token list.
import type { Store } from "../../adapters/store/store.ts";
import type { PrincipalRole } from "../auth/principal.ts";
import { decodeRecord, TokenRecord, tokenKey } from "./records.ts";
import { generateToken, hashSecret } from "./tokens.ts";

export interface IssuedToken {
  token: string;
  id: string;
  expiresAt: string;
}

export class TokenIdCollisionError extends Error {
  override readonly name = "TokenIdCollisionError";
}

/** Stores a new token for `user` (create-only); `apps` only for a viewer. */
export async function issueToken(
  store: Store,
  o: { user: string; role: PrincipalRole; apps?: readonly string[]; ttlMs: number; origin: string; nowMs: number },
): Promise<IssuedToken> {
  const fresh = generateToken();
  const record: TokenRecord = {
    id: fresh.id,
    user: o.user,
    role: o.role,
    hash: hashSecret(fresh.secret),
    createdAt: new Date(o.nowMs).toISOString(),
    expiresAt: new Date(o.nowMs + o.ttlMs).toISOString(),
    ...(o.role === "viewer" && o.apps !== undefined && { apps: [...o.apps] }),
    origin: o.origin,
  };
  const key = tokenKey(fresh.id);
  const result = await store.put(key, JSON.stringify(record), { expect: [{ key, target: "createRevision", equals: 0 }] });
  // 48 random bits collided with a stored id: astronomically rare; the caller starts again.
  if (!result.succeeded) throw new TokenIdCollisionError("token id collision; start again");
  return { token: fresh.token, id: fresh.id, expiresAt: record.expiresAt! };
}

/**
 * Deletes token `id` when it was made by one of `origins` (a sign-out ends the session's own
 * token, never a token the user made with `capstan tokens create` and pasted). Answers whether it
 * deleted one.
 */
export async function revokeIssuedToken(store: Store, id: string, origins: readonly string[]): Promise<boolean> {
  const key = tokenKey(id);
  const kv = await store.get(key);
  if (kv === null) return false;
  const record = decodeRecord(TokenRecord, key, kv.value);
  if (record.origin === undefined || !origins.includes(record.origin)) return false;
  const res = await store.delete(key, { expect: [{ key, target: "modRevision", equals: kv.modRevision }] });
  return res.succeeded;
}
