// The registry's storage, as distribution's storage drivers see it: a tree of named byte objects
// ("paths" like /docker/registry/v2/blobs/sha256/ab/ab12.../data) on a filesystem or in an S3
// bucket. The registry (api/registry/) lays its data out on top of this in distribution's on-disk
// layout (docs/registry.md); the drivers know nothing of images.
//
// Paths are absolute, "/"-separated, without "." or ".." segments or a trailing "/"; a driver maps
// them below its root directory (filesystem rootdirectory, or the S3 bucket's rootdirectory prefix).
// Every call has a timeout inside the driver (S3) or is local (filesystem).
import type { Readable } from "node:stream";

export interface FileInfo {
  path: string;
  /** Bytes; 0 for a directory. */
  size: number;
  modTime: Date;
  isDir: boolean;
  /**
   * What identifies the object's bytes as stored, when the driver knows (not for directories):
   * equal versions of one path mean the same bytes, also after a move (filesystem: inode, size and
   * mtime; S3: the commit tag a writer gave the object, else its ETag). Compared with a committed
   * writer's `version`.
   */
  version?: string;
}

/**
 * Appends bytes to one object; the object is complete at its path once commit() returns. Before
 * that a driver may show it growing (the filesystem driver writes in place, as distribution's does;
 * S3 shows nothing until the multipart upload completes), so callers write to a path nobody reads
 * as final: an upload's `_uploads/<id>/data`.
 */
export interface FileWriter {
  /** Bytes written so far (before this writer was opened, when appending, included); after commit, the object's size. */
  readonly size: number;
  /**
   * Who last changed the pending object, as far as this writer knows: when opened, a token of the
   * durable state it continues; after close(), the token of the state it made durable (unchanged
   * when it wrote nothing); after commit(), the committed object's FileInfo.version. A new token is
   * made on every change by any writer in any process, so a caller that remembers the token its
   * own close() left and finds it again when it reopens the writer knows that nobody else has
   * written since (S3: a random nonce in the upload state; filesystem: inode, size and mtime).
   * undefined when the driver cannot tell.
   */
  readonly version: string | undefined;
  write(chunk: Uint8Array): Promise<void>;
  /**
   * Make what was written durable and resumable (an append-writer opened later continues here).
   * WriterConflictError (nothing of this writer's is made durable) when another writer changed the
   * pending object since this one was opened.
   */
  close(): Promise<void>;
  /**
   * Make the object final at its path; after commit no more writes. WriterConflictError when
   * another writer changed the pending object since this one was opened.
   */
  commit(): Promise<void>;
  /** Drop everything written; the path does not exist afterwards. */
  cancel(): Promise<void>;
}

export interface StorageDriver {
  /** "filesystem" or "s3". */
  readonly name: string;
  /**
   * True when one process owns the store (the filesystem driver: one registry per root directory,
   * root-lock.ts), so an object stays as this process left it until this process changes it.
   * False when other processes may change any object at any time (S3: several instances on one
   * bucket).
   */
  readonly singleProcess: boolean;
  /** The whole object; PathNotFoundError when there is none. */
  getContent(path: string): Promise<Buffer>;
  /** Replace the object with `content` atomically (readers see the old or the new bytes). */
  putContent(path: string, content: Uint8Array): Promise<void>;
  /** A stream of the object from `offset`, `length` bytes (to the end when omitted). */
  reader(path: string, offset?: number, length?: number): Promise<Readable>;
  /** A writer to `path`; with append, one that continues an uncommitted writer closed earlier. */
  writer(path: string, append: boolean): Promise<FileWriter>;
  /** PathNotFoundError when neither an object nor a directory (a prefix) is there. */
  stat(path: string): Promise<FileInfo>;
  /** The full paths of the direct children of a directory; PathNotFoundError when it is absent. */
  list(path: string): Promise<string[]>;
  /** Move an object (server side where the backend can); replaces `dest`. */
  move(source: string, dest: string): Promise<void>;
  /** Delete an object or a whole directory; PathNotFoundError when nothing is there. */
  delete(path: string): Promise<void>;
  /**
   * Delete many objects (not directories) at once; an absent one is no error. S3: DeleteObjects
   * batches of up to 1,000 keys; filesystem: one unlink each, a few at a time.
   */
  deleteMany(paths: readonly string[]): Promise<void>;
  /** Release connections and handles. */
  close(): Promise<void>;
}

export class PathNotFoundError extends Error {
  override readonly name = "PathNotFoundError";
  constructor(readonly path: string) {
    super(`path not found: ${path}`);
  }
}

/**
 * A writer found that another writer (another request, process or registry instance) changed the
 * pending object since it was opened: two writers on one path at once. What this writer wrote since
 * its last close is not part of the object; the other writer's state stands.
 */
export class WriterConflictError extends Error {
  override readonly name = "WriterConflictError";
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`another writer changed ${path} at the same time: ${detail}`);
  }
}

/** A path given to a driver that is not absolute and clean. */
export class InvalidPathError extends Error {
  override readonly name = "InvalidPathError";
  constructor(readonly path: string) {
    super(`invalid storage path: ${JSON.stringify(path)}`);
  }
}

const segment = /^[A-Za-z0-9._:@+=-]+$/;

/** Throws InvalidPathError unless `path` is "/" or "/a/b" with clean segments. */
export function checkPath(path: string): string {
  if (path === "/") return path;
  if (!path.startsWith("/") || path.endsWith("/")) throw new InvalidPathError(path);
  for (const s of path.slice(1).split("/")) if (s === "" || s === "." || s === ".." || !segment.test(s)) throw new InvalidPathError(path);
  return path;
}
