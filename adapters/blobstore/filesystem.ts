// The filesystem StorageDriver: distribution's `filesystem` driver semantics over a root
// directory (docs/registry.md, "Filesystem storage"). The object at `/a/b` is the file
// `<root>/a/b`; directories are implicit (created on write, left behind empty on delete, as
// distribution leaves them).
//
// Why these choices:
// - putContent writes a temporary file next to the target, fsyncs it and renames it over the target,
//   so a reader (or a crash) sees the old or the new bytes, never a half-written link file; then it
//   fsyncs the directory, so the rename itself survives a crash (move does the same).
// - writer() appends to the file at its path directly, as distribution's driver does (driver.ts's
//   FileWriter allows it): an upload's `data` grows with every PATCH, survives a restart
//   (writer(path, true) in any process continues it) and its size is the file's size, so an upload
//   distribution left in progress is continued too. close() and commit() fsync; cancel() removes
//   the file. A writer's version is the file's inode, size and mtime (one process owns a root, so
//   that is enough to tell that the file is as this process left it).
// - list() leaves out the temporary files of putContent calls in flight.
import { randomUUID } from "node:crypto";
import { constants, createReadStream, type BigIntStats } from "node:fs";
import { mkdir, open, readdir, rename, rm, rmdir, stat, unlink, type FileHandle } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { checkPath, PathNotFoundError, type FileInfo, type FileWriter, type StorageDriver } from "./driver.ts";

/** putContent's temporary files; list() never shows them. */
const tempPrefix = ".capstan-tmp-";

export interface FilesystemDriverOptions {
  /** The root directory (distribution's `storage.filesystem.rootdirectory`); created on first write. */
  rootDirectory: string;
}

/** getContent's first read; a larger object takes a second one. */
const smallReadBytes = 16 * 1024;

export class FilesystemDriver implements StorageDriver {
  readonly name = "filesystem";
  /** One registry per root directory (root-lock.ts). */
  readonly singleProcess = true;
  private readonly root: string;

  constructor(opts: FilesystemDriverOptions) {
    this.root = resolve(opts.rootDirectory);
  }

  async getContent(path: string): Promise<Buffer> {
    // Most objects read whole are small (links, manifests): one read into a buffer, without the
    // fstat readFile makes first; garbage collection's mark reads thousands of them.
    let handle: FileHandle | undefined;
    try {
      handle = await open(this.full(path), "r");
      const first = Buffer.allocUnsafe(smallReadBytes);
      const { bytesRead } = await handle.read(first, 0, smallReadBytes, null); // from the current position, which it advances
      if (bytesRead < smallReadBytes) return first.subarray(0, bytesRead);
      const rest = await handle.readFile();
      return Buffer.concat([first, rest]);
    } catch (err) {
      throw notFoundOr(err, path);
    } finally {
      await handle?.close();
    }
  }

  async putContent(path: string, content: Uint8Array): Promise<void> {
    const target = this.full(path);
    await mkdir(dirname(target), { recursive: true });
    const temp = join(dirname(target), `${tempPrefix}${randomUUID()}`);
    const handle = await open(temp, "w", 0o644);
    try {
      await writeAll(handle, content);
      await handle.sync();
    } catch (err) {
      await handle.close().catch(() => {});
      await unlink(temp).catch(() => {});
      throw err;
    }
    await handle.close();
    try {
      await rename(temp, target);
    } catch (err) {
      await unlink(temp).catch(() => {});
      throw err;
    }
    await syncDirectory(dirname(target));
  }

  async reader(path: string, offset = 0, length?: number): Promise<Readable> {
    const full = this.full(path);
    let handle: FileHandle;
    try {
      handle = await open(full, constants.O_RDONLY);
    } catch (err) {
      throw notFoundOr(err, path);
    }
    const info = await handle.stat();
    if (info.isDirectory()) {
      await handle.close();
      throw new PathNotFoundError(path);
    }
    const end = length === undefined ? info.size : Math.min(info.size, offset + length);
    if (offset >= end) {
      // Past the end (or nothing asked for): an empty stream, as distribution's reader gives.
      await handle.close();
      return Readable.from([]);
    }
    // The stream owns the handle from here and closes it when it ends or is destroyed.
    // 1 MiB reads: a 200 MB layer in 200 reads instead of 3,200 (a pull spent most of its CPU on them).
    return createReadStream(full, { fd: handle, start: offset, end: end - 1, autoClose: true, highWaterMark: 1 << 20 });
  }

  async writer(path: string, append: boolean): Promise<FileWriter> {
    const full = this.full(path);
    await mkdir(dirname(full), { recursive: true });
    const handle = await open(full, append ? "a" : "w", 0o644);
    let info: BigIntStats;
    try {
      info = await handle.stat({ bigint: true });
    } catch (err) {
      await handle.close().catch(() => {});
      throw err;
    }
    return new FilesystemWriter(full, handle, Number(info.size), versionOf(info));
  }

