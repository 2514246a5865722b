// The StorageDriver contract (adapters/blobstore/driver.ts), as one vitest suite that runs on every
// driver: test/integration/blobstore/contract.test.ts calls driverContract() for the filesystem and
// the S3 driver. Each test gets a fresh, empty store; `reopen()` opens a second driver instance on
// the same store, which is what a restarted process (or a second registry instance) sees.
import { createHash, randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { InvalidPathError, PathNotFoundError, type StorageDriver } from "../../adapters/blobstore/driver.ts";

export interface ContractStore {
  driver: StorageDriver;
  /** Another driver instance on the same store (a restarted process). */
  reopen(): Promise<StorageDriver>;
  /** Remove the store and close every driver opened on it. */
  cleanup(): Promise<void>;
}

const MiB = 1024 * 1024;

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(chunks);
}

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** Deterministic bytes (fast to make, different at every offset within a few MiB). */
export function pattern(size: number, seed = 1): Buffer {
  const b = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i + 4 <= size; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b.writeUInt32LE(x >>> 0, i);
  }
  for (let i = size - (size % 4); i < size; i++) b[i] = i & 0xff;
  return b;
}

/** Write `data` in `piece`-sized writes. */
async function writeIn(w: { write(c: Uint8Array): Promise<void> }, data: Buffer, piece = 64 * 1024): Promise<void> {
  for (let i = 0; i < data.length; i += piece) await w.write(data.subarray(i, i + piece));
}

async function rejectsWith(p: Promise<unknown>, cls: new (...args: never[]) => Error): Promise<void> {
  await expect(p).rejects.toBeInstanceOf(cls);
}

