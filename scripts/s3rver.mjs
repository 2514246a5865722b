#!/usr/bin/env node
// s3rver (npm, 3.7.1) as `scripts/services` runs it for tests, with four fixes to its filesystem
// store so that it behaves as S3 does where the registry's S3 driver relies on it. Same command line
// as s3rver's own (`-d DIR -a ADDR -p PORT ...`).
//
// 1. ListObjectsV2 with a Delimiter: s3rver skips every directory below a common prefix, so a prefix
//    whose objects all sit two or more levels down (".../sha256/ab/<hex>/data") is never listed; it
//    also pages in readdir order, not key order. Here: every key under the prefix, sorted, then
//    S3's rules (a page holds up to max-keys keys; its common prefixes are the ones before the
//    page's last key, so none repeats on the next page).
// 2. PutObject (and CompleteMultipartUpload): s3rver truncates and rewrites the object file in place
//    and answers before the bytes are flushed. Here: a temporary file, flushed, renamed over the
//    object, then the metadata, also by rename: readers see the old or the new object, never a mix.
// 3. GetObject: the size comes from the opened file (not a stat taken before opening it), so a
//    concurrent replace cannot make the response shorter or longer than its Content-Length.
// 4. Range "bytes=0-0" returned the whole object (an end of 0 was taken as "no end").
// And, as a bucket lifecycle rule would: s3rver has no AbortMultipartUpload, so multipart uploads
// untouched for an hour are removed (every 10 minutes).
import { Buffer } from "node:buffer";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, promises as fsp } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, posix, relative, sep } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setInterval } from "node:timers";

const require = createRequire(import.meta.url);
const FilesystemStore = require("s3rver/lib/stores/filesystem");
const S3Object = require("s3rver/lib/models/object");

const OBJECT_SUFFIX = "._S3rver_object";

async function walkFiles(dir, out) {
  let entries;
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") return;
    throw err;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) await walkFiles(p, out);
    else if (e.name.endsWith(OBJECT_SUFFIX)) out.push(p);
  }
}

async function writeAtomically(path, data) {
  const temp = `${path}.tmp-${randomBytes(6).toString("hex")}`;
  await fsp.writeFile(temp, data);
  await fsp.rename(temp, path);
}

FilesystemStore.prototype.listObjects = async function listObjects(bucket, options) {
  const { delimiter = "", startAfter = "", prefix = "", maxKeys = Infinity } = options;
  const bucketPath = this.getBucketPath(bucket);
  // Start at the deepest directory the prefix names completely.
  const base = prefix.includes("/") ? join(bucketPath, ...prefix.slice(0, prefix.lastIndexOf("/")).split("/")) : bucketPath;
  const files = [];
  await walkFiles(base, files);
  const keys = files
    .map((f) => FilesystemStore.decodeKeyPath(relative(bucketPath, f).split(sep).join(posix.sep)).slice(0, -OBJECT_SUFFIX.length))
    .filter((k) => k.startsWith(prefix) && k > startAfter)
    .sort();
  const objects = [];
  const commonPrefixes = new Set();
  let isTruncated = false;
  for (const key of keys) {
    const idx = delimiter ? key.slice(prefix.length).indexOf(delimiter) : -1;
    const cp = idx === -1 ? null : key.slice(0, prefix.length + idx + delimiter.length);
    if (cp !== null && commonPrefixes.has(cp)) continue;
    if (objects.length >= maxKeys) {
      isTruncated = true;
      break;
    }
    if (cp !== null) commonPrefixes.add(cp);
    else objects.push(key);
  }
  const withMetadata = await Promise.all(
    objects.map((key) =>
      this.getMetadata(bucket, key).then(
        (metadata) => new S3Object(bucket, key, null, metadata),
        (err) => {
          if (err.code === "ENOENT") return undefined;
          throw err;
        },
      ),
    ),
  );
  return { objects: withMetadata.filter(Boolean), commonPrefixes: [...commonPrefixes].sort(), isTruncated };
};

