import { describe, expect, it } from "vitest";
import { sameSecretFile } from "../../../api/resources/secret-path.ts";
import { filesToRemove, planInstall, removalIntent, resolveSecretPath } from "../../../controllers/secretsync/files.ts";
import { decodeMarker, digestOf, markerCovers, markerHasError, presentFiles } from "../../../controllers/secretsync/marker.ts";
import { appOf, decodeSpec, listsSecrets } from "../../../controllers/secretsync/specs.ts";
import type { SecretFileRecord } from "../../../controllers/secretsync/vault.ts";

const rec = (path: string, content: string, mode = "400"): [string, SecretFileRecord] => [path, { path, content, mode }];

describe("resolveSecretPath", () => {
  it.each([
    ["config.yaml", "/platform/app/config.yaml"],
    ["./conf/a.yaml", "/platform/app/conf/a.yaml"],
    ["/etc/token", "/etc/token"],
    ["/etc//x/./y", "/etc/x/y"],
  ])("%s -> %s", (input, out) => expect(resolveSecretPath(input)).toBe(out));

  it.each(["", "/", "../x", "a/../../etc/passwd", "/etc/", "a\0b", "."])("refuses %j", (input) => {
    expect(resolveSecretPath(input)).toBeUndefined();
  });
});

describe("planInstall", () => {
  const proc = "shop.web.web";

  it("installs exactly the listed files, as root, with the stored mode, digests by listed path", () => {
    const records = new Map([rec("a.yaml", "A", "440"), rec("/etc/b", "B"), rec("unlisted", "U")]);
    const plan = planInstall(proc, ["a.yaml", "/etc/b"], records);
    expect(plan).toEqual({
      kind: "install",
      files: [
        { path: "/platform/app/a.yaml", content: "A", mode: 0o440, uid: 0, gid: 0 },
        { path: "/etc/b", content: "B", mode: 0o400, uid: 0, gid: 0 },
      ],
      installed: [
        { path: "a.yaml", digest: digestOf("A", "440") },
        { path: "/etc/b", digest: digestOf("B", "400") },
      ],
    });
  });

  it("names the missing file, or all of them", () => {
    const records = new Map([rec("a", "A")]);
    expect(planInstall(proc, ["a", "b"], records)).toEqual({ kind: "error", error: `secret file b is not written for ${proc}` });
    expect(planInstall(proc, ["c", "a", "b"], records)).toEqual({ kind: "error", error: `secret files c, b are not written for ${proc}` });
  });

  it("a relative and an absolute spelling of one file satisfy each other, both ways", () => {
    const abs = planInstall(proc, ["secret.conf"], new Map([rec("/platform/app/secret.conf", "abs")]));
    expect(abs).toMatchObject({ kind: "install", files: [{ path: "/platform/app/secret.conf", content: "abs" }], installed: [{ path: "secret.conf" }] });
    const rel = planInstall(proc, ["/platform/app/secret.conf"], new Map([rec("secret.conf", "rel")]));
    expect(rel).toMatchObject({ kind: "install", files: [{ path: "/platform/app/secret.conf", content: "rel" }] });
    // Both spellings stored (before the API kept one): the later write wins, either way round.
    const older = (path: string, content: string, modRevision: number): [string, SecretFileRecord] => [path, { path, content, mode: "400", modRevision }];
    const absLater = new Map([older("/platform/app/secret.conf", "abs", 9), older("secret.conf", "rel", 5)]);
    expect(planInstall(proc, ["secret.conf"], absLater)).toMatchObject({ kind: "install", files: [{ content: "abs" }] });
    expect(planInstall(proc, ["/platform/app/secret.conf"], absLater)).toMatchObject({ kind: "install", files: [{ content: "abs" }] });
    const relLater = new Map([older("/platform/app/secret.conf", "abs", 5), older("secret.conf", "rel", 9)]);
    expect(planInstall(proc, ["/platform/app/secret.conf"], relLater)).toMatchObject({ kind: "install", files: [{ content: "rel" }] });
    // Another file is still another file.
    expect(planInstall(proc, ["a"], new Map([rec("/etc/a", "x")]))).toMatchObject({ kind: "error" });
  });

  it("sameSecretFile compares where files land", () => {
    expect(sameSecretFile("secret.conf", "/platform/app/secret.conf")).toBe(true);
    expect(sameSecretFile("./conf/a", "conf/a")).toBe(true);
    expect(sameSecretFile("a", "/etc/a")).toBe(false);
    expect(sameSecretFile("../x", "/platform/x")).toBe(false);
  });

  it("refuses a mode that is not octal, and two listed paths landing on one file", () => {
    expect(planInstall(proc, ["a"], new Map([rec("a", "A", "rw")]))).toMatchObject({ kind: "error", error: expect.stringContaining('invalid mode "rw"') });
    expect(planInstall(proc, ["a"], new Map([rec("a", "A", "800")]))).toMatchObject({ kind: "error" });
    const both = new Map([rec("a", "1"), rec("/platform/app/a", "2")]);
    expect(planInstall(proc, ["a", "/platform/app/a"], both)).toMatchObject({ kind: "error", error: expect.stringContaining("both resolve to /platform/app/a") });
  });

  it("refuses a stored mode with setuid, setgid or sticky bits (records from before the API refused them)", () => {
    for (const mode of ["7777", "4755", "2700", "1644"]) {
      expect(planInstall(proc, ["a"], new Map([rec("a", "A", mode)]))).toEqual({
        kind: "error",
        error: `secret file a of ${proc} has an invalid mode "${mode}": must not set the setuid, setgid or sticky bits (a 4-digit mode starts with 0); write it again`,
      });
    }
    expect(planInstall(proc, ["a"], new Map([rec("a", "A", "0640")]))).toMatchObject({ kind: "install", files: [{ mode: 0o640 }] });
  });

  it("a path listed twice is installed once", () => {
    const plan = planInstall(proc, ["a", "a"], new Map([rec("a", "A")]));
    expect(plan.kind === "install" && plan.files.length).toBe(1);
  });
});

