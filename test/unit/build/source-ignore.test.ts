// The source archive (docs/build.md, "The cache"): .dockerignore / .capstanignore as Docker reads
// them, the digest over exactly the entries sent, symbolic link targets length-prefixed.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { extract } from "tar-stream";
import { afterEach, describe, expect, it } from "vitest";
import { BuildError } from "../../../adapters/build/plan.ts";
import { archiveSource, isIgnored, parseIgnore } from "../../../adapters/build/source.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "capstan-src-"));
  dirs.push(dir);
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(join(dir, rel, ".."), { recursive: true });
    writeFileSync(join(dir, rel), content);
  }
  return dir;
}

async function names(tar: Buffer[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const ex = extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on("entry", (h, s, next) => {
      const chunks: Buffer[] = [];
      s.on("data", (c: unknown) => chunks.push(c as Buffer));
      s.on("end", () => {
        out[h.name] = h.type === "file" ? Buffer.concat(chunks).toString() : h.type;
        next();
      });
    });
    ex.on("finish", resolve);
    ex.on("error", reject);
  });
  ex.end(Buffer.concat(tar));
  await done;
  return out;
}

describe(".dockerignore patterns, as Docker matches them", () => {
  const ignored = (text: string, path: string) => isIgnored(parseIgnore(text, ".dockerignore"), path);

  it("anchors at the root; * stays in one directory, ** crosses them", () => {
    expect(ignored("*.log", "a.log")).toBe(true);
    expect(ignored("*.log", "d/a.log")).toBe(false);
    expect(ignored("**/*.log", "d/e/a.log")).toBe(true);
    expect(ignored("**/*.log", "a.log")).toBe(true);
    expect(ignored("d/**/x", "d/x")).toBe(true);
    expect(ignored("d/**/x", "d/a/b/x")).toBe(true);
    expect(ignored("a?c", "abc")).toBe(true);
    expect(ignored("a?c", "a/c")).toBe(false);
    expect(ignored("[ab].txt", "b.txt")).toBe(true);
    expect(ignored("a.txt", "abtxt")).toBe(false);
  });

  it("excludes a directory's content with it; the last matching line wins; ! brings a path back", () => {
    expect(ignored("node_modules", "node_modules/x/y.js")).toBe(true);
    expect(ignored("/node_modules/", "node_modules")).toBe(true);
    expect(ignored("./build/../node_modules", "node_modules/x")).toBe(true);
    expect(ignored("*.md\n!README.md", "README.md")).toBe(false);
    expect(ignored("*.md\n!README.md", "x.md")).toBe(true);
    expect(ignored("!README.md\n*.md", "README.md")).toBe(true);
    expect(ignored("docs\n!docs/keep", "docs/keep")).toBe(false);
    expect(ignored("# a comment\n\n   \n", "# a comment")).toBe(false);
    expect(ignored("*", "anything/below")).toBe(true);
  });

  it("says which line is bad", () => {
    expect(() => parseIgnore("ok\n!\n", "/src/.dockerignore")).toThrow(new BuildError('/src/.dockerignore:2: "!" without a pattern'));
  });
});

describe("the source archive", () => {
  it("sends and digests only what the ignore file leaves: a change to an excluded file does not rebuild", async () => {
    const dir = tree({
      ".dockerignore": "node_modules\n*.log\nsecret/\n!secret/public.txt\n",
      "app.js": "x",
      "debug.log": "1",
      "node_modules/m/index.js": "m",
      "secret/key": "k",
      "secret/public.txt": "p",
    });
    const one = await archiveSource(dir, "platform/app");
    expect(one.ignoreFile).toBe(".dockerignore");
    expect(one.sent).toEqual([".dockerignore", "app.js", "secret/public.txt"]);
    expect(await names(one.tar)).toEqual({ "platform/app/.dockerignore": expect.any(String), "platform/app/app.js": "x", "platform/app/secret/public.txt": "p" });
    writeFileSync(join(dir, "debug.log"), "2");
    writeFileSync(join(dir, "node_modules/m/index.js"), "changed");
    writeFileSync(join(dir, "secret/key"), "changed");
    expect((await archiveSource(dir, "platform/app")).digest).toBe(one.digest);
    writeFileSync(join(dir, "secret/public.txt"), "changed");
    expect((await archiveSource(dir, "platform/app")).digest).not.toBe(one.digest);
  });

  it("prefers .capstanignore to .dockerignore", async () => {
    const dir = tree({ ".capstanignore": "b\n", ".dockerignore": "a\n", a: "a", b: "b" });
    const s = await archiveSource(dir, "p");
    expect(s.ignoreFile).toBe(".capstanignore");
    expect(s.sent).toEqual([".capstanignore", ".dockerignore", "a"]);
  });

  it("length-prefixes a link's target: one link cannot pass for two", async () => {
    // Without the prefix both hash "symlink 777 1:l\nx\nsymlink 777 1:m\ny\n".
    const one = tree({});
    symlinkSync("x\nsymlink 777 1:m\ny", join(one, "l"));
    const two = tree({});
    symlinkSync("x", join(two, "l"));
    symlinkSync("y", join(two, "m"));
    expect((await archiveSource(one, "p")).digest).not.toBe((await archiveSource(two, "p")).digest);
  });
});
