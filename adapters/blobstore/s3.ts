// The registry's storage in an S3 bucket (AWS S3 or an S3-compatible store such as s3rver), with
// distribution's key layout: the driver path /x is the key `<rootdirectory without leading "/">/x`,
// so the registry's data lands under `<root>/docker/registry/v2/...` exactly as distribution's s3-aws
// driver puts it. Directories are key prefixes.
//
// The writer (blob uploads, up to GBs) keeps its own upload state so it needs none of
// ListMultipartUploads, ListParts or UploadPartCopy (which s3rver lacks and distribution 2.8 needs):
//   <key>~s3upload        JSON {v, uploadId, tag, parts: [{n, etag, size}], size, tail, nonce}:
//                         written when the writer is opened, on its first write, when its multipart
//                         upload is created and on every close(); the resume point for append-writers
//   <key>~s3tail.0 / .1   bytes written after the last part, when fewer than the 5 MiB minimum part
//                         size at close(); two slots written alternately so a crash between writing
//                         the tail and the state never destroys the tail the state refers to
// Writes are buffered up to chunkSize and uploaded as one part each (memory is bounded by about
// twice chunkSize plus one write); commit() uploads the buffer as the last part and completes the
// multipart upload, or does a plain PutObject when no part was uploaded. "~" is not a character of
// driver paths (checkPath), so the helper keys can never be an object's key: list() hides them and
// no path reaches them.
//
// Several registry instances share a bucket, and S3 (s3rver too) has no conditional PutObject, so
// the state is last-writer-wins. Every save writes a new random `nonce`; a writer remembers the
// nonce it read or wrote last (its `version`) and, before it saves the state, uploads a part or
// commits, reads the state again and stops with WriterConflictError when the nonce is another's.
// Its first write saves the state (a claim), so a second writer opened on the same state fails
// before it uploads anything. The committed object carries `x-amz-meta-capstan-commit: <tag>`
// (a fresh tag for a PutObject, the multipart upload's tag otherwise), which HeadObject reports as
// the object's version and which survives CopyObject: a caller can tell its committed object from
// one another instance committed to the same key. See docs/registry.md, "S3 storage".
//
// Not covered: objects above 5 GiB cannot be moved (CopyObject's limit; distribution switches to
// multipart copy there, which needs UploadPartCopy); signature v2 (v4auth: false) is refused;
// an object is at most 10 000 parts (100 000 MiB with the default 10 MiB chunk size).
import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { checkPath, InvalidPathError, PathNotFoundError, WriterConflictError, type FileInfo, type FileWriter, type StorageDriver } from "./driver.ts";

const MiB = 1024 * 1024;
/** S3's minimum size of every part but the last, and distribution's minimum chunksize. */
export const MIN_CHUNK_SIZE = 5 * MiB;
export const DEFAULT_CHUNK_SIZE = 10 * MiB;
/** S3's maximum part size (and distribution's maximum chunksize). */
export const MAX_CHUNK_SIZE = 5 * 1024 * MiB;
/** CopyObject's limit: larger objects need a multipart copy, which this driver does not do. */
export const MAX_COPY_SIZE = 5 * 1024 * MiB;
const MAX_PARTS = 10_000;
const DELETE_BATCH = 1000;

const STATE_SUFFIX = "~s3upload";
const TAIL_SUFFIX = "~s3tail.";
const hiddenName = /~s3(upload|tail\.[01])$/;
/** User metadata naming the writer's commit (lower case, as the SDK reports metadata keys). */
const COMMIT_META = "capstan-commit";

export interface S3DriverOptions {
  /** Static credentials; both or neither (neither: the SDK's default chain, e.g. an instance role). */
  accessKey?: string;
  secretKey?: string;
  /** Required unless regionEndpoint is set (then "us-east-1" when omitted, as distribution 2.8 skips the check). */
  region?: string;
  /** An S3-compatible endpoint URL; when set, path-style addressing is forced (distribution 2.8 does the same). */
  regionEndpoint?: string;
  bucket: string;
  /** HTTPS (default true); used for the AWS endpoint and for a regionEndpoint given without a scheme. */
  secure?: boolean;
  /** Signature v4 (default true). false (v2) is not supported by the AWS SDK v3 and is refused. */
  v4auth?: boolean;
  /** Part size of the writer in bytes: at least 5 MiB (default 10 MiB), at most 5 GiB. */
  chunkSize?: number;
  /** Key prefix of everything the driver stores, e.g. "/registry" (default: the bucket's root). */
  rootDirectory?: string;
  /** Time limit of one metadata call, retries included (default 30 s); transfers get 1 ms more per KiB. */
  timeoutMs?: number;
  /** TCP connect limit (default 10 s). */
  connectTimeoutMs?: number;
  /** A socket idle this long fails its request, and a reader stream nobody reads from (default 120 s). */
  idleTimeoutMs?: number;
  /** ListObjectsV2 page size (default 1000, S3's maximum); smaller only to exercise paging in tests. */
  listPageSize?: number;
}

