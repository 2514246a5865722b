// FilesystemDriver durability: after putContent's and move's rename, the directory that now holds
// the name is fsynced, so the rename itself survives a crash (docs/registry.md, "Filesystem
// storage"). node:fs/promises is wrapped to record, in order, every rename and every sync() of a
// handle opened on a directory.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as fsPromises from "node:fs/promises";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

const events: string[] = [];

vi.mock("node:fs/promises", async (importOriginal) => {
  const real = await importOriginal<typeof fsPromises>();
  const open: typeof real.open = async (...args: Parameters<typeof real.open>) => {
    const handle = await real.open(...args);
    const path = String(args[0]);
    const isDir = (await handle.stat()).isDirectory();
    if (isDir) {
      const sync = handle.sync.bind(handle);
      handle.sync = async () => {
        await sync();
        events.push(`fsync-dir ${path}`);
      };
    }
    return handle;
  };
  const rename: typeof real.rename = async (from, to) => {
    await real.rename(from, to);
    events.push(`rename ${String(to)}`);
  };
  return { ...real, default: { ...real, open, rename }, open, rename };
});

const { FilesystemDriver } = await import("../../../adapters/blobstore/filesystem.ts");

describe("FilesystemDriver durability", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "capstan-fs-durable-"));
    events.length = 0;
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("putContent fsyncs the target's directory after the rename", async () => {
    const d = new FilesystemDriver({ rootDirectory: root });
    await d.putContent("/repositories/a/_manifests/tags/v1/current/link", Buffer.from("sha256:aa"));
    const dir = join(root, "repositories/a/_manifests/tags/v1/current");
    expect(events).toEqual([`rename ${join(dir, "link")}`, `fsync-dir ${dir}`]);
  });

  it("move fsyncs the destination's directory after the rename", async () => {
    const d = new FilesystemDriver({ rootDirectory: root });
    const w = await d.writer("/repositories/a/_uploads/u/data", false);
    await w.write(Buffer.from("bytes"));
    await w.commit();
    events.length = 0;
    await d.move("/repositories/a/_uploads/u/data", "/blobs/sha256/ab/abcd/data");
    const dir = join(root, "blobs/sha256/ab/abcd");
    expect(events).toEqual([`rename ${join(dir, "data")}`, `fsync-dir ${dir}`]);
    expect((await d.getContent("/blobs/sha256/ab/abcd/data")).toString()).toBe("bytes");
  });
});
