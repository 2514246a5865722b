// One function for where a secret file lands (api/resources/secret-path.ts), used by the secrets
// API, Secret-sync, the PodGroup controller's start gate and `capstan deploy`.
import { describe, expect, it } from "vitest";
import { canonicalSecretPath, sameSecretFile, secretPathProblem, secretPathSpellings } from "../../../api/resources/secret-path.ts";
import { secretModeProblem } from "../../../api/resources/secret-mode.ts";
import { secretsNotReady } from "../../../controllers/podgroup/secret-marker.ts";

describe("canonicalSecretPath", () => {
  it.each([
    ["secret.conf", "secret.conf"],
    ["/platform/app/secret.conf", "secret.conf"],
    ["/platform/app/conf/a.yaml", "conf/a.yaml"],
    ["./conf//a.yaml", "conf/a.yaml"],
    ["/etc/token", "/etc/token"],
    ["/platform/application/x", "/platform/application/x"],
    ["/platform/x", "/platform/x"],
  ])("%s -> %s", (input, out) => expect(canonicalSecretPath(input)).toBe(out));

  it.each(["", "/", "/platform/app", "/platform/app/", "..", "../x", "a/../../etc/passwd", "/etc/../x", "a\0b"])("refuses %j", (input) => {
    expect(canonicalSecretPath(input)).toBeUndefined();
  });

  it("spellings a record may be stored under", () => {
    expect(secretPathSpellings("conf/a")).toEqual(["conf/a", "/platform/app/conf/a"]);
    expect(secretPathSpellings("/etc/a")).toEqual(["/etc/a"]);
  });

  it("sameSecretFile", () => {
    expect(sameSecretFile("secret.conf", "/platform/app/secret.conf")).toBe(true);
    expect(sameSecretFile("/platform/app/secret.conf", "secret.conf")).toBe(true);
    expect(sameSecretFile("secret.conf", "/secret.conf")).toBe(false);
  });
});

describe("secretPathProblem (the secrets API's path rule)", () => {
  it.each(["secret.conf", "/platform/app/secret.conf", "/etc/ssl/key.pem", "conf/a.yaml"])("takes %j", (p) => expect(secretPathProblem(p)).toBeUndefined());
  it.each([
    ["", "empty"],
    ["a".repeat(4097), "4096"],
    ["a\u0001b", "control"],
    ["../etc/passwd", ".."],
    ["conf/../../x", ".."],
    ["/platform/app/../x", ".."],
    ["./a", "'.'"],
    ["a//b", "empty segment"],
    ["//platform/app/x", "'//'"],
    ["//etc/token", "'//'"],
    ["conf/", "trailing"],
    ["/", "name a file"],
    ["/platform/app", "application directory"],
  ])("refuses %j (%s)", (p, words) => expect(secretPathProblem(p)).toContain(words));
});

describe("secretModeProblem", () => {
  it.each(["400", "0400", "640", "0777", "000"])("takes %s", (m) => expect(secretModeProblem(m)).toBeUndefined());
  it.each(["7777", "4755", "2755", "1644", "8", "40", "0777x", "rw", "00400"])("refuses %s", (m) => expect(secretModeProblem(m)).toBeDefined());
});

describe("the PodGroup start gate takes either spelling", () => {
  const marker = (paths: string[]) => ({ containerId: "c", podGroup: "shop.web.web", paths, error: undefined });
  it.each([
    [["secret.conf"], ["/platform/app/secret.conf"]],
    [["/platform/app/secret.conf"], ["secret.conf"]],
    [["secret.conf"], ["secret.conf"]],
  ])("marker %j satisfies listed %j", (paths, listed) => expect(secretsNotReady(marker(paths), "shop.web.web", listed)).toBeUndefined());
  it("another file does not", () => expect(secretsNotReady(marker(["/secret.conf"]), "shop.web.web", ["secret.conf"])).toBe("waiting for secret files"));
});
