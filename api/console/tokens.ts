// Console access tokens: `cst_<id>_<secret>`, id 12 lower-case hex characters, secret 32 random
// bytes in base64url (43 characters). The id makes a lookup one store read; only the SHA-256 of the
// secret part is stored, so a copy of the store grants nothing, and hashes are compared in constant
// time so an answer's timing says nothing about how much of a guess was right.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

export interface TokenParts {
  id: string;
  secret: string;
}

const tokenPattern = /^cst_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/;

/** A fresh token and its parts. */
export function generateToken(): TokenParts & { token: string } {
  const id = randomBytes(6).toString("hex");
  const secret = randomBytes(32).toString("base64url");
  return { id, secret, token: `cst_${id}_${secret}` };
}

/** The parts of a well-formed token, or null (never throws: the input is untrusted). */
export function parseToken(token: string): TokenParts | null {
  const m = tokenPattern.exec(token);
  return m ? { id: m[1]!, secret: m[2]! } : null;
}

/** SHA-256 hex of a token's secret part: what the store keeps. */
export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/** Constant-time comparison of two hex digests of equal length. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}