/** An S3 call that failed: names the operation and the key (never the credentials). */
export class S3DriverError extends Error {
  override readonly name = "S3DriverError";
  constructor(
    readonly operation: string,
    readonly key: string,
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`s3 ${operation} ${JSON.stringify(key)}: ${code}: ${message}`, options);
  }
}

interface PartRecord {
  n: number;
  etag: string;
  size: number;
}

interface UploadState {
  v: 1;
  /** The multipart upload, created with the first part (a small object is one PutObject). */
  uploadId: string | null;
  /** The multipart upload's commit tag (its x-amz-meta-capstan-commit); null without an upload. */
  tag: string | null;
  parts: PartRecord[];
  /** Total bytes: the parts plus the tail. */
  size: number;
  tail: { slot: 0 | 1; size: number; etag: string } | null;
  /** Random, new on every save: tells a writer whether the state is still the one it read or wrote. */
  nonce: string;
}

function newNonce(): string {
  return randomBytes(12).toString("hex");
}

function errorCode(err: unknown): string {
  const e = err as { name?: string; Code?: string; code?: string } | null;
  return e?.Code ?? e?.name ?? e?.code ?? "Error";
}

function httpStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
}

function isNoSuchKey(err: unknown): boolean {
  const code = errorCode(err);
  return code === "NoSuchKey" || code === "NotFound" || (code !== "NoSuchBucket" && httpStatus(err) === 404);
}

/** A time limit that can be moved once the size of a transfer is known. */
class Deadline {
  readonly controller = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  timedOut = false;
  constructor(ms: number) {
    this.set(ms);
  }
  set(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new Error(`timed out after ${ms} ms`));
    }, ms);
    this.#timer.unref();
  }
  clear(): void {
    clearTimeout(this.#timer);
  }
  get signal(): AbortSignal {
    return this.controller.signal;
  }
}

function parseBool(v: unknown, name: string): boolean | undefined {
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v === "boolean") return v;
  if (v === "true") return true;
  if (v === "false") return false;
  throw new Error(`storage.s3.${name}: not a boolean: ${JSON.stringify(v)}`);
}

function parseStr(v: unknown, name: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === "string") return v;
  if (typeof v === "number") return String(v);
  throw new Error(`storage.s3.${name}: not a string`);
}

export class S3Driver implements StorageDriver {
  readonly name = "s3";
  /** Several instances may share the bucket. */
  readonly singleProcess = false;
  readonly bucket: string;
  readonly chunkSize: number;
  /** The key prefix: rootdirectory without leading or trailing "/" ("" for the bucket root). */
  readonly root: string;
  readonly #client: S3Client;
  readonly #timeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #pageSize: number;

  /** From the `storage.s3` map of config.yaml (lower-case keys, values as YAML gives them). */
  static fromConfig(params: Record<string, unknown>): S3Driver {
    const chunk = params.chunksize;
    const chunkSize = chunk === undefined || chunk === null || chunk === "" ? undefined : Number(chunk);
    if (chunkSize !== undefined && !Number.isInteger(chunkSize)) throw new Error(`storage.s3.chunksize: not an integer: ${JSON.stringify(chunk)}`);
    return new S3Driver({
      accessKey: parseStr(params.accesskey, "accesskey"),
      secretKey: parseStr(params.secretkey, "secretkey"),
      region: parseStr(params.region, "region"),
      regionEndpoint: parseStr(params.regionendpoint, "regionendpoint"),
      bucket: parseStr(params.bucket, "bucket") ?? "",
      secure: parseBool(params.secure, "secure"),
      v4auth: parseBool(params.v4auth, "v4auth"),
      chunkSize,
      rootDirectory: parseStr(params.rootdirectory, "rootdirectory"),
    });
  }

