// Nonces of AES-256-GCM records come from a refilled pool (api/secrets/crypto.ts): across several
// refills every record still gets a nonce of its own, and each decrypts.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { decrypt, encrypt } from "../../../api/secrets/crypto.ts";

describe("record nonces", () => {
  it("are unique across pool refills, and every record decrypts", () => {
    const key = randomBytes(32);
    const values = Array.from({ length: 2_000 }, (_, i) => encrypt(key, `a\0a.web.w\0p${i}`, Buffer.from(`content ${i}`)));
    const nonces = new Set(values.map((v) => Buffer.from(v.slice(3), "base64").subarray(0, 12).toString("hex")));
    expect(nonces.size).toBe(values.length);
    values.forEach((v, i) => expect(decrypt(key, `a\0a.web.w\0p${i}`, v).toString()).toBe(`content ${i}`));
  });
});
