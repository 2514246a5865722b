import { describe, expect, it } from "vitest";
import { CsrfSigner, csrfTtlMs } from "../../../api/authproxy/csrf.ts";
import { safeReturnPath } from "../../../api/authproxy/return-path.ts";

describe("csrf values", () => {
  it("verifies its own values, once, until they expire", () => {
    let now = 1_000_000;
    const s = new CsrfSigner(Buffer.from("k".repeat(32)), () => now);
    const v = s.issue();
    expect(v).toMatch(/^[A-Za-z0-9_-]+\.[0-9a-z]+\.[A-Za-z0-9_-]+$/);
    expect(s.check(v)).toEqual({ ok: true });
    s.consume(v);
    expect(s.check(v)).toEqual({ ok: false, reason: "used" });
    const w = s.issue();
    now += csrfTtlMs + 1;
    expect(s.check(w)).toEqual({ ok: false, reason: "expired" });
  });

  it("refuses every spelling of a used value, not only the exact string", () => {
    const s = new CsrfSigner(Buffer.from("k".repeat(32)));
    const v = s.issue();
    s.consume(v);
    const mac = v.split(".")[2]!;
    const sibling = mac.slice(0, -1) + (mac.at(-1) === "A" ? "B" : "A");
    for (const variant of [v, `${v}=`, `${v}~`, v.replace(mac, sibling), v.replace(mac, `~${mac}`)]) {
      expect(s.check(variant).ok, variant).toBe(false);
    }
  });

  it("refuses, for reuse, a value with too little life left", () => {
    let now = 1_000_000;
    const s = new CsrfSigner(Buffer.from("k".repeat(32)), () => now);
    const v = s.issue();
    now += csrfTtlMs - 60_000;
    expect(s.check(v).ok).toBe(true);
    expect(s.check(v, 5 * 60_000)).toEqual({ ok: false, reason: "expired" });
  });

  it("refuses values it never issued", () => {
    const s = new CsrfSigner(Buffer.from("k".repeat(32)));
    const other = new CsrfSigner(Buffer.from("x".repeat(32)));
    expect(s.check(other.issue())).toEqual({ ok: false, reason: "forged" });
    expect(s.check("attacker-chosen")).toEqual({ ok: false, reason: "malformed" });
    const v = s.issue();
    const [a, t] = v.split(".");
    expect(s.check(`${a}.${t}.AAAA`)).toEqual({ ok: false, reason: "forged" });
    expect(s.check(`${a}X.${t}.${v.split(".")[2]}`)).toEqual({ ok: false, reason: "forged" });
  });

  it("derives a nonce and a PKCE pair per value", () => {
    const s = new CsrfSigner(Buffer.from("k".repeat(32)));
    const a = s.issue();
    const b = s.issue();
    expect(s.nonce(a)).not.toBe(s.nonce(b));
    const p = s.pkce(a);
    expect(p.verifier.length).toBeGreaterThanOrEqual(43);
    expect(p.verifier).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(p.challenge).not.toBe(p.verifier);
    expect(s.pkce(a)).toEqual(p);
  });
});

describe("return path after login", () => {
  it.each([
    ["%2Fapp%2Fpage%3Fx%3D1", "/app/page?x=1"],
    ["%2F", "/"],
    ["%2Fa%2F%2Fb", "/a//b"],
    ["%2F%25C3%25A9", "/%C3%A9"],
    ["%2F%C3%A9", "/%C3%A9"],
    ["%2Fa%20b", "/a%20b"],
  ])("keeps same-origin path %s", (quoted, want) => {
    expect(safeReturnPath(quoted)).toBe(want);
  });

  it.each([
    "%2F%2Fevil.com",
    "%2F%5Cevil.com",
    "%5C%2Fevil.com",
    "%2F%09%2Fevil.com",
    "%2F%2509%2Fevil.com".replace("%2509", "%09"),
    "%2F%20%2Fevil.com",
    "%2F.%2F%5Cevil.com",
    "%2F..%2F..%2F%2Fevil.com",
    "https%3A%2F%2Fevil.com",
    "http%3Aevil.com",
    "javascript%3Aalert(1)",
    "evil.com%2Fx",
    "%2F%0d%0aSet-Cookie%3A%20sso%3Dx",
    "%E0%A4%A",
    "",
    `%2F${"a".repeat(5000)}`,
  ])("sends %s to /", (quoted) => {
    expect(safeReturnPath(quoted)).toBe("/");
  });
});