export function driverContract(name: string, makeStore: () => Promise<ContractStore>): void {
  describe(`StorageDriver contract: ${name}`, () => {
    let store: ContractStore | undefined;
    afterEach(async () => {
      await store?.cleanup();
      store = undefined;
    });
    async function fresh(): Promise<StorageDriver> {
      store = await makeStore();
      return store.driver;
    }

    it("refuses invalid paths in every method", async () => {
      const d = await fresh();
      const bad = ["", "a/b", "/a/", "/a//b", "/a/./b", "/a/../b", "/..", "/a b", "/a\\b", "//"];
      for (const p of bad) {
        await rejectsWith(d.getContent(p), InvalidPathError);
        await rejectsWith(d.putContent(p, Buffer.from("x")), InvalidPathError);
        await rejectsWith(d.reader(p), InvalidPathError);
        await rejectsWith(d.writer(p, false), InvalidPathError);
        await rejectsWith(d.stat(p), InvalidPathError);
        await rejectsWith(d.list(p), InvalidPathError);
        await rejectsWith(d.move(p, "/ok"), InvalidPathError);
        await rejectsWith(d.move("/ok", p), InvalidPathError);
        await rejectsWith(d.delete(p), InvalidPathError);
      }
      // Nothing was created by the refused calls.
      await rejectsWith(d.stat("/ok"), PathNotFoundError);
    });

    it("getContent, stat, reader, list, delete, move of a missing path: PathNotFoundError", async () => {
      const d = await fresh();
      await d.putContent("/present/file", Buffer.from("x"));
      await rejectsWith(d.getContent("/missing"), PathNotFoundError);
      await rejectsWith(d.getContent("/present/missing"), PathNotFoundError);
      await rejectsWith(d.stat("/missing"), PathNotFoundError);
      await rejectsWith(d.stat("/present/fil"), PathNotFoundError);
      await rejectsWith(d.reader("/missing"), PathNotFoundError);
      await rejectsWith(d.reader("/missing", 3, 2), PathNotFoundError);
      await rejectsWith(d.list("/missing"), PathNotFoundError);
      await rejectsWith(d.list("/present/missing"), PathNotFoundError);
      await rejectsWith(d.delete("/missing"), PathNotFoundError);
      await rejectsWith(d.delete("/present/fil"), PathNotFoundError);
      await rejectsWith(d.move("/missing", "/elsewhere"), PathNotFoundError);
      await rejectsWith(d.stat("/elsewhere"), PathNotFoundError);
      const err = await d.getContent("/present/missing").catch((e: unknown) => e);
      expect((err as PathNotFoundError).path).toBe("/present/missing");
    });

    it("putContent and getContent round-trip bytes; putContent replaces; empty objects exist", async () => {
      const d = await fresh();
      const path = "/docker/registry/v2/repositories/a/b/_manifests/tags/v1.0+x_y=z@1:2/current/link";
      await d.putContent(path, Buffer.from("sha256:0123"));
      expect((await d.getContent(path)).toString()).toBe("sha256:0123");
      await d.putContent(path, Buffer.from("sha256:4567-longer"));
      expect((await d.getContent(path)).toString()).toBe("sha256:4567-longer");
      await d.putContent(path, Buffer.from("s"));
      expect((await d.getContent(path)).toString()).toBe("s");
      const bin = randomBytes(300_000);
      await d.putContent("/bin", bin);
      expect(sha(await d.getContent("/bin"))).toBe(sha(bin));
      await d.putContent("/empty", new Uint8Array(0));
      expect((await d.getContent("/empty")).length).toBe(0);
      const st = await d.stat("/empty");
      expect(st).toMatchObject({ path: "/empty", size: 0, isDir: false });
    });

    it("putContent is atomic: a concurrent reader sees the old or the new bytes, never a mix", async () => {
      const d = await fresh();
      const a = Buffer.alloc(512 * 1024, "a");
      const b = Buffer.alloc(256 * 1024, "b");
      await d.putContent("/atomic", a);
      let writing = true;
      const writer = (async () => {
        try {
          for (let i = 0; i < 20; i++) await d.putContent("/atomic", i % 2 ? a : b);
        } finally {
          writing = false;
        }
      })();
      let reads = 0;
      while (writing || reads < 5) {
        const got = await d.getContent("/atomic");
        expect(got.equals(a) || got.equals(b), `read ${reads}: ${got.length} bytes, not one whole version`).toBe(true);
        reads++;
        if (reads > 500) break;
      }
      await writer;
      expect(reads).toBeGreaterThanOrEqual(5);
    });

    it("stat: files with size and modTime, directories as prefixes with children", async () => {
      const d = await fresh();
      const before = Date.now();
      await d.putContent("/s/dir/sub/file", Buffer.alloc(1234, 1));
      const f = await d.stat("/s/dir/sub/file");
      expect(f).toMatchObject({ path: "/s/dir/sub/file", size: 1234, isDir: false });
      // S3 keeps whole seconds: allow for the truncation and a little clock skew.
      expect(f.modTime.getTime()).toBeGreaterThanOrEqual(before - 5_000);
      expect(f.modTime.getTime()).toBeLessThanOrEqual(Date.now() + 5_000);
      for (const dir of ["/s", "/s/dir", "/s/dir/sub"]) {
        const st = await d.stat(dir);
        expect(st.isDir, dir).toBe(true);
        expect(st.path).toBe(dir);
        expect(st.size).toBe(0);
      }
      await rejectsWith(d.stat("/s/di"), PathNotFoundError);
    });

    it("reader: whole object, from an offset, a range, past the end, at the end", async () => {
      const d = await fresh();
      const data = pattern(100_000, 7);
      await d.putContent("/r/obj", data);
      expect((await readAll(await d.reader("/r/obj"))).equals(data)).toBe(true);
      expect((await readAll(await d.reader("/r/obj", 0))).equals(data)).toBe(true);
      expect((await readAll(await d.reader("/r/obj", 12_345))).equals(data.subarray(12_345))).toBe(true);
      expect((await readAll(await d.reader("/r/obj", 10, 20))).equals(data.subarray(10, 30))).toBe(true);
      expect((await readAll(await d.reader("/r/obj", 0, 1))).equals(data.subarray(0, 1))).toBe(true);
      expect((await readAll(await d.reader("/r/obj", 99_990, 1000))).equals(data.subarray(99_990))).toBe(true);
      expect((await readAll(await d.reader("/r/obj", 99_999))).equals(data.subarray(99_999))).toBe(true);
      expect((await readAll(await d.reader("/r/obj", 100_000))).length).toBe(0);
      expect((await readAll(await d.reader("/r/obj", 500, 0))).length).toBe(0);
    });

    it("list: the direct children of nested prefixes, PathNotFoundError for absent ones", async () => {
      const d = await fresh();
      await d.putContent("/l/a", Buffer.from("1"));
      await d.putContent("/l/b/c", Buffer.from("2"));
      await d.putContent("/l/b/e/f", Buffer.from("3"));
      await d.putContent("/l/b/e/g", Buffer.from("4"));
      await d.putContent("/l/bb", Buffer.from("5"));
      await d.putContent("/other", Buffer.from("6"));
      expect((await d.list("/")).sort()).toEqual(["/l", "/other"]);
      expect((await d.list("/l")).sort()).toEqual(["/l/a", "/l/b", "/l/bb"]);
      expect((await d.list("/l/b")).sort()).toEqual(["/l/b/c", "/l/b/e"]);
      expect((await d.list("/l/b/e")).sort()).toEqual(["/l/b/e/f", "/l/b/e/g"]);
      await rejectsWith(d.list("/l/x"), PathNotFoundError);
      await rejectsWith(d.list("/l/b/e/f/g"), PathNotFoundError);
    });

    it("list of a directory with many children returns all of them", async () => {
      const d = await fresh();
      const names = Array.from({ length: 23 }, (_, i) => `/many/k${String(i).padStart(2, "0")}`);
      await Promise.all(names.map((n) => d.putContent(n, Buffer.from(n))));
      await d.putContent("/many/sub/x", Buffer.from("x"));
      expect((await d.list("/many")).sort()).toEqual([...names, "/many/sub"].sort());
    });

    it("delete: an object, a whole directory recursively; siblings stay", async () => {
      const d = await fresh();
      await d.putContent("/d/keep", Buffer.from("k"));
      await d.putContent("/d/x/one", Buffer.from("1"));
      await d.putContent("/d/x/y/two", Buffer.from("2"));
      await d.putContent("/d/x/y/z/three", Buffer.from("3"));
      await d.putContent("/d/xx", Buffer.from("prefix sibling"));
      await d.delete("/d/x/one");
      await rejectsWith(d.getContent("/d/x/one"), PathNotFoundError);
      expect((await d.list("/d/x")).sort()).toEqual(["/d/x/y"]);
      await d.delete("/d/x");
      await rejectsWith(d.stat("/d/x"), PathNotFoundError);
      await rejectsWith(d.stat("/d/x/y/z/three"), PathNotFoundError);
      await rejectsWith(d.list("/d/x"), PathNotFoundError);
      expect((await d.list("/d")).sort()).toEqual(["/d/keep", "/d/xx"]);
      expect((await d.getContent("/d/xx")).toString()).toBe("prefix sibling");
      await rejectsWith(d.delete("/d/x"), PathNotFoundError);
    });

    it("move: the source goes, the destination has the bytes and is replaced when present", async () => {
      const d = await fresh();
      await d.putContent("/m/src", Buffer.from("source bytes"));
      await d.move("/m/src", "/m/new/deeper/dest");
      await rejectsWith(d.stat("/m/src"), PathNotFoundError);
      expect((await d.getContent("/m/new/deeper/dest")).toString()).toBe("source bytes");
      await d.putContent("/m/other", Buffer.from("other, longer bytes than the first"));
      await d.move("/m/other", "/m/new/deeper/dest");
      expect((await d.getContent("/m/new/deeper/dest")).toString()).toBe("other, longer bytes than the first");
      await rejectsWith(d.getContent("/m/other"), PathNotFoundError);
      const big = pattern(3 * MiB, 3);
      await d.putContent("/m/big", big);
      await d.move("/m/big", "/m/blobs/sha256:ab/data");
      expect(sha(await d.getContent("/m/blobs/sha256:ab/data"))).toBe(sha(big));
      await rejectsWith(d.move("/m/gone", "/m/new/deeper/dest"), PathNotFoundError);
      expect((await d.getContent("/m/new/deeper/dest")).toString()).toBe("other, longer bytes than the first");
    });

    it("writer: commit makes the object; size counts the bytes", async () => {
      const d = await fresh();
      const w = await d.writer("/w/_uploads/u1/data", false);
      expect(w.size).toBe(0);
      await w.write(Buffer.from("hello "));
      await w.write(Buffer.from("world"));
      expect(w.size).toBe(11);
      await w.commit();
      expect((await d.getContent("/w/_uploads/u1/data")).toString()).toBe("hello world");
      expect((await d.stat("/w/_uploads/u1/data")).size).toBe(11);
      await w.close(); // closing a committed writer is harmless
      expect((await d.getContent("/w/_uploads/u1/data")).toString()).toBe("hello world");
    });

    it("writer: size survives commit, small and multi-part objects alike", async () => {
      const d = await fresh();
      const small = await d.writer("/w/small", false);
      await small.write(Buffer.from("twelve bytes"));
      await small.commit();
      expect(small.size).toBe(12);
      const resumed = await d.writer("/w/resumed", false);
      await resumed.write(Buffer.from("abc"));
      await resumed.close();
      const again = await (await store!.reopen()).writer("/w/resumed", true);
      await again.write(Buffer.from("de"));
      await again.commit();
      expect(again.size).toBe(5);
      const big = await d.writer("/w/big", false);
      const data = pattern(11 * MiB + 3, 5);
      await writeIn(big, data, MiB);
      await big.commit();
      expect(big.size).toBe(data.length);
    });

    it("writer: version is kept while nobody writes, changes with every close that wrote, names the committed object", async () => {
      const d = await fresh();
      const path = "/v/_uploads/u/data";
      const w1 = await d.writer(path, false);
      await w1.close();
      const v1 = w1.version;
      expect(typeof v1).toBe("string");
      // Reopened without writing (here and in another process): the same version.
      const idle = await (await store!.reopen()).writer(path, true);
      expect(idle.version).toBe(v1);
      await idle.close();
      expect(idle.version).toBe(v1);
      const w2 = await d.writer(path, true);
      expect(w2.version).toBe(v1);
      await w2.write(Buffer.from("first"));
      await w2.close();
      const v2 = w2.version;
      expect(v2).not.toBe(v1);
      // Another writer (another process) writes: the version the first left is gone.
      const other = await (await store!.reopen()).writer(path, true);
      expect(other.version).toBe(v2);
      await other.write(Buffer.from("second"));
      await other.close();
      expect(other.version).not.toBe(v2);
      const w3 = await d.writer(path, true);
      expect(w3.version).toBe(other.version);
      expect(w3.version).not.toBe(v2);
      await w3.commit();
      // The committed object's version is what stat reports, also after a move.
      const info = await d.stat(path);
      expect(info.size).toBe(11);
      expect(info.version).toBeDefined();
      expect(info.version).toBe(w3.version);
      await d.move(path, "/v/_uploads/u/verify-1");
      expect((await d.stat("/v/_uploads/u/verify-1")).version).toBe(w3.version);
      // Another object with the same size has another version.
      const w4 = await d.writer("/v/other", false);
      await w4.write(Buffer.from("firstsecOND"));
      await w4.commit();
      expect((await d.stat("/v/other")).version).not.toBe(w3.version);
    });

    it("writer: an empty commit makes an empty object; commit replaces an existing object", async () => {
      const d = await fresh();
      const w = await d.writer("/w/empty", false);
      await w.commit();
      expect((await d.getContent("/w/empty")).length).toBe(0);
      await d.putContent("/w/replace", Buffer.from("old content that is longer"));
      const w2 = await d.writer("/w/replace", false);
      await w2.write(Buffer.from("new"));
      await w2.commit();
      expect((await d.getContent("/w/replace")).toString()).toBe("new");
    });

    it("writer: append across close and reopen (a restarted process), tail smaller than 5 MiB", async () => {
      const d = await fresh();
      const path = "/w/_uploads/u2/data";
      const a = pattern(100_000, 11);
      const b = pattern(200_001, 12);
      const c = pattern(3, 13);
      const w1 = await d.writer(path, false);
      await writeIn(w1, a);
      await w1.close();

      const d2 = await store!.reopen();
      const w2 = await d2.writer(path, true);
      expect(w2.size).toBe(a.length);
      await writeIn(w2, b, 7_000);
      expect(w2.size).toBe(a.length + b.length);
      await w2.close();

      const d3 = await store!.reopen();
      const w3 = await d3.writer(path, true);
      expect(w3.size).toBe(a.length + b.length);
      await w3.write(c);
      await w3.commit();
      const all = Buffer.concat([a, b, c]);
      expect(sha(await d.getContent(path))).toBe(sha(all));
      expect((await d.stat(path)).size).toBe(all.length);
    });

    it("writer: a ~12 MiB object in several parts across reopenings, read back by ranges", async () => {
      const d = await fresh();
      const path = "/w/_uploads/u3/data";
      const data = pattern(12 * MiB + 12_345, 21);
      const cut1 = 11 * MiB + 7; // past one 10 MiB chunk
      const cut2 = 11 * MiB + 7 + MiB + 1000; // a little more, below the next chunk
      const w1 = await d.writer(path, false);
      await writeIn(w1, data.subarray(0, cut1), 256 * 1024);
      expect(w1.size).toBe(cut1);
      await w1.close();

      const w2 = await (await store!.reopen()).writer(path, true);
      expect(w2.size).toBe(cut1);
      await writeIn(w2, data.subarray(cut1, cut2), 100_000);
      await w2.close();

      const w3 = await (await store!.reopen()).writer(path, true);
      expect(w3.size).toBe(cut2);
      await w3.write(data.subarray(cut2)); // one large write
      expect(w3.size).toBe(data.length);
      await w3.commit();

      expect((await d.stat(path)).size).toBe(data.length);
      expect(sha(await readAll(await d.reader(path)))).toBe(sha(data));
      const boundary = 10 * MiB;
      expect((await readAll(await d.reader(path, boundary - 100, 200))).equals(data.subarray(boundary - 100, boundary + 100))).toBe(true);
      expect((await readAll(await d.reader(path, cut1 - 5, 10))).equals(data.subarray(cut1 - 5, cut1 + 5))).toBe(true);
      expect((await readAll(await d.reader(path, data.length - 10))).equals(data.subarray(data.length - 10))).toBe(true);
    });

    it("writer: a 5 MiB or larger write closed and reopened (a full part at close)", async () => {
      const d = await fresh();
      const path = "/w/u4";
      const data = pattern(7 * MiB + 3, 31);
      const w1 = await d.writer(path, false);
      await writeIn(w1, data.subarray(0, 6 * MiB), MiB);
      await w1.close();
      const w2 = await (await store!.reopen()).writer(path, true);
      expect(w2.size).toBe(6 * MiB);
      await w2.close(); // reopened and closed with nothing written
      const w3 = await (await store!.reopen()).writer(path, true);
      expect(w3.size).toBe(6 * MiB);
      await writeIn(w3, data.subarray(6 * MiB));
      await w3.commit();
      expect(sha(await d.getContent(path))).toBe(sha(data));
    });

    it("writer: cancel removes everything written; a new writer starts over", async () => {
      const d = await fresh();
      const path = "/w/_uploads/u5/data";
      const w1 = await d.writer(path, false);
      await writeIn(w1, pattern(300_000, 41));
      await w1.close();
      const w2 = await (await store!.reopen()).writer(path, true);
      expect(w2.size).toBe(300_000);
      await w2.write(Buffer.from("more"));
      await w2.cancel();
      await rejectsWith(d.stat(path), PathNotFoundError);
      await rejectsWith(d.getContent(path), PathNotFoundError);

      const w3 = await d.writer(path, false);
      await w3.write(Buffer.from("first try"));
      await w3.close();
      const w4 = await d.writer(path, false); // not append: starts over
      expect(w4.size).toBe(0);
      await w4.write(Buffer.from("second"));
      await w4.commit();
      expect((await d.getContent(path)).toString()).toBe("second");
    });

    it("writer: a cancelled multi-part upload leaves no object", async () => {
      const d = await fresh();
      const path = "/w/u6";
      const w = await d.writer(path, false);
      await writeIn(w, pattern(11 * MiB, 51), MiB);
      await w.cancel();
      await rejectsWith(d.stat(path), PathNotFoundError);
    });

    it("writer: the object is complete at its path after commit, across close and reopen", async () => {
      const d = await fresh();
      const path = "/p/_uploads/u7/data";
      await d.putContent("/p/_uploads/u7/startedat", Buffer.from("2024-01-01T00:00:00Z"));
      const w = await d.writer(path, false);
      await w.write(Buffer.from("abc"));
      await w.close();
      const w2 = await (await store!.reopen()).writer(path, true);
      expect(w2.size).toBe(3);
      await w2.write(Buffer.from("def"));
      await w2.close();
      const w3 = await d.writer(path, true);
      await w3.commit();
      expect((await d.getContent(path)).toString()).toBe("abcdef");
      // Deleting the upload's directory removes everything, pending or not.
      const w4 = await d.writer("/p/_uploads/u7/other", false);
      await w4.write(Buffer.from("pending"));
      await w4.close();
      await d.delete("/p/_uploads/u7");
      await rejectsWith(d.stat("/p/_uploads/u7"), PathNotFoundError);
      await rejectsWith(d.stat("/p/_uploads/u7/data"), PathNotFoundError);
    });
  });
}