  async stat(path: string): Promise<FileInfo> {
    try {
      const info = await stat(this.full(path), { bigint: true });
      const isDir = info.isDirectory();
      return isDir ? { path, size: 0, modTime: info.mtime, isDir } : { path, size: Number(info.size), modTime: info.mtime, isDir, version: versionOf(info) };
    } catch (err) {
      throw notFoundOr(err, path);
    }
  }

  async list(path: string): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.full(path));
    } catch (err) {
      throw notFoundOr(err, path);
    }
    const prefix = path === "/" ? "/" : `${path}/`;
    return names.filter((n) => !n.startsWith(tempPrefix)).map((n) => prefix + n);
  }

  async move(source: string, dest: string): Promise<void> {
    const from = this.full(source);
    const to = this.full(dest);
    try {
      await stat(from);
    } catch (err) {
      throw notFoundOr(err, source);
    }
    await mkdir(dirname(to), { recursive: true });
    try {
      await rename(from, to);
    } catch (err) {
      // Moved or deleted by another request since the stat (garbage collection's quarantine).
      throw notFoundOr(err, source);
    }
    await syncDirectory(dirname(to));
  }

  async delete(path: string): Promise<void> {
    const full = this.full(path);
    try {
      await stat(full);
    } catch (err) {
      throw notFoundOr(err, path);
    }
    await rm(full, { recursive: true, force: true });
  }

  /** Also removes each file's directory when that leaves it empty (S3 has no directories to leave behind). */
  async deleteMany(paths: readonly string[]): Promise<void> {
    const files = paths.map((p) => this.full(p));
    const one = async (f: string) => {
      await rm(f, { force: true });
      try {
        await rmdir(dirname(f));
      } catch {
        // not empty, or gone already: nothing to tidy
      }
    };
    for (let i = 0; i < files.length; i += 16) await Promise.all(files.slice(i, i + 16).map(one));
  }

  async close(): Promise<void> {
    // Nothing is held between calls: every handle belongs to one reader or writer.
  }

  private full(path: string): string {
    checkPath(path);
    return path === "/" ? this.root : join(this.root, ...path.slice(1).split("/"));
  }
}

class FilesystemWriter implements FileWriter {
  private done: "open" | "closed" | "committed" | "cancelled" = "open";

  constructor(
    private readonly file: string,
    private readonly handle: FileHandle,
    private written: number,
    private current: string,
  ) {}

  get size(): number {
    return this.written;
  }

  get version(): string {
    return this.current;
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.check("write");
    await writeAll(this.handle, chunk);
    this.written += chunk.byteLength;
  }

  async close(): Promise<void> {
    if (this.done !== "open") return;
    this.done = "closed";
    await this.syncAndClose();
  }

  async commit(): Promise<void> {
    this.check("commit");
    this.done = "committed";
    await this.syncAndClose();
  }

  private async syncAndClose(): Promise<void> {
    try {
      await this.handle.sync();
      this.current = versionOf(await this.handle.stat({ bigint: true }));
    } finally {
      await this.handle.close();
    }
  }

  async cancel(): Promise<void> {
    if (this.done === "open") await this.handle.close().catch(() => {});
    this.done = "cancelled";
    await unlink(this.file).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
  }

  private check(what: string): void {
    if (this.done !== "open") throw new Error(`${what} on a ${this.done} writer of ${this.file}`);
  }
}

/** A file's version: inode, size and mtime (ns); any append or rewrite changes it. */
function versionOf(info: BigIntStats): string {
  return `${info.ino}:${info.size}:${info.mtimeNs}`;
}

/**
 * fsync a directory, so that a rename into it survives a crash. A filesystem that cannot sync
 * directories (EINVAL, ENOTSUP) is left to its own guarantees.
 */
async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle;
  try {
    handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (err) {
    if (unsyncable(err)) return;
    throw err;
  }
  try {
    await handle.sync();
  } catch (err) {
    if (!unsyncable(err)) throw err;
  } finally {
    await handle.close();
  }
}

function unsyncable(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "EINVAL" || code === "ENOTSUP" || code === "EOPNOTSUPP";
}

async function writeAll(handle: FileHandle, chunk: Uint8Array): Promise<void> {
  let at = 0;
  while (at < chunk.byteLength) {
    const { bytesWritten } = await handle.write(chunk, at, chunk.byteLength - at);
    at += bytesWritten;
  }
}

/** ENOENT (nothing there), ENOTDIR (a file where a directory would be) and EISDIR (a directory where an object is asked for) are "not found". */
function notFoundOr(err: unknown, path: string): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR" ? new PathNotFoundError(path) : err;
}
