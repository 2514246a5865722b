// Blob uploads (docs/registry.md, "Uploads"). An upload is a directory in storage,
// `_uploads/<id>/{startedat,data}`, exactly as distribution keeps it, so it survives a restart and
// can be continued by another instance on the same storage; nothing about it lives only in memory.
//
// Hashing: while an upload is written in one process, a running hash (the algorithm of the POST's
// `digest-algorithm`, sha256 by default) is kept in memory next to the byte offset it covers and the
// writer `version` its own last close() left (driver.ts), and the final PUT only finishes it. It is
// trusted only when the reopened writer still shows that version: nobody else (a restart, another
// instance on the same S3 bucket) has written the upload since. Otherwise, or when the PUT names
// another algorithm, the PUT re-reads the bytes and hashes them: correct always, fast in the common
// case, and no hash state is serialised. Bodies are streamed chunk by chunk into the driver's
// writer, never held whole in memory.
//
// The bytes that were hashed are the bytes that become the blob: where other processes share the
// storage (S3), `data` may be replaced by another instance at any time, so the PUT first moves it to
// a key of its own (`_uploads/<id>/verify-<random>`), checks that copy (its version is the one the
// writer committed, or its bytes hash to the digest) and moves that copy into blobs/. On a
// filesystem root, which one process owns, a trusted upload moves straight from `data`. An
// existing blob is replaced by the checked bytes (the same bytes, unless it was stored wrong).
import { createHash, randomUUID, type Hash } from "node:crypto";
import { PathNotFoundError, WriterConflictError, type FileWriter, type StorageDriver } from "../../adapters/blobstore/driver.ts";
import type { Blobs } from "./blobs.ts";
import { registryError } from "./errors.ts";
import { noJournal, type GcJournal } from "./gc-journal.ts";
import type { Links } from "../resources/registry-storage.ts";
import type { Digest, DigestAlgorithm } from "../resources/registry-names.ts";
import * as paths from "../resources/registry-paths.ts";
import type { WallClock } from "../http/clock.ts";

/** A `Content-Range: <start>-<end>` of a chunk (inclusive). */
export interface ChunkRange {
  start: number;
  end: number;
}

interface RunningHash {
  algorithm: DigestAlgorithm;
  hash: Hash;
  /** Bytes of the upload the hash covers. */
  offset: number;
  /**
   * The writer version of the upload state the hash covers: what this process's last close() left
   * (or the state the hash started on, at offset 0). undefined: never trusted.
   */
  version: string | undefined;
}

/** Running hashes kept at most; beyond it the oldest are dropped (and re-hashed at PUT if needed). */
const maxRunningHashes = 512;

export class Uploads {
  private readonly hashes = new Map<string, RunningHash>();
  /** One request at a time per upload in this process: a PATCH racing a PUT would interleave bytes. */
  private readonly busy = new Map<string, Promise<unknown>>();

  constructor(
    private readonly driver: StorageDriver,
    private readonly blobs: Blobs,
    private readonly links: Links,
    private readonly clock: WallClock,
    private readonly journal: GcJournal = noJournal,
  ) {}

  /** A new upload; its id. */
  async start(name: string, algorithm: DigestAlgorithm = "sha256"): Promise<string> {
    const id = randomUUID();
    // distribution's startedat: RFC 3339 seconds, UTC.
    const startedAt = new Date(this.clock.now()).toISOString().replace(/\.\d{3}Z$/, "Z");
    await this.driver.putContent(paths.uploadStartedAt(name, id), Buffer.from(startedAt));
    const writer = await this.driver.writer(paths.uploadData(name, id), false);
    await writer.close();
    this.remember(key(name, id), { algorithm, hash: createHash(algorithm), offset: 0, version: writer.version });
    return id;
  }

  /** Bytes received so far; BLOB_UPLOAD_UNKNOWN when there is no such upload. */
  size(name: string, id: string): Promise<number> {
    return this.exclusive(name, id, async () => {
      await this.mustExist(name, id);
      const writer = await this.resume(name, id);
      const size = writer.size;
      await writer.close();
      return size;
    });
  }

  /**
   * Append a chunk (a PATCH). With `range`, its start must be the current size (else 416
   * RANGE_INVALID, nothing written) and its length the body's. Resolves with the new size.
   */
  append(name: string, id: string, body: AsyncIterable<Uint8Array>, range?: ChunkRange): Promise<number> {
    return this.exclusive(name, id, async () => {
      await this.mustExist(name, id);
      const k = key(name, id);
      const writer = await this.resume(name, id);
      const opened = writer.version;
      let written: number;
      try {
        checkRange(name, id, range, writer.size);
        written = await this.copy(k, body, writer, opened);
      } catch (err) {
        await this.closeAfterError(k, writer);
        throw await this.conflictOr(err, name, id);
      }
      await this.closeWriter(k, name, id, writer);
      // What arrived is kept either way; the client learns the size from the error's Range.
      checkLength(name, id, range, written, writer.size);
      return writer.size;
    });
  }

