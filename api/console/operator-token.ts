// Admin tokens an operator chooses (CAPSTAN_ADMIN_TOKEN; docs/console.md, "The first admin
// token"), as k3s takes any `--token` secret: a string of enough entropy that is not in the
// `cst_<id>_<secret>` form of the tokens Capstan issues. Such a token has no id of its own, so one
// is derived from it (12 hex characters of a SHA-256 over a fixed label and the token); the store
// keeps that id and the SHA-256 of the whole token, as for an issued token, and the gate checks it
// the same way. Issued tokens keep their own strict form (tokens.ts).
import { createHash } from "node:crypto";
import type { TokenParts } from "./tokens.ts";

export const operatorTokenMinLength = 32;
export const operatorTokenMaxLength = 1024;
/** The least entropy estimate (bits, from the characters' frequencies) a chosen token must reach. */
export const operatorTokenMinBits = 96;

/** How to make a good one, for every refusal. */
export const operatorTokenAdvice = `make one with: openssl rand -hex 32`;

/** Printable ASCII without spaces: it travels in the access-token header and in shell variables. */
const shape = /^[\x21-\x7e]+$/;

/**
 * Bits of entropy a string shows: its length times the Shannon entropy of its characters'
 * frequencies. A crude estimate (it cannot see a pattern like "abcabc"), enough to refuse
 * "changeme", a word repeated, or a short secret.
 */
export function entropyBits(text: string): number {
  const counts = new Map<string, number>();
  for (const ch of text) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let perChar = 0;
  for (const n of counts.values()) {
    const p = n / text.length;
    perChar -= p * Math.log2(p);
  }
  return perChar * text.length;
}

/** Why `token` cannot be an operator-chosen admin token, or undefined when it can. */
export function operatorTokenProblem(token: string): string | undefined {
  if (token.startsWith("cst_")) return "it starts with cst_ but is not a token Capstan issued (cst_<12 hex>_<43 base64url>)";
  if (!shape.test(token)) return "it must be printable ASCII without spaces";
  if (token.length < operatorTokenMinLength) return `it has ${token.length} characters; at least ${operatorTokenMinLength} are needed`;
  if (token.length > operatorTokenMaxLength) return `it has ${token.length} characters; at most ${operatorTokenMaxLength} are allowed`;
  const bits = entropyBits(token);
  if (bits < operatorTokenMinBits) return `it is too predictable (about ${Math.floor(bits)} bits of entropy by its characters; at least ${operatorTokenMinBits} are needed)`;
  return undefined;
}

/**
 * The id and secret under which an operator-chosen token is stored and checked, or null for a
 * string that cannot be one by its shape (no store read is spent on it). The secret is the whole
 * token. The entropy rule is applied when the token is registered, not here.
 */
export function operatorTokenParts(token: string): TokenParts | null {
  if (token.startsWith("cst_") || token.length < operatorTokenMinLength || token.length > operatorTokenMaxLength || !shape.test(token)) return null;
  const id = createHash("sha256").update("capstan operator token\n", "utf8").update(token, "utf8").digest("hex").slice(0, 12);
  return { id, secret: token };
}
