// FilesystemDriver against the StorageDriver interface's promises (adapters/blobstore/driver.ts):
// objects are files under the root, putContent is atomic, writers append to the file at its path,
// list gives direct children, delete is recursive, and bad paths never reach the disk.
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidPathError, PathNotFoundError } from "../../../adapters/blobstore/driver.ts";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";

async function text(stream: AsyncIterable<unknown>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
}

describe("FilesystemDriver", () => {
  let root: string;
  let d: FilesystemDriver;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "capstan-fsdriver-"));
    d = new FilesystemDriver({ rootDirectory: root });
  });

  afterEach(async () => {
    await d.close();
    await rm(root, { recursive: true, force: true });
  });

  it("stores objects as files under the root; putContent replaces them whole and leaves no temporary file", async () => {
    await d.putContent("/a/b/link", Buffer.from("sha256:one"));
    await d.putContent("/a/b/link", Buffer.from("sha256:two"));
    expect(await readFile(join(root, "a/b/link"), "utf8")).toBe("sha256:two");
    expect((await d.getContent("/a/b/link")).toString()).toBe("sha256:two");
    expect(await readdir(join(root, "a/b"))).toEqual(["link"]);
    await expect(d.getContent("/a/missing")).rejects.toBeInstanceOf(PathNotFoundError);
    await expect(d.getContent("/a")).rejects.toBeInstanceOf(PathNotFoundError);
  });

  it("reads from an offset for a length, and an empty stream past the end", async () => {
    await d.putContent("/f", Buffer.from("0123456789"));
    expect(await text(await d.reader("/f"))).toBe("0123456789");
    expect(await text(await d.reader("/f", 3))).toBe("3456789");
    expect(await text(await d.reader("/f", 3, 4))).toBe("3456");
    expect(await text(await d.reader("/f", 8, 100))).toBe("89");
    expect(await text(await d.reader("/f", 10))).toBe("");
    expect(await text(await d.reader("/f", 2, 0))).toBe("");
    await expect(d.reader("/nope")).rejects.toBeInstanceOf(PathNotFoundError);
  });

  it("writers append to the file at the path across close and reopen (another process), report the size, cancel removes the file", async () => {
    const w = await d.writer("/up/data", false);
    expect(w.size).toBe(0);
    await w.write(Buffer.from("abc"));
    expect(w.size).toBe(3);
    await w.close();
    // In place, as distribution's driver writes an upload's data.
    expect(await readFile(join(root, "up/data"), "utf8")).toBe("abc");
    const again = await new FilesystemDriver({ rootDirectory: root }).writer("/up/data", true);
    expect(again.size).toBe(3);
    await again.write(Buffer.from("def"));
    await again.commit();
    await expect(again.write(Buffer.from("x"))).rejects.toThrow();
    expect((await d.getContent("/up/data")).toString()).toBe("abcdef");
    const fresh = await d.writer("/up/data", false);
    expect(fresh.size).toBe(0);
    await fresh.write(Buffer.from("zz"));
    await fresh.cancel();
    await expect(d.stat("/up/data")).rejects.toBeInstanceOf(PathNotFoundError);
    expect(await readdir(join(root, "up"))).toEqual([]);
  });

  it("stat, list (direct children, full paths), move (replacing), recursive delete", async () => {
    await d.putContent("/r/x/1", Buffer.from("one"));
    await d.putContent("/r/y", Buffer.from("two!"));
    expect(await d.stat("/r/y")).toMatchObject({ path: "/r/y", size: 4, isDir: false });
    expect(await d.stat("/r/x")).toMatchObject({ size: 0, isDir: true });
    expect((await d.list("/r")).sort()).toEqual(["/r/x", "/r/y"]);
    expect(await d.list("/")).toEqual(["/r"]);
    await expect(d.list("/r/y")).rejects.toBeInstanceOf(PathNotFoundError);
    await expect(d.list("/none")).rejects.toBeInstanceOf(PathNotFoundError);
    await d.move("/r/y", "/r/x/1");
    expect((await d.getContent("/r/x/1")).toString()).toBe("two!");
    await d.move("/r/x/1", "/s/t/u");
    expect((await d.getContent("/s/t/u")).toString()).toBe("two!");
    await expect(d.move("/r/y", "/z")).rejects.toBeInstanceOf(PathNotFoundError);
    await d.delete("/s");
    await expect(d.stat("/s/t/u")).rejects.toBeInstanceOf(PathNotFoundError);
    await expect(d.delete("/s")).rejects.toBeInstanceOf(PathNotFoundError);
  });

  it("refuses paths that are not absolute and clean, before touching the disk", async () => {
    for (const p of ["relative", "/a/../b", "/a/./b", "/a//b", "/a/", "/a b", "/a\\b"]) {
      await expect(d.putContent(p, Buffer.from("x")), p).rejects.toBeInstanceOf(InvalidPathError);
      await expect(d.getContent(p), p).rejects.toBeInstanceOf(InvalidPathError);
    }
    expect(await readdir(root)).toEqual([]);
  });
});
