// CAPSTAN_ADMIN_TOKEN: a token Capstan issued, or any secret the operator chose with enough entropy
// (k3s's --token habit); refusals say what is wrong and how to make a good one.
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { AdminTokenError, adminTokenParts } from "../../../api/console/admin-token.ts";
import { entropyBits, operatorTokenParts, operatorTokenProblem } from "../../../api/console/operator-token.ts";
import { generateToken } from "../../../api/console/tokens.ts";

describe("operator-chosen admin tokens", () => {
  it("accept what openssl rand and a long passphrase give", () => {
    for (const token of [
      randomBytes(32).toString("hex"), // openssl rand -hex 32
      randomBytes(16).toString("hex"), // openssl rand -hex 16: 32 characters
      randomBytes(32).toString("base64"), // openssl rand -base64 32
      "correct-horse-battery-staple-Tr0ub4dor&3",
    ]) {
      expect(operatorTokenProblem(token), token).toBeUndefined();
      expect(adminTokenParts(token)).toEqual(operatorTokenParts(token));
    }
  });

  it("refuse short, spaced, predictable and cst_-lookalike strings, each with its reason", () => {
    expect(operatorTokenProblem("changeme")).toBe("it has 8 characters; at least 32 are needed");
    expect(operatorTokenProblem("a".repeat(40))).toMatch(/^it is too predictable \(about 0 bits/);
    expect(operatorTokenProblem("password".repeat(4))).toMatch(/too predictable \(about 88 bits of entropy by its characters; at least 96/);
    expect(operatorTokenProblem(`${randomBytes(20).toString("hex")} x`)).toBe("it must be printable ASCII without spaces");
    expect(operatorTokenProblem(`cst_${randomBytes(20).toString("hex")}`)).toMatch(/starts with cst_ but is not a token Capstan issued/);
    expect(() => adminTokenParts("changeme")).toThrow(AdminTokenError);
    expect(() => adminTokenParts("changeme")).toThrow(/at least 32 are needed\. Give any secret of at least 32 printable characters without spaces \(make one with: openssl rand -hex 32\), or a token Capstan issued/);
  });

  it("estimate entropy from the characters' frequencies", () => {
    expect(entropyBits("")).toBe(0);
    expect(entropyBits("ab".repeat(16))).toBe(32);
    expect(entropyBits("0123456789abcdef".repeat(2))).toBe(128);
  });

  it("derive a stable 12-hex id, different per token, and keep the whole token as the secret", () => {
    const token = randomBytes(32).toString("hex");
    const parts = operatorTokenParts(token)!;
    expect(parts.id).toMatch(/^[0-9a-f]{12}$/);
    expect(parts.secret).toBe(token);
    expect(operatorTokenParts(token)).toEqual(parts);
    expect(operatorTokenParts(randomBytes(32).toString("hex"))!.id).not.toBe(parts.id);
    expect(operatorTokenParts("short")).toBeNull();
  });

  it("leave issued tokens to their strict form", () => {
    const issued = generateToken();
    expect(adminTokenParts(issued.token)).toEqual({ id: issued.id, secret: issued.secret });
    expect(operatorTokenParts(issued.token)).toBeNull();
  });
});