  constructor(options: S3DriverOptions) {
    if (!options.bucket) throw new Error("s3 storage: bucket is required");
    if (options.v4auth === false) throw new Error("s3 storage: v4auth false (signature v2) is not supported; use v4auth true");
    if (!!options.accessKey !== !!options.secretKey) throw new Error("s3 storage: give both accesskey and secretkey, or neither");
    const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
    if (!Number.isInteger(chunkSize) || chunkSize < MIN_CHUNK_SIZE || chunkSize > MAX_CHUNK_SIZE) {
      throw new Error(`s3 storage: chunksize must be an integer from ${MIN_CHUNK_SIZE} (5 MiB) to ${MAX_CHUNK_SIZE} (5 GiB), got ${chunkSize}`);
    }
    const secure = options.secure ?? true;
    let endpoint = options.regionEndpoint || undefined;
    if (endpoint && !/^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint)) endpoint = `${secure ? "https" : "http"}://${endpoint}`;
    const region = options.region || (endpoint ? "us-east-1" : undefined);
    if (!region) throw new Error("s3 storage: region is required (or a regionendpoint)");

    this.bucket = options.bucket;
    this.chunkSize = chunkSize;
    this.root = (options.rootDirectory ?? "").replace(/^\/+|\/+$/g, "");
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? 120_000;
    this.#pageSize = Math.min(Math.max(options.listPageSize ?? 1000, 1), 1000);

    const config: S3ClientConfig = {
      region,
      endpoint,
      // distribution 2.8: a regionendpoint means path-style requests (bucket in the path, not the host).
      forcePathStyle: !!endpoint,
      tls: secure,
      maxAttempts: 3,
      requestHandler: { connectionTimeout: options.connectTimeoutMs ?? 10_000, socketTimeout: this.#idleTimeoutMs },
    };
    if (options.accessKey && options.secretKey) {
      config.credentials = { accessKeyId: options.accessKey, secretAccessKey: options.secretKey };
    }
    if (endpoint) {
      // S3-compatible stores: the SDK's default checksums stream as aws-chunked bodies that some
      // (s3rver) store verbatim, corrupting the object.
      config.requestChecksumCalculation = "WHEN_REQUIRED";
      config.responseChecksumValidation = "WHEN_REQUIRED";
    }
    this.#client = new S3Client(config);
  }

  // --- paths and keys ------------------------------------------------------------------------------

