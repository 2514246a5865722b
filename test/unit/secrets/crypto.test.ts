// AES-256-GCM with the address as associated data, the record plaintext codec, secret keys.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { decrypt, DecryptError, encrypt } from "../../../api/secrets/crypto.ts";
import { aadOf, decodePlaintext, encodePlaintext, parseSecretKey, secretKey } from "../../../api/secrets/record.ts";

const key = randomBytes(32);

describe("secret encryption", () => {
  it("round-trips and uses a fresh nonce per write", () => {
    const aad = aadOf("app", "app.web.web", "conf/a");
    const a = encrypt(key, aad, Buffer.from("hello"));
    const b = encrypt(key, aad, Buffer.from("hello"));
    expect(a).not.toBe(b);
    expect(a).toMatch(/^v1\./);
    expect(decrypt(key, aad, a).toString()).toBe("hello");
  });

  it("fails for another address, another key, or a flipped bit", () => {
    const value = encrypt(key, aadOf("a", "a.web.w", "p"), Buffer.from("secret"));
    expect(() => decrypt(key, aadOf("b", "a.web.w", "p"), value)).toThrow(DecryptError);
    expect(() => decrypt(key, aadOf("a", "a.web.x", "p"), value)).toThrow(DecryptError);
    expect(() => decrypt(key, aadOf("a", "a.web.w", "/p"), value)).toThrow(DecryptError);
    expect(() => decrypt(randomBytes(32), aadOf("a", "a.web.w", "p"), value)).toThrow(DecryptError);
    const raw = Buffer.from(value.slice(3), "base64");
    raw[20] = raw[20]! ^ 1;
    expect(() => decrypt(key, aadOf("a", "a.web.w", "p"), `v1.${raw.toString("base64")}`)).toThrow(DecryptError);
    expect(() => decrypt(key, aadOf("a", "a.web.w", "p"), "v2.AAAA")).toThrow(DecryptError);
    expect(() => decrypt(key, aadOf("a", "a.web.w", "p"), "v1.AAAA")).toThrow(DecryptError);
  });
});

describe("secret records", () => {
  it("encrypts parts as the message they form", () => {
    const aad = aadOf("a", "a.web.w", "p");
    const parts = [Buffer.from("header\n"), Buffer.from("content")];
    expect(decrypt(key, aad, encrypt(key, aad, parts))).toEqual(Buffer.from("header\ncontent"));
  });

  it("keeps content bytes exactly, newlines and NULs included", () => {
    const record = { content: "line1\nline2\u0000\n{\"x\":1}\n", owner: "root", group: "root", mode: "0640" };
    expect(decodePlaintext(Buffer.concat(encodePlaintext(record, "2026-01-01T00:00:00.000Z")))).toEqual({ ...record, updatedAt: "2026-01-01T00:00:00.000Z" });
  });

  it("encodes the path as one key segment and parses it back", () => {
    for (const path of ["conf/a.yaml", "/etc/app/secret", "a b%2F/ü"]) {
      const k = secretKey("app", "app.web.web", path);
      expect(k.split("/").length).toBe(6);
      expect(parseSecretKey(k)).toEqual({ app: "app", proc: "app.web.web", path });
    }
    expect(secretKey("a", "a.web.w", "x")).not.toBe(secretKey("a", "a.web.w", "/x"));
    expect(parseSecretKey("/platform/secrets/_sys/config")).toBeNull();
    expect(parseSecretKey("/platform/secrets/app/only-two")).toBeNull();
    expect(parseSecretKey("/platform/secrets/app/p/%E0%A4%A")).toBeNull();
  });
});
