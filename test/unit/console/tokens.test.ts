// Token format, hashing and lifetimes: pure functions, no store.
import { describe, expect, it } from "vitest";
import { parseLifetime } from "../../../api/console/duration.ts";
import { generateToken, hashSecret, parseToken, sameHash } from "../../../api/console/tokens.ts";

describe("console tokens", () => {
  it("round-trips a generated token and keeps ids and secrets distinct", () => {
    const a = generateToken();
    const b = generateToken();
    expect(a.token).toMatch(/^cst_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    expect(parseToken(a.token)).toEqual({ id: a.id, secret: a.secret });
    expect(a.id).not.toBe(b.id);
    expect(a.secret).not.toBe(b.secret);
  });

  it("refuses malformed tokens", () => {
    const { token } = generateToken();
    for (const bad of ["", "cst_", token.toUpperCase(), `${token}x`, token.slice(0, -1), ` ${token}`, token.replace("cst_", "tok_")]) {
      expect(parseToken(bad), bad).toBeNull();
    }
  });

  it("hashes secrets with SHA-256 and compares digests exactly", () => {
    const h = hashSecret("s");
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(sameHash(h, hashSecret("s"))).toBe(true);
    expect(sameHash(h, hashSecret("t"))).toBe(false);
    expect(sameHash(h, h.slice(0, 62))).toBe(false);
    expect(sameHash("", "")).toBe(false);
  });
});

describe("token lifetimes", () => {
  it.each([
    ["90s", 90_000],
    ["30m", 1_800_000],
    ["24h", 86_400_000],
    ["7d", 604_800_000],
    ["3650d", 3650 * 86_400_000],
  ])("%s", (text, ms) => expect(parseLifetime(text)).toBe(ms));

  it.each(["", "0h", "1", "h", "1.5h", "1w", "-1h", " 1h", "3651d", "01h"])("refuses %j", (text) => expect(parseLifetime(text)).toBeNull());
});
