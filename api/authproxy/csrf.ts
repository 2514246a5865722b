// The login's csrf value (docs/authproxy.md#csrf): the `<csrf>` in the state (docs/authproxy.md, "The login") and the csrf
// cookie, made so that an attacker cannot choose it. The value is `RANDOM.TIME.MAC`:
// 16 random bytes, the issue time (ms, base 36) and an HMAC-SHA256 of both under the proxy's
// secret, all base64url/alphanumeric (no ":", which separates the state's two parts). A cookie
// the proxy never issued (tossed in from a sibling subdomain or over plain HTTP) fails the MAC;
// an old one fails the age; one that completed a login is remembered as used until it would
// have expired anyway. The nonce and the PKCE verifier of the login are derived from the value
// under the same secret, so they need no server-side state either.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** How long a login may take from the redirect to the callback. */
export const csrfTtlMs = 15 * 60_000;

/** Used values remembered at most (about 150 bytes each). */
const maxUsed = 100_000;

export type CsrfCheck = { ok: true } | { ok: false; reason: "malformed" | "forged" | "expired" | "used" };

export class CsrfSigner {
  /** csrf value -> when it stops mattering (its expiry); a Map keeps insertion order for pruning. */
  private readonly used = new Map<string, number>();

  constructor(
    private readonly secret: Buffer,
    private readonly now: () => number = Date.now,
  ) {}

  issue(): string {
    const body = `${randomBytes(16).toString("base64url")}.${this.now().toString(36)}`;
    return `${body}.${this.mac(body)}`;
  }

  /** `marginMs`: also refuse (as expired) a value with less than this much of its life left. */
  check(value: string, marginMs = 0): CsrfCheck {
    const parts = value.split(".");
    if (parts.length !== 3 || value.length > 100) return { ok: false, reason: "malformed" };
    const body = `${parts[0]}.${parts[1]}`;
    // The MAC compared as the exact string: decoding base64url would accept variants (stray
    // characters, other low bits) of one value, each a new key for the used-set.
    if (!CsrfSigner.same(parts[2]!, this.mac(body))) return { ok: false, reason: "forged" };
    const issued = parseInt(parts[1]!, 36);
    const age = this.now() - issued;
    if (!Number.isFinite(issued) || age > csrfTtlMs - marginMs || age < -60_000) return { ok: false, reason: "expired" };
    if (this.used.has(body)) return { ok: false, reason: "used" };
    return { ok: true };
  }

  /** Mark a value used (its login completed or failed at the provider): it is refused from now on. */
  consume(value: string): void {
    const [random = "", time = ""] = value.split(".");
    const issued = parseInt(time, 36);
    this.used.set(`${random}.${time}`, (Number.isFinite(issued) ? issued : this.now()) + csrfTtlMs);
    this.prune();
  }

  /** The OpenID `nonce` bound to this login: the ID token must carry it back. */
  nonce(csrf: string): string {
    return this.mac(`nonce|${csrf}`);
  }

  /** PKCE (RFC 7636) verifier and S256 challenge of this login. */
  pkce(csrf: string): { verifier: string; challenge: string } {
    const verifier = this.mac(`pkce|${csrf}`) + this.mac(`pkce2|${csrf}`).slice(0, 11);
    return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
  }

  /** Constant-time equality of two csrf strings (lengths first, as timingSafeEqual needs). */
  static same(a: string, b: string): boolean {
    const x = Buffer.from(a);
    const y = Buffer.from(b);
    return x.length === y.length && timingSafeEqual(x, y);
  }

  private mac(text: string): string {
    return createHmac("sha256", this.secret).update(text).digest("base64url");
  }

  private prune(): void {
    const now = this.now();
    for (const [value, until] of this.used) {
      // Oldest first; past the cap the oldest go even unexpired (their logins would have to
      // complete a callback twice within 15 minutes, and the provider spends a code once anyway).
      if (until > now && this.used.size <= maxUsed) break;
      this.used.delete(value);
    }
  }
}
