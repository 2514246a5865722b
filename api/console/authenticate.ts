// Who is calling: the token in the `access-token` header, looked up by id, its secret's hash
// compared in constant time, its expiry checked. Every failure is the same 401 message, so a caller
// cannot tell an unknown id from a wrong secret, an expired token or a revoked one (revocation
// deletes the record).
import type { Store } from "../../adapters/store/store.ts";
import type { WallClock } from "./clock.ts";
import { unauthorized } from "./errors.ts";
import { decodeRecord, TokenRecord, tokenKey } from "./records.ts";
import { hashSecret, parseToken, sameHash } from "./tokens.ts";

export const tokenHeader = "access-token";

/** The caller's token record; throws a 401 AuthError for a missing, unknown, expired or revoked token. */
export async function authenticate(store: Store, clock: WallClock, token: string | undefined): Promise<TokenRecord> {
  if (token === undefined || token === "") throw unauthorized(`missing ${tokenHeader} header`);
  const parts = parseToken(token);
  if (parts === null) throw unauthorized("invalid, expired or revoked access token");
  const kv = await store.get(tokenKey(parts.id));
  if (kv === null) throw unauthorized("invalid, expired or revoked access token");
  const record = decodeRecord(TokenRecord, kv.key, kv.value);
  if (!sameHash(record.hash, hashSecret(parts.secret))) throw unauthorized("invalid, expired or revoked access token");
  if (record.expiresAt !== undefined && Date.parse(record.expiresAt) <= clock.now()) {
    throw unauthorized("invalid, expired or revoked access token");
  }
  return record;
}