  /**
   * Finish an upload (the closing PUT): append the final chunk if any, check the digest of all the
   * bytes, and make them the blob `digest` linked into `name`. On a digest mismatch the upload is
   * removed (nothing kept) and the error is 400 DIGEST_INVALID.
   */
  finish(name: string, id: string, digest: Digest, body: AsyncIterable<Uint8Array> | undefined, range?: ChunkRange): Promise<void> {
    return this.exclusive(name, id, async () => {
      await this.mustExist(name, id);
      const k = key(name, id);
      const data = paths.uploadData(name, id);
      const writer = await this.resume(name, id);
      const opened = writer.version;
      try {
        checkRange(name, id, range, writer.size);
        const written = body === undefined ? 0 : await this.copy(k, body, writer, opened);
        checkLength(name, id, range, written, writer.size);
        await writer.commit();
      } catch (err) {
        await this.closeAfterError(k, writer);
        throw await this.conflictOr(err, name, id);
      }
      const running = this.hashes.get(k);
      this.hashes.delete(k);
      // The running hash covers exactly the committed bytes, on top of a state this process left.
      const trusted =
        running !== undefined && running.algorithm === digest.algorithm && running.offset === writer.size && running.version !== undefined && running.version === opened;
      let actual = trusted ? running.hash.digest("hex") : undefined;
      let source = data;
      if (actual === undefined || !this.driver.singleProcess) {
        // Another process may replace `data` at any time (or, untrusted, did): the bytes checked and
        // the bytes stored are those of a copy nobody else writes.
        source = `${paths.uploadDir(name, id)}/verify-${randomUUID()}`;
        try {
          await this.driver.move(data, source);
        } catch (err) {
          if (err instanceof PathNotFoundError) throw registryError("BLOB_UPLOAD_UNKNOWN", { uuid: id }, "the upload was finished or cancelled by another request at the same time");
          throw err;
        }
        if (actual !== undefined) {
          // What this writer committed, or what another instance committed to `data` meanwhile?
          const info = await this.driver.stat(source);
          if (info.version === undefined || info.version !== writer.version || info.size !== writer.size) actual = undefined;
        }
        actual ??= await this.rehash(source, digest.algorithm);
      }
      if (actual !== digest.hex) {
        await this.remove(name, id);
        throw registryError("DIGEST_INVALID", { expected: digest.value, actual: `${digest.algorithm}:${actual}` }, `the uploaded content's digest is ${digest.algorithm}:${actual}, not ${digest.value}`);
      }
      // Always moved, also over an existing blob: content addressed, so the same bytes, unless the
      // stored ones are wrong. Touched first: a collector removing an older copy meanwhile sees it.
      await this.journal.touch([digest.value], name);
      await this.driver.move(source, paths.blobData(digest));
      await this.links.linkBlob(name, digest);
      await this.remove(name, id);
    });
  }

  /** Drop an upload and its bytes; BLOB_UPLOAD_UNKNOWN when there is none. */
  cancel(name: string, id: string): Promise<void> {
    return this.exclusive(name, id, async () => {
      await this.mustExist(name, id);
      const writer = await this.resume(name, id);
      await writer.cancel();
      await this.remove(name, id);
    });
  }

  /** Link a blob `from` serves into `name` (a cross-repository mount); false when `from` does not serve it. */
  async mount(name: string, from: string, d: Digest): Promise<boolean> {
    await this.journal.touch([d.value], name);
    if ((await this.blobs.statInRepository(from, d)) === undefined) return false;
    await this.links.linkBlob(name, d);
    return true;
  }

  // ----

  /**
   * Stream `body` into `writer`, feeding the running hash when it covers exactly what is stored:
   * its offset is the writer's size and its version the one the writer was opened on (`opened`).
   */
  private async copy(k: string, body: AsyncIterable<Uint8Array>, writer: FileWriter, opened: string | undefined): Promise<number> {
    let running = this.hashes.get(k);
    if (running !== undefined && (running.offset !== writer.size || running.version === undefined || running.version !== opened)) {
      this.hashes.delete(k);
      running = undefined;
    }
    if (running === undefined && writer.size === 0) {
      running = { algorithm: "sha256", hash: createHash("sha256"), offset: 0, version: opened };
      this.remember(k, running);
    }
    let written = 0;
    try {
      for await (const chunk of body) {
        if (chunk.byteLength === 0) continue;
        running?.hash.update(chunk);
        await writer.write(chunk);
        written += chunk.byteLength;
        if (running) running.offset += chunk.byteLength;
      }
    } catch (err) {
      // The hash may have seen bytes the file did not get: never trust it again.
      this.hashes.delete(k);
      throw err;
    }
    return written;
  }

  /** close() after a PATCH: the running hash now stands on the state this close left. */
  private async closeWriter(k: string, name: string, id: string, writer: FileWriter): Promise<void> {
    try {
      await writer.close();
    } catch (err) {
      this.hashes.delete(k);
      throw await this.conflictOr(err, name, id);
    }
    const running = this.hashes.get(k);
    if (running !== undefined) running.version = writer.version;
  }