FilesystemStore.prototype.putMetadata = async function putMetadata(bucket, key, metadata, md5) {
  const json = {};
  for (const [k, v] of Object.entries(metadata)) {
    if (S3Object.ALLOWED_METADATA.includes(k) || k.startsWith("x-amz-meta-")) json[k] = v;
  }
  if (md5) await writeAtomically(this.getResourcePath(bucket, key, "object.md5"), md5);
  await writeAtomically(this.getResourcePath(bucket, key, "metadata.json"), JSON.stringify(json, null, 2));
};

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, "object");
  await fsp.mkdir(dirname(objectPath), { recursive: true });
  const temp = `${objectPath}.tmp-${randomBytes(6).toString("hex")}`;
  const md5 = createHash("md5");
  let size = 0;
  try {
    if (Buffer.isBuffer(object.content)) {
      md5.update(object.content);
      size = object.content.length;
      await fsp.writeFile(temp, object.content);
    } else {
      const count = new Transform({
        transform(chunk, _encoding, callback) {
          md5.update(chunk);
          size += chunk.length;
          callback(null, chunk);
        },
      });
      await pipeline(object.content, count, createWriteStream(temp));
    }
    await fsp.rename(temp, objectPath);
  } catch (err) {
    await fsp.rm(temp, { force: true });
    throw err;
  }
  const digest = md5.digest("hex");
  await this.putMetadata(object.bucket, object.key, object.metadata, digest);
  return { size, md5: digest };
};

FilesystemStore.prototype.getObject = async function getObject(bucket, key, options) {
  let handle;
  try {
    handle = await fsp.open(this.getResourcePath(bucket, key, "object"), "r");
  } catch (err) {
    if (err.code === "ENOENT") return null;
    throw err;
  }
  try {
    const stat = await handle.stat();
    const metadata = await this.getMetadata(bucket, key);
    metadata["content-length"] = stat.size;
    metadata["last-modified"] = stat.mtime.toUTCString();
    const ranged = !!options && (options.start !== undefined || options.end !== undefined);
    const lastByte = Math.max(0, stat.size - 1);
    const range = { start: options?.start ?? 0, end: Math.min(options?.end ?? Infinity, lastByte) };
    if (range.start < 0 || range.end < range.start || (ranged && stat.size === 0)) {
      await handle.close();
      const object = new S3Object(bucket, key, null, metadata);
      if (ranged) object.range = range;
      return object;
    }
    const content = createReadStream("", { fd: handle, start: range.start, end: range.end, autoClose: true });
    const object = new S3Object(bucket, key, content, metadata);
    if (ranged) object.range = range;
    return object;
  } catch (err) {
    await handle.close().catch(() => {});
    if (err.code === "ENOENT") return null;
    throw err;
  }
};

// The controller turns "bytes=0-0" into {start: 0, end: 0}; the store's `options.end || Infinity`
// was the bug (fixed above with ??).

async function expireUploads(root) {
  const cutoff = Date.now() - 3600_000;
  for (const bucket of await fsp.readdir(root).catch(() => [])) {
    const uploads = join(root, bucket, "._S3rver_uploads");
    for (const id of await fsp.readdir(uploads).catch(() => [])) {
      const dir = join(uploads, id);
      const st = await fsp.stat(dir).catch(() => null);
      if (st && st.mtimeMs < cutoff) await fsp.rm(dir, { recursive: true, force: true }).catch(() => {});
    }
  }
}
const argv = process.argv;
const dirArg = argv.findIndex((a) => a === "-d" || a === "--directory");
if (dirArg > 0 && argv[dirArg + 1]) {
  const root = argv[dirArg + 1];
  setInterval(() => void expireUploads(root), 600_000).unref();
}

// Now s3rver's own command line.
require("s3rver/bin/s3rver.js");
