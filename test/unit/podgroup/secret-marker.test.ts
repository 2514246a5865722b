import { describe, expect, it } from "vitest";
import { decodeSealStatus, decodeSecretMarker, sealStatusPrefixOf, secretsNotReady, waitingForSecrets, withSealState } from "../../../controllers/podgroup/secret-marker.ts";

const key = "/platform/secret-sync/installed/abc123";
const marker = (v: unknown) => decodeSecretMarker({ key, value: JSON.stringify(v) });

describe("decodeSecretMarker", () => {
  it("reads the container id from the key and the group, paths and error from the value", () => {
    expect(marker({ podGroup: "app.web.web", files: [{ path: "a", digest: "1" }, { path: "/b", digest: "2" }], at: "t", node: "n1" })).toEqual({
      containerId: "abc123",
      podGroup: "app.web.web",
      paths: ["a", "/b"],
      error: undefined,
    });
    expect(marker({ podGroup: "g", files: [], error: "secret file a is not written for g", at: "t" }).error).toBe("secret file a is not written for g");
  });

  it("an unreadable value names no group, so it never lets a start through", () => {
    for (const value of ["not json", "null", "[]", JSON.stringify({ files: [] }), JSON.stringify({ podGroup: "g" })]) {
      const e = decodeSecretMarker({ key, value });
      expect(e).toEqual({ containerId: "abc123", podGroup: undefined, paths: [], error: undefined });
      expect(secretsNotReady(e, "g", ["a"])).toBe(waitingForSecrets);
    }
  });
});

describe("secretsNotReady", () => {
  const ok = marker({ podGroup: "g", files: [{ path: "a", digest: "1" }, { path: "/etc/b", digest: "2" }], at: "t" });

  it("nothing listed: never waits, marker or not", () => {
    expect(secretsNotReady(undefined, "g", [])).toBeUndefined();
  });

  it("waits without a marker, for a marker of another group, and for one that misses a listed path", () => {
    expect(secretsNotReady(undefined, "g", ["a"])).toBe(waitingForSecrets);
    expect(secretsNotReady(ok, "other", ["a"])).toBe(waitingForSecrets);
    expect(secretsNotReady(ok, "g", ["a", "/etc/b", "c"])).toBe(waitingForSecrets);
    // Paths are compared as files: a relative path is its /platform/app form, not another absolute one.
    expect(secretsNotReady(ok, "g", ["/platform/app/a"])).toBeUndefined();
    expect(secretsNotReady(ok, "g", ["/a"])).toBe(waitingForSecrets);
  });

  it("reports the marker's error text as the reason", () => {
    const bad = marker({ podGroup: "g", files: [], error: "secret file a is not written for g", at: "t" });
    expect(secretsNotReady(bad, "g", ["a"])).toBe("secret file a is not written for g");
  });

  it("ready once every listed path is covered (in any order)", () => {
    expect(secretsNotReady(ok, "g", ["/etc/b", "a"])).toBeUndefined();
    expect(secretsNotReady(ok, "g", ["a"])).toBeUndefined();
  });
});

describe("the seal in the wait (docs/secrets.md, \"Seeing the seal\")", () => {
  it("a group waiting for its files while the secrets service is sealed says so; unsealed, the plain wait", () => {
    const sealedOn = (v: string) => decodeSealStatus({ value: v }).sealed;
    expect(sealedOn(JSON.stringify({ sealed: true, at: "t" }))).toBe(true);
    for (const v of [JSON.stringify({ sealed: false }), "junk", "null"]) expect(sealedOn(v)).toBe(false);
    expect(secretsNotReady(withSealState(undefined, "c1", true), "g", ["a"])).toBe("waiting for secret files: secrets service sealed");
    expect(secretsNotReady(withSealState(undefined, "c1", false), "g", ["a"])).toBe(waitingForSecrets);
    const partial = marker({ podGroup: "g", files: [{ path: "a", digest: "1" }], at: "t" });
    expect(secretsNotReady(withSealState(partial, "c1", true), "g", ["a", "b"])).toBe("waiting for secret files: secrets service sealed");
    // Files installed before the seal still let the pod start.
    expect(secretsNotReady(withSealState(partial, "c1", true), "g", ["a"])).toBeUndefined();
    expect(sealStatusPrefixOf("/t/x/secret-sync/installed/")).toBe("/t/x/secret-sync/seal/");
    expect(sealStatusPrefixOf("/platform/secret-sync/installed/")).toBe("/platform/secret-sync/seal/");
  });
});