  /** checkPath: a clean path never names a helper key ("~" is not allowed). */
  #check(path: string): string {
    return checkPath(path);
  }

  /** distribution's s3Path: the root, then the path, without a leading "/". */
  key(path: string): string {
    if (path === "/") return this.root;
    return this.root ? `${this.root}${path}` : path.slice(1);
  }

  #dirPrefix(path: string): string {
    const k = this.key(path);
    return k === "" ? "" : `${k}/`;
  }

  #pathOf(key: string): string {
    const rest = this.root ? key.slice(this.root.length) : `/${key}`;
    return rest === "" ? "/" : rest;
  }

  // --- calls -----------------------------------------------------------------------------------------

  /** Transfer time limit: the metadata limit plus 1 ms per KiB (1 MiB/s at worst). */
  #transferMs(bytes: number): number {
    return this.#timeoutMs + Math.ceil(bytes / 1024);
  }

  #wrap(op: string, key: string, err: unknown, deadline?: Deadline): Error {
    if (err instanceof S3DriverError || err instanceof PathNotFoundError) return err;
    if (deadline?.timedOut) return new S3DriverError(op, key, "Timeout", String((deadline.signal.reason as Error)?.message ?? "timed out"), { cause: err });
    const message = (err as Error)?.message || String(err);
    return new S3DriverError(op, key, errorCode(err), message, { cause: err });
  }

  /**
   * One S3 call under a deadline. `notFound` gives the path to report as PathNotFoundError when S3
   * says there is no such key.
   */
  async #call<T>(op: string, key: string, ms: number, fn: (signal: AbortSignal, deadline: Deadline) => Promise<T>, notFound?: string): Promise<T> {
    const deadline = new Deadline(ms);
    try {
      return await fn(deadline.signal, deadline);
    } catch (err) {
      if (notFound !== undefined && !deadline.timedOut && isNoSuchKey(err)) throw new PathNotFoundError(notFound);
      throw this.#wrap(op, key, err, deadline);
    } finally {
      deadline.clear();
    }
  }

  async #getBytes(op: string, key: string, notFound?: string): Promise<{ bytes: Buffer; etag: string }> {
    return this.#call(
      op,
      key,
      this.#timeoutMs,
      async (signal, deadline) => {
        const out = await this.#client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal: signal });
        deadline.set(this.#transferMs(out.ContentLength ?? 0));
        const bytes = Buffer.from(await out.Body!.transformToByteArray());
        return { bytes, etag: out.ETag ?? "" };
      },
      notFound,
    );
  }

  async #put(op: string, key: string, body: Uint8Array, metadata?: Record<string, string>): Promise<string> {
    return this.#call(op, key, this.#transferMs(body.length), async (signal) => {
      const out = await this.#client.send(
        new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentLength: body.length, Metadata: metadata }),
        { abortSignal: signal },
      );
      return out.ETag ?? "";
    });
  }

  async #head(key: string, path: string): Promise<{ size: number; modTime: Date; version: string } | null> {
    try {
      const out = await this.#call("HeadObject", key, this.#timeoutMs, (signal) =>
        this.#client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal: signal }), path);
      // The writer's commit tag when a writer made the object (CopyObject keeps it), else the ETag.
      const tag = out.Metadata?.[COMMIT_META];
      const version = tag ? tag : `etag:${out.ETag ?? ""}`;
      return { size: out.ContentLength ?? 0, modTime: out.LastModified ?? new Date(0), version };
    } catch (err) {
      if (err instanceof PathNotFoundError) return null;
      throw err;
    }
  }

  async #listPage(prefix: string, delimiter: string | undefined, token: string | undefined, maxKeys = this.#pageSize) {
    return this.#call("ListObjectsV2", prefix, this.#timeoutMs, (signal) =>
      this.#client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, Delimiter: delimiter, ContinuationToken: token, MaxKeys: maxKeys }),
        { abortSignal: signal },
      ));
  }

  /** DeleteObjects of up to 1000 keys; fails when S3 reports any key it could not delete. */
  async #deleteKeys(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      const batch = keys.slice(i, i + DELETE_BATCH);
      const out = await this.#call("DeleteObjects", batch[0]!, this.#timeoutMs, (signal) =>
        this.#client.send(
          new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }),
          { abortSignal: signal },
        ));
      const failed = out.Errors ?? [];
      if (failed.length > 0) {
        const f = failed[0]!;
        throw new S3DriverError("DeleteObjects", f.Key ?? batch[0]!, f.Code ?? "Error", `${f.Message ?? "not deleted"} (${failed.length} of ${batch.length} keys failed)`);
      }
    }
  }

  /** Best effort: s3rver answers 405, and a missing upload is already gone. */
  async abortUpload(key: string, uploadId: string): Promise<void> {
    try {
      await this.#call("AbortMultipartUpload", key, this.#timeoutMs, (signal) =>
        this.#client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }), { abortSignal: signal }));
    } catch {
      // An upload left behind is removed by the bucket's lifecycle rule (docs/registry.md).
    }
  }

  // --- StorageDriver ---------------------------------------------------------------------------------

  async getContent(path: string): Promise<Buffer> {
    this.#check(path);
    return (await this.#getBytes("GetObject", this.key(path), path)).bytes;
  }

  async putContent(path: string, content: Uint8Array): Promise<void> {
    this.#check(path);
    if (path === "/") throw new InvalidPathError(path);
    await this.#put("PutObject", this.key(path), content);
  }

  async reader(path: string, offset = 0, length?: number): Promise<Readable> {
    this.#check(path);
    if (!Number.isInteger(offset) || offset < 0) throw new RangeError(`reader offset must be a non-negative integer, got ${offset}`);
    if (length !== undefined && (!Number.isInteger(length) || length < 0)) throw new RangeError(`reader length must be a non-negative integer, got ${length}`);
    const key = this.key(path);
    if (length === 0) {
      if (!(await this.#head(key, path))) throw new PathNotFoundError(path);
      return Readable.from([]);
    }
    const last = length === undefined ? undefined : offset + length - 1;
    const range = offset === 0 && last === undefined ? undefined : `bytes=${offset}-${last ?? ""}`;
    // The deadline covers the response headers; the body is guarded by the socket idle timeout, so
    // a long download of a big blob is not cut short.
    const deadline = new Deadline(this.#timeoutMs);
    try {
      const out = await this.#client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range }), {
        abortSignal: deadline.signal,
      });
      deadline.clear();
      const body = out.Body as Readable;
      if (range) {
        // Never hand out other bytes than asked for (an S3-compatible store that ignores or bends the range).
        const m = /^bytes (\d+)-(\d+)\//.exec(out.ContentRange ?? "");
        if (!m || Number(m[1]) !== offset || (last !== undefined && Number(m[2]) > last)) {
          body.destroy();
          throw new S3DriverError("GetObject", key, "BadRange", `asked for ${range}, got ${out.ContentRange ? `"${out.ContentRange}"` : "no Content-Range"}`);
        }
      }
      return body;
    } catch (err) {
      deadline.clear();
      if (!deadline.timedOut && isNoSuchKey(err)) throw new PathNotFoundError(path);
      // An offset at (or past) the end: nothing to read, as distribution's driver answers.
      if (!deadline.timedOut && (errorCode(err) === "InvalidRange" || httpStatus(err) === 416)) return Readable.from([]);
      throw this.#wrap("GetObject", key, err, deadline);
    }
  }

  async writer(path: string, append: boolean): Promise<FileWriter> {
    this.#check(path);
    if (path === "/") throw new InvalidPathError(path);
    const key = this.key(path);
    const stateKey = key + STATE_SUFFIX;
    if (append) {
      const { bytes } = await this.#getBytes("GetObject", stateKey, path);
      const state = parseState(bytes, stateKey);
      let tail: Buffer | null = null;
      if (state.tail) {
        const tailKey = key + TAIL_SUFFIX + state.tail.slot;
        const got = await this.#getBytes("GetObject", tailKey);
        if (got.bytes.length !== state.tail.size || (state.tail.etag && got.etag && got.etag !== state.tail.etag)) {
          throw new S3DriverError("GetObject", tailKey, "InconsistentUpload", `tail is ${got.bytes.length} bytes (etag ${got.etag}), the upload state says ${state.tail.size} (etag ${state.tail.etag})`);
        }
        tail = got.bytes;
      }
      return new S3FileWriter(this, key, state, tail, false);
    }
    // A fresh writer replaces whatever upload was pending at this path.
    let previous: UploadState | null = null;
    try {
      previous = parseState((await this.#getBytes("GetObject", stateKey, path)).bytes, stateKey);
    } catch (err) {
      if (!(err instanceof PathNotFoundError) && !(err instanceof S3DriverError && err.code === "InvalidUploadState")) throw err;
    }
    if (previous?.uploadId) await this.abortUpload(key, previous.uploadId);
    const state: UploadState = { v: 1, uploadId: null, tag: null, parts: [], size: 0, tail: null, nonce: newNonce() };
    await this.saveState(key, state);
    return new S3FileWriter(this, key, state, null, true);
  }

  async stat(path: string): Promise<FileInfo> {
    this.#check(path);
    const key = this.key(path);
    if (path !== "/") {
      const head = await this.#head(key, path);
      if (head) return { path, size: head.size, modTime: head.modTime, isDir: false, version: head.version };
    }
    const page = await this.#listPage(this.#dirPrefix(path), undefined, undefined, 1);
    const first = page.Contents?.[0];
    if (first || path === "/") return { path, size: 0, modTime: first?.LastModified ?? new Date(0), isDir: true };
    throw new PathNotFoundError(path);
  }

  async deleteMany(paths: readonly string[]): Promise<void> {
    for (const p of paths) {
      this.#check(p);
      if (p === "/") throw new InvalidPathError(p);
    }
    await this.#deleteKeys(paths.map((p) => this.key(p)));
  }

  async list(path: string): Promise<string[]> {
    this.#check(path);
    const prefix = this.#dirPrefix(path);
    const children = new Set<string>();
    let any = false;
    let token: string | undefined;
    do {
      const page = await this.#listPage(prefix, "/", token);
      for (const o of page.Contents ?? []) {
        if (!o.Key || o.Key === prefix) continue;
        any = true;
        if (!hiddenName.test(o.Key)) children.add(this.#pathOf(o.Key));
      }
      for (const p of page.CommonPrefixes ?? []) {
        if (!p.Prefix) continue;
        any = true;
        children.add(this.#pathOf(p.Prefix.replace(/\/+$/, "")));
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    if (!any && path !== "/") throw new PathNotFoundError(path);
    return [...children];
  }

  async move(source: string, dest: string): Promise<void> {
    this.#check(source);
    this.#check(dest);
    if (source === "/" || dest === "/") throw new InvalidPathError("/");
    const from = this.key(source);
    const to = this.key(dest);
    const head = await this.#head(from, source);
    if (!head) throw new PathNotFoundError(source);
    if (source === dest) return;
    if (head.size > MAX_COPY_SIZE) {
      throw new S3DriverError("CopyObject", from, "EntityTooLarge", `${head.size} bytes: moving objects above 5 GiB needs a multipart copy, which this driver does not do`);
    }
    const copySource = `${this.bucket}/${from.split("/").map(encodeURIComponent).join("/")}`;
    await this.#call(
      "CopyObject",
      from,
      this.#timeoutMs + Math.ceil(head.size / (100 * 1024)),
      (signal) => this.#client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: to, CopySource: copySource }), { abortSignal: signal }),
      source,
    );
    await this.#deleteKeys([from]);
  }

  async delete(path: string): Promise<void> {
    this.#check(path);
    const key = this.key(path);
    let found = false;
    if (path !== "/" && (await this.#head(key, path))) {
      await this.#deleteKeys([key]);
      found = true;
    }
    // Everything below the prefix, a page at a time; each page is deleted before the next listing,
    // which starts over (no continuation token across deletions). Pending writers' multipart uploads
    // are aborted first.
    const prefix = this.#dirPrefix(path);
    for (let round = 0; ; round++) {
      const page = await this.#listPage(prefix, undefined, undefined);
      const keys = (page.Contents ?? []).map((o) => o.Key).filter((k): k is string => !!k);
      if (keys.length === 0) break;
      found = true;
      for (const k of keys) {
        if (!k.endsWith(STATE_SUFFIX)) continue;
        try {
          const state = parseState((await this.#getBytes("GetObject", k)).bytes, k);
          if (state.uploadId) await this.abortUpload(k.slice(0, -STATE_SUFFIX.length), state.uploadId);
        } catch {
          // Deleting the directory matters more than aborting an upload.
        }
      }
      await this.#deleteKeys(keys);
      if (round > 1_000_000) throw new S3DriverError("DeleteObjects", prefix, "TooManyRounds", "keys keep appearing under the prefix");
    }
    if (!found) throw new PathNotFoundError(path);
  }

  async close(): Promise<void> {
    this.#client.destroy();
  }

  // --- for the writer --------------------------------------------------------------------------------

  async saveState(key: string, state: UploadState): Promise<void> {
    await this.#put("PutObject", key + STATE_SUFFIX, Buffer.from(JSON.stringify(state)));
  }

  /** The nonce of the saved state; undefined when there is none (committed, cancelled, or not ours). */
  async stateNonce(key: string): Promise<string | undefined> {
    const stateKey = key + STATE_SUFFIX;
    try {
      return parseState((await this.#getBytes("GetObject", stateKey, stateKey)).bytes, stateKey).nonce;
    } catch (err) {
      if (err instanceof PathNotFoundError || (err instanceof S3DriverError && err.code === "InvalidUploadState")) return undefined;
      throw err;
    }
  }

  async putTail(key: string, slot: 0 | 1, bytes: Buffer): Promise<string> {
    return this.#put("PutObject", key + TAIL_SUFFIX + slot, bytes);
  }

  /** The object in one PutObject, carrying the writer's commit tag. */
  async putObject(key: string, bytes: Buffer, tag: string): Promise<void> {
    await this.#put("PutObject", key, bytes, { [COMMIT_META]: tag });
  }

  /** A multipart upload whose object will carry the commit tag `tag`. */
  async createUpload(key: string, tag: string): Promise<string> {
    const out = await this.#call("CreateMultipartUpload", key, this.#timeoutMs, (signal) =>
      this.#client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key, Metadata: { [COMMIT_META]: tag } }), { abortSignal: signal }));
    if (!out.UploadId) throw new S3DriverError("CreateMultipartUpload", key, "NoUploadId", "the response has no UploadId");
    return out.UploadId;
  }

  async uploadPart(key: string, uploadId: string, n: number, body: Buffer): Promise<string> {
    const out = await this.#call(`UploadPart ${n}`, key, this.#transferMs(body.length), (signal) =>
      this.#client.send(
        new UploadPartCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumber: n, Body: body, ContentLength: body.length }),
        { abortSignal: signal },
      ));
    if (!out.ETag) throw new S3DriverError(`UploadPart ${n}`, key, "NoETag", "the response has no ETag");
    return out.ETag;
  }

  async completeUpload(key: string, uploadId: string, parts: PartRecord[], size: number): Promise<void> {
    await this.#call("CompleteMultipartUpload", key, this.#timeoutMs + Math.ceil(size / (100 * 1024)), (signal) =>
      this.#client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: key,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.n, ETag: p.etag })) },
        }),
        { abortSignal: signal },
      ));
  }

  /** Deletes the writer's helper keys (and, with `object`, the object); missing keys are fine. */
  async removeUploadKeys(key: string, object: boolean): Promise<void> {
    const keys = [key + STATE_SUFFIX, key + TAIL_SUFFIX + "0", key + TAIL_SUFFIX + "1"];
    await this.#deleteKeys(object ? [key, ...keys] : keys);
  }
}

function parseState(bytes: Buffer, stateKey: string): UploadState {
  let s: UploadState;
  try {
    s = JSON.parse(bytes.toString("utf8")) as UploadState;
  } catch {
    throw new S3DriverError("GetObject", stateKey, "InvalidUploadState", "the upload state is not JSON");
  }
  const ok =
    s &&
    s.v === 1 &&
    typeof s.nonce === "string" &&
    s.nonce !== "" &&
    ((s.uploadId === null && s.tag === null) || (typeof s.uploadId === "string" && typeof s.tag === "string" && s.tag !== "")) &&
    Array.isArray(s.parts) &&
    s.parts.every((p, i) => p.n === i + 1 && typeof p.etag === "string" && Number.isInteger(p.size) && p.size >= MIN_CHUNK_SIZE) &&
    (s.tail === null || ((s.tail.slot === 0 || s.tail.slot === 1) && Number.isInteger(s.tail.size) && s.tail.size > 0)) &&
    s.size === s.parts.reduce((a, p) => a + p.size, 0) + (s.tail?.size ?? 0);
  if (!ok) throw new S3DriverError("GetObject", stateKey, "InvalidUploadState", "the upload state is not one this driver wrote");
  return s;
}

type WriterStatus = "open" | "closed" | "committed" | "cancelled";

class S3FileWriter implements FileWriter {
  #status: WriterStatus = "open";
  #buffer: Buffer[] = [];
  #buffered = 0;
  /** Bytes in uploaded parts. */
  #partBytes: number;
  /** The object's size once committed (the buffer is gone then). */
  #committedSize: number | undefined;
  #dirty = false;
  #busy = false;
  /** The nonce of the state this writer read or saved last; after commit, the object's commit tag. */
  #version: string;
  /** Whether this writer has saved the state (a fresh writer did when it was opened). */
  #claimed: boolean;

  constructor(
    private readonly driver: S3Driver,
    private readonly key: string,
    private readonly state: UploadState,
    tail: Buffer | null,
    claimed: boolean,
  ) {
    this.#partBytes = state.parts.reduce((a, p) => a + p.size, 0);
    this.#version = state.nonce;
    this.#claimed = claimed;
    if (tail && tail.length > 0) {
      this.#buffer.push(tail);
      this.#buffered = tail.length;
    }
  }

  get size(): number {
    return this.#committedSize ?? this.#partBytes + this.#buffered;
  }

  get version(): string {
    return this.#version;
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.#expect("write", ["open"]);
    if (chunk.length === 0) return;
    await this.#run(async () => {
      // The first write claims the upload: a second writer opened on the same state (another
      // request, another instance) fails before it uploads a part over this one's.
      if (!this.#claimed) {
        await this.#save({ ...this.state });
        this.#claimed = true;
      }
      this.#dirty = true;
      // Never more than one chunk buffered, however large the write.
      for (let pos = 0; pos < chunk.length; ) {
        const n = Math.min(chunk.length - pos, this.driver.chunkSize - this.#buffered);
        // A copy: the caller may reuse its buffer while parts are uploaded.
        this.#buffer.push(Buffer.from(chunk.subarray(pos, pos + n)));
        this.#buffered += n;
        pos += n;
        if (this.#buffered >= this.driver.chunkSize) await this.#uploadPart(this.#take(this.driver.chunkSize));
      }
    });
  }

  async close(): Promise<void> {
    if (this.#status !== "open") return;
    this.#expect("close", ["open"]);
    await this.#run(async () => {
      if (this.#dirty) {
        // this.state.tail stays the durable one until the new state is saved: the new tail goes to
        // the other slot, so a failure here leaves the saved state and its tail intact. Checked
        // first, so that a writer that lost the upload to another never writes a tail slot the
        // other's state refers to.
        await this.#checkState("close");
        let tail: UploadState["tail"] = null;
        if (this.#buffered >= MIN_CHUNK_SIZE) {
          await this.#uploadPart(this.#take(this.#buffered));
        } else if (this.#buffered > 0) {
          const bytes = Buffer.concat(this.#buffer, this.#buffered);
          const slot: 0 | 1 = this.state.tail?.slot === 0 ? 1 : 0;
          tail = { slot, size: bytes.length, etag: await this.driver.putTail(this.key, slot, bytes) };
        }
        const size = this.size;
        await this.#save({ ...this.state, tail, size });
        this.state.tail = tail;
        this.state.size = size;
        this.#dirty = false;
      }
      this.#status = "closed";
    });
  }

  async commit(): Promise<void> {
    this.#expect("commit", ["open", "closed"]);
    await this.#run(async () => {
      await this.#checkState("commit");
      const size = this.size;
      const rest = this.#take(this.#buffered);
      let tag: string;
      if (this.state.parts.length === 0) {
        tag = newNonce();
        await this.driver.putObject(this.key, rest, tag);
        if (this.state.uploadId) await this.driver.abortUpload(this.key, this.state.uploadId);
      } else {
        if (rest.length > 0) await this.#uploadPart(rest, true);
        await this.driver.completeUpload(this.key, this.state.uploadId!, this.state.parts, size);
        tag = this.state.tag!;
      }
      this.#committedSize = size;
      this.#version = tag;
      this.#status = "committed";
      try {
        await this.driver.removeUploadKeys(this.key, false);
      } catch {
        // The object is there; a stale state is hidden from list() and goes with its directory.
      }
    });
  }

  async cancel(): Promise<void> {
    this.#expect("cancel", ["open", "closed"]);
    await this.#run(async () => {
      this.#take(this.#buffered);
      if (this.state.uploadId) await this.driver.abortUpload(this.key, this.state.uploadId);
      await this.driver.removeUploadKeys(this.key, true);
      this.#status = "cancelled";
    });
  }

  /** WriterConflictError unless the saved state is still the one this writer read or saved last. */
  async #checkState(op: string): Promise<void> {
    const current = await this.driver.stateNonce(this.key);
    if (current !== this.#version) {
      throw new WriterConflictError(
        this.#path(),
        current === undefined ? `${op}: the upload was committed or cancelled meanwhile` : `${op}: the upload state was saved by another writer since this one read it`,
      );
    }
  }

  /** Save `state` under a new nonce, after checking that nobody else saved since this writer did. */
  async #save(state: UploadState): Promise<void> {
    await this.#checkState("save");
    const nonce = newNonce();
    await this.driver.saveState(this.key, { ...state, nonce });
    this.state.nonce = nonce;
    this.#version = nonce;
  }

  /** The driver path of the key (for errors). */
  #path(): string {
    return this.driver.root ? this.key.slice(this.driver.root.length) : `/${this.key}`;
  }

  #expect(op: string, allowed: WriterStatus[]): void {
    if (!allowed.includes(this.#status)) throw new Error(`s3 writer ${JSON.stringify(this.key)}: ${op} after ${this.#status}`);
    if (this.#busy) throw new Error(`s3 writer ${JSON.stringify(this.key)}: ${op} while another call is in progress`);
  }

  async #run(fn: () => Promise<void>): Promise<void> {
    this.#busy = true;
    try {
      await fn();
    } finally {
      this.#busy = false;
    }
  }

  /** The first `n` buffered bytes, removed from the buffer. */
  #take(n: number): Buffer {
    const all = this.#buffer.length === 1 ? this.#buffer[0]! : Buffer.concat(this.#buffer, this.#buffered);
    const head = all.subarray(0, n);
    const rest = all.subarray(n);
    // Copy the remainder so the uploaded part's memory can be freed.
    this.#buffer = rest.length > 0 ? [Buffer.from(rest)] : [];
    this.#buffered = rest.length;
    return head;
  }

  async #uploadPart(body: Buffer, last = false): Promise<void> {
    if (!last && body.length < MIN_CHUNK_SIZE) throw new Error(`s3 writer: a part of ${body.length} bytes before the last`);
    const n = this.state.parts.length + 1;
    if (n > MAX_PARTS) throw new S3DriverError(`UploadPart ${n}`, this.key, "TooManyParts", `an object has at most ${MAX_PARTS} parts; raise chunksize`);
    if (!this.state.uploadId) {
      const tag = newNonce();
      const uploadId = await this.driver.createUpload(this.key, tag);
      // Record the upload at once (with what the last close made durable), so that it can be aborted
      // even if this writer is never closed. The save checks that the state is still this writer's.
      try {
        await this.#save({ ...this.state, uploadId, tag, parts: [] });
      } catch (err) {
        await this.driver.abortUpload(this.key, uploadId);
        throw err;
      }
      this.state.uploadId = uploadId;
      this.state.tag = tag;
    } else {
      // Parts of another writer's upload are never overwritten knowingly.
      await this.#checkState(`UploadPart ${n}`);
    }
    const etag = await this.driver.uploadPart(this.key, this.state.uploadId, n, body);
    this.state.parts.push({ n, etag, size: body.length });
    this.#partBytes += body.length;
  }
}