describe("markers", () => {
  it("digest covers mode and content, unambiguously", () => {
    expect(digestOf("x", "400")).not.toBe(digestOf("x", "440"));
    expect(digestOf("0x", "40")).not.toBe(digestOf("x", "400"));
    expect(digestOf("x", "400")).toMatch(/^[0-9a-f]{64}$/);
  });

  it("covers only the same group, the same paths and digests, without error", () => {
    const files = [{ path: "a", digest: "d1" }, { path: "b", digest: "d2" }];
    const m = { podGroup: "g", files, at: "t" };
    expect(markerCovers(m, "g", [files[1]!, files[0]!])).toBe(true);
    expect(markerCovers(m, "h", files)).toBe(false);
    expect(markerCovers(m, "g", [files[0]!])).toBe(false);
    expect(markerCovers(m, "g", [files[0]!, { path: "b", digest: "other" }])).toBe(false);
    expect(markerCovers({ ...m, error: "e" }, "g", files)).toBe(false);
    expect(markerCovers(undefined, "g", files)).toBe(false);
    expect(markerHasError({ podGroup: "g", files: [], error: "e", at: "t" }, "g", "e")).toBe(true);
    expect(markerHasError({ podGroup: "g", files: [], error: "e", at: "t" }, "g", "other")).toBe(false);
  });

  it("decodes leniently: garbage is an absent marker, never a throw", () => {
    const key = "/platform/secret-sync/installed/abc123";
    expect(decodeMarker({ key, value: JSON.stringify({ podGroup: "g", files: [], at: "t" }) })).toEqual({
      containerId: "abc123",
      marker: { podGroup: "g", files: [], at: "t" },
    });
    expect(decodeMarker({ key, value: "{" }).marker).toBeUndefined();
    expect(decodeMarker({ key, value: JSON.stringify({ podGroup: "g", files: [{ path: 1 }] }) }).marker).toBeUndefined();
  });
});