  /** Keep what arrived after a failed request (the client continues from the Range); never throws. */
  private async closeAfterError(k: string, writer: FileWriter): Promise<void> {
    try {
      await writer.close();
    } catch {
      this.hashes.delete(k);
      return;
    }
    const running = this.hashes.get(k);
    if (running !== undefined) running.version = writer.version;
  }

  /**
   * Two requests wrote the upload at once (on two instances sharing the storage): this one lost
   * and nothing it wrote is part of the upload. 416 RANGE_INVALID with the upload's Range, so the
   * client can see where the upload stands.
   */
  private async conflictOr(err: unknown, name: string, id: string): Promise<unknown> {
    if (!(err instanceof WriterConflictError)) return err;
    this.hashes.delete(key(name, id));
    const headers: Record<string, string> = { location: uploadLocation(name, id), "docker-upload-uuid": id };
    try {
      const writer = await this.driver.writer(paths.uploadData(name, id), true);
      headers.range = rangeOf(writer.size);
      await writer.close();
    } catch {
      // Finished or cancelled by the other request: no Range to tell.
    }
    return registryError("RANGE_INVALID", { uuid: id, reason: "concurrent write" }, "the upload was written by another request at the same time; this request's bytes were not kept: GET the upload for its Range").withHeaders(headers);
  }

  /** The upload's writer, continuing where it stopped; BLOB_UPLOAD_UNKNOWN when the driver has no bytes pending for it. */
  private async resume(name: string, id: string): Promise<FileWriter> {
    try {
      return await this.driver.writer(paths.uploadData(name, id), true);
    } catch (err) {
      if (err instanceof PathNotFoundError) throw registryError("BLOB_UPLOAD_UNKNOWN", { uuid: id });
      throw err;
    }
  }

  private async rehash(path: string, algorithm: DigestAlgorithm): Promise<string> {
    const hash = createHash(algorithm);
    for await (const chunk of await this.driver.reader(path, 0)) hash.update(chunk as Buffer);
    return hash.digest("hex");
  }

  private async mustExist(name: string, id: string): Promise<void> {
    try {
      await this.driver.stat(paths.uploadStartedAt(name, id));
    } catch (err) {
      if (err instanceof PathNotFoundError) throw registryError("BLOB_UPLOAD_UNKNOWN", { uuid: id });
      throw err;
    }
  }

  private async remove(name: string, id: string): Promise<void> {
    this.hashes.delete(key(name, id));
    try {
      await this.driver.delete(paths.uploadDir(name, id));
    } catch (err) {
      if (!(err instanceof PathNotFoundError)) throw err;
    }
  }

  private remember(k: string, running: RunningHash): void {
    this.hashes.delete(k);
    this.hashes.set(k, running);
    if (this.hashes.size > maxRunningHashes) {
      const oldest = this.hashes.keys().next().value;
      if (oldest !== undefined) this.hashes.delete(oldest);
    }
  }

  private async exclusive<T>(name: string, id: string, fn: () => Promise<T>): Promise<T> {
    const k = key(name, id);
    const before = this.busy.get(k) ?? Promise.resolve();
    const run = before.then(fn, fn);
    const settled = run.then(
      () => {},
      () => {},
    );
    this.busy.set(k, settled);
    try {
      return await run;
    } finally {
      if (this.busy.get(k) === settled) this.busy.delete(k);
    }
  }
}

function key(name: string, id: string): string {
  return `${name}@${id}`;
}

function rangeHeaders(name: string, id: string, size: number): Record<string, string> {
  return { location: uploadLocation(name, id), range: rangeOf(size), "docker-upload-uuid": id };
}

function checkRange(name: string, id: string, range: ChunkRange | undefined, size: number): void {
  if (range !== undefined && range.start !== size) {
    throw registryError("RANGE_INVALID", { size, contentRange: `${range.start}-${range.end}` }, `the chunk starts at ${range.start}, the upload has ${size} bytes; GET the upload for its Range`).withHeaders(
      rangeHeaders(name, id, size),
    );
  }
}

function checkLength(name: string, id: string, range: ChunkRange | undefined, written: number, size: number): void {
  if (range !== undefined && range.end - range.start + 1 !== written) {
    throw registryError("SIZE_INVALID", { contentRange: `${range.start}-${range.end}`, received: written }, `Content-Range covers ${range.end - range.start + 1} bytes, the body had ${written}`).withHeaders(
      rangeHeaders(name, id, size),
    );
  }
}

/** Where the client continues an upload (relative, RFC 9110 10.2.2). */
export function uploadLocation(name: string, id: string): string {
  return `/v2/${name}/blobs/uploads/${id}`;
}

/** distribution's `Range` of an upload: `0-<last byte>`, and `0-0` when it is empty. */
export function rangeOf(size: number): string {
  return `0-${Math.max(0, size - 1)}`;
}
