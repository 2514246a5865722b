import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  buildTag,
  cacheKey,
  copyPaths,
  failedLine,
  metaTag,
  prepareKey,
  prepareTag,
  releasesNewestFirst,
  releaseTag,
  releaseTime,
  renameEntry,
  scriptWrapper,
  withoutMarker,
} from "../../../adapters/build/plan.ts";
import { archiveSource } from "../../../adapters/build/source.ts";
import { parseChallenge, registryBaseUrl } from "../../../adapters/build/registry-tags.ts";

const at = new Date("2026-03-04T05:06:07.890Z");

describe("build plan", () => {
  it("runs each line with its own sh -c and stops at the first failing one with its code", () => {
    const sh = (lines: string[]) => {
      try {
        return { code: 0, stderr: execFileSync("sh", ["-c", scriptWrapper(lines)], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) };
      } catch (e) {
        const err = e as { status: number; stderr: string; stdout: string };
        return { code: err.status, stderr: err.stderr, stdout: err.stdout };
      }
    };
    const ok = sh(["echo 'it''s'", "x=1; echo $x"]);
    expect(ok).toEqual({ code: 0, stderr: "its\n1\n" });
    const bad = sh(["echo a", "exit 4", "echo never"]);
    expect(bad.code).toBe(4);
    expect(bad.stdout).toBe("a\n");
    expect(failedLine(bad.stderr)).toEqual({ line: 2, code: 4 });
    expect(withoutMarker(bad.stderr)).toBe("");
    expect(failedLine("fine\n")).toBeUndefined();
  });

  it("keys the build cache by base image, script and source, and the prepare cache by base, version and script", () => {
    const k = cacheKey("sha256:a", ["make"], "d1");
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    expect(cacheKey("sha256:a", ["make"], "d1")).toBe(k);
    for (const other of [cacheKey("sha256:b", ["make"], "d1"), cacheKey("sha256:a", ["make", "x"], "d1"), cacheKey("sha256:a", ["make"], "d2"), cacheKey("sha256:a", ["ma", "ke"], "d1")]) expect(other).not.toBe(k);
    expect(prepareKey("sha256:a", "1", ["x"])).not.toBe(prepareKey("sha256:a", "2", ["x"]));
  });

  it("names tags by the original's groups", () => {
    expect(prepareTag("1", at)).toBe("prepare-1-20260304050607");
    expect(buildTag({ now: at, cacheKey: "0123456789abcdef" })).toBe("build-20260304050607-0123456789ab");
    expect(buildTag({ now: at, cacheKey: "x", git: { committerDate: new Date("2025-01-02T03:04:05Z"), commit: "ffeeddccbbaa99887766" } })).toBe("build-20250102030405-ffeeddccbbaa");
    const r = releaseTag(at, "abcdef0123456789");
    expect(r).toBe("release-20260304050607890-abcdef012345");
    expect(metaTag(r)).toBe("meta-20260304050607890-abcdef012345");
    expect(releaseTime(r)?.toISOString()).toBe("2026-03-04T05:06:07.890Z");
    expect(releasesNewestFirst(["latest", "release-20250101000000-aaaaaaaaaaaa", "meta-20270101000000-aaaaaaaaaaaa", r, "release-x"])).toEqual([r, "release-20250101000000-aaaaaaaaaaaa"]);
    // Two releases in one second: the later first, whatever their digests (a tag of seconds only,
    // made before milliseconds were added, counts as .000).
    const early = releaseTag(new Date("2026-03-04T05:06:07.100Z"), "ffffffffffffffff");
    const late = releaseTag(new Date("2026-03-04T05:06:07.900Z"), "0000000000000000");
    expect(releasesNewestFirst([early, late, "release-20260304050607-888888888888"])).toEqual([late, early, "release-20260304050607-888888888888"]);
  });

  it("places release.copy entries: relative sources in /platform/app, archive names moved to dest", () => {
    expect(copyPaths({ src: "out/hello.txt", dest: "/srv/hello.txt" })).toEqual({ src: "/platform/app/out/hello.txt", dest: "/srv/hello.txt" });
    expect(copyPaths({ src: "/abs/dir/", dest: "bin" })).toEqual({ src: "/abs/dir", dest: "/platform/app/bin" });
    expect(renameEntry("hello.txt", "hello.txt", "/srv/hello.txt")).toBe("srv/hello.txt");
    expect(renameEntry("dir/", "dir", "/opt/d")).toBe("opt/d");
    expect(renameEntry("dir/a/b", "dir", "/opt/d")).toBe("opt/d/a/b");
    expect(renameEntry("other", "dir", "/opt/d")).toBeUndefined();
  });

  it("digests the source tree by content, not by times, and leaves .git out", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-src-"));
    try {
      writeFileSync(join(dir, "a.txt"), "a");
      mkdirSync(join(dir, ".git"));
      writeFileSync(join(dir, ".git", "HEAD"), "x");
      const one = await archiveSource(dir, "platform/app");
      expect(one.files).toBe(1);
      writeFileSync(join(dir, ".git", "HEAD"), "y");
      writeFileSync(join(dir, "a.txt"), "a"); // rewritten: new mtime, same content
      expect((await archiveSource(dir, "platform/app")).digest).toBe(one.digest);
      writeFileSync(join(dir, "a.txt"), "b");
      expect((await archiveSource(dir, "platform/app")).digest).not.toBe(one.digest);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads the registry's Bearer challenge; loopback registries are plain HTTP", () => {
    expect(parseChallenge('Bearer realm="http://127.0.0.1:9000/api/v1/authorize/registry/",service="capstan-registry"')).toEqual({
      realm: "http://127.0.0.1:9000/api/v1/authorize/registry/",
      service: "capstan-registry",
    });
    expect(parseChallenge("Basic realm=x")).toEqual({});
    expect(registryBaseUrl("127.0.0.1:5000")).toBe("http://127.0.0.1:5000");
    expect(registryBaseUrl("registry.example:5000")).toBe("https://registry.example:5000");
  });
});