describe("specs and secret keys", () => {
  const key = "/platform/orchestrator/podgroups/shop.web.web";
  const spec = (containers: unknown[], extra: object = {}) => JSON.stringify({ name: "shop.web.web", namespace: "shop", pod: { containers }, ...extra });

  it("reads secretFiles per container index", () => {
    const e = decodeSpec({ key, value: spec([{ image: "x", secretFiles: ["a"] }, { image: "y" }]) });
    expect(e).toEqual({ name: "shop.web.web", secretFiles: [["a"], []], deleting: false });
    expect(listsSecrets(e)).toBe(true);
    expect(listsSecrets(decodeSpec({ key, value: spec([{ image: "y" }]) }))).toBe(false);
    expect(decodeSpec({ key, value: spec([], { deleting: true }) }).deleting).toBe(true);
  });

  it("an unreadable spec or one whose name differs from its key lists nothing", () => {
    expect(decodeSpec({ key, value: "nope" }).secretFiles).toBeUndefined();
    expect(decodeSpec({ key, value: JSON.stringify({ name: "other", pod: { containers: [] } }) }).secretFiles).toBeUndefined();
  });

  it("a group not named for its namespace gets no secrets (they would be another app's)", () => {
    const other = JSON.stringify({ name: "shop.web.web", namespace: "mallory", pod: { containers: [{ image: "x", secretFiles: ["a"] }] } });
    expect(listsSecrets(decodeSpec({ key, value: other }))).toBe(false);
  });

  it("names the app of a proc by its first dot segment", () => {
    expect(appOf("shop.web.web")).toBe("shop");
    expect(appOf("plain")).toBe("plain");
  });
});

describe("deleted secrets (filesToRemove, presentFiles)", () => {
  it("a present file goes once no record of the proc lands on it, whichever spelling it was written under", () => {
    const present = ["/platform/app/a", "/platform/app/b", "/etc/c"];
    expect(filesToRemove(present, new Map([rec("a", "A"), rec("/platform/app/b", "B"), rec("/etc/c", "C")]))).toEqual([]);
    expect(filesToRemove(present, new Map([rec("/platform/app/a", "A")]))).toEqual(["/platform/app/b", "/etc/c"]);
    expect(filesToRemove(present, new Map())).toEqual(present);
    // Written but no longer listed: not ours to remove (a spec change replaces containers).
    expect(filesToRemove(["/platform/app/old"], new Map([rec("old", "O")]))).toEqual([]);
  });

  it("present files: the marker's list, else its files when it has no error", () => {
    const base = { podGroup: "g", at: "t" };
    expect(presentFiles(undefined)).toEqual([]);
    expect(presentFiles({ ...base, files: [{ path: "a", digest: "d" }, { path: "/etc/x", digest: "d" }] })).toEqual(["/platform/app/a", "/etc/x"]);
    expect(presentFiles({ ...base, files: [], error: "e" })).toEqual([]);
    expect(presentFiles({ ...base, files: [], error: "e", present: ["/platform/app/a"] })).toEqual(["/platform/app/a"]);
    expect(decodeMarker({ key: "/m/c1", value: JSON.stringify({ ...base, files: [], present: [1] }) }).marker).toBeUndefined();
    expect(decodeMarker({ key: "/m/c1", value: JSON.stringify({ ...base, files: [], present: ["/x"] }) }).marker?.present).toEqual(["/x"]);
  });
});

describe("removalIntent (S6: the marker stops covering a file before it is removed)", () => {
  const at = "2026-01-01T00:00:00Z";
  const covering = { podGroup: "a.web.web", files: [{ path: "x.txt", digest: "d1" }, { path: "/etc/y", digest: "d2" }], at, present: ["/platform/app/x.txt", "/etc/y"] };
  it("a listed file whose record is gone: the not-written error, no files", () => {
    const plan = planInstall("a.web.web", ["x.txt", "/etc/y"], new Map<string, SecretFileRecord>([["/etc/y", { path: "/etc/y", content: "c", mode: "400" }]]));
    expect(plan.kind).toBe("error");
    expect(removalIntent(covering, "a.web.web", ["/platform/app/x.txt"], plan)).toEqual({ podGroup: "a.web.web", files: [], error: "secret file x.txt is not written for a.web.web" });
  });
  it("otherwise the files but those removed; nothing when the marker names none of them or has an error", () => {
    const install = { kind: "install" as const, files: [], installed: [] };
    expect(removalIntent(covering, "a.web.web", ["/etc/y"], install)).toEqual({ podGroup: "a.web.web", files: [{ path: "x.txt", digest: "d1" }] });
    expect(removalIntent(covering, "a.web.web", ["/etc/z"], install)).toBeUndefined();
    expect(removalIntent({ ...covering, files: [], error: "e" }, "a.web.web", ["/etc/y"], install)).toBeUndefined();
    expect(removalIntent(undefined, "a.web.web", ["/etc/y"], install)).toBeUndefined();
  });
});
