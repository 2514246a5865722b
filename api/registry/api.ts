// The registry's HTTP API: Docker Registry HTTP API V2 / OCI distribution-spec 1.1 on a
// StorageDriver, in distribution's layout (docs/registry.md). Thin: route, check names, work out the
// access the request needs and ask the authorizer, then call the storage modules.
//
//   GET           /v2/                                   200 {}
//   GET           /v2/_catalog?n=&last=                  200 {"repositories": [...]}   (+ Link)
//   GET           /v2/<name>/tags/list?n=&last=          200 {"name", "tags": [...]}   (+ Link)
//   GET/HEAD      /v2/<name>/manifests/<ref>             200 | 304 | 404 MANIFEST_UNKNOWN
//   PUT           /v2/<name>/manifests/<ref>[?tag=...]   201 | 400 MANIFEST_INVALID, MANIFEST_BLOB_UNKNOWN, DIGEST_INVALID, TAG_INVALID
//   DELETE        /v2/<name>/manifests/<ref>             202 | 404 | 405 UNSUPPORTED (delete disabled)
//   GET/HEAD      /v2/<name>/blobs/<digest>              200 | 206 | 304 | 416 | 404 BLOB_UNKNOWN
//   DELETE        /v2/<name>/blobs/<digest>              202 | 404 | 405
//   POST          /v2/<name>/blobs/uploads/[?digest=|?mount=&from=|?digest-algorithm=]   202 session | 201 blob
//   GET           /v2/<name>/blobs/uploads/<id>          204 (Range)
//   PATCH         /v2/<name>/blobs/uploads/<id>          202 | 416 RANGE_INVALID
//   PUT           /v2/<name>/blobs/uploads/<id>?digest=  201 | 400 DIGEST_INVALID | 416
//   DELETE        /v2/<name>/blobs/uploads/<id>          204
//   GET           /v2/<name>/referrers/<digest>[?artifactType=]   200 OCI index
//
// Every answer carries `Docker-Distribution-API-Version: registry/2.0`; errors are distribution's
// body (errors.ts). Access, as distribution computes it: GET/HEAD pull, POST/PUT/PATCH pull+push,
// DELETE delete, a mount also pull on `from`, the catalog registry:catalog:*, /v2/ nothing.
import type { Context } from "hono";
import { Hono } from "hono";
import { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { PathNotFoundError, type StorageDriver } from "../../adapters/blobstore/driver.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { AccessEntry, RegistryAuthorizer } from "./access.ts";
import { Blobs, parseRange } from "./blobs.ts";
import { catalogDefaultEntries, catalogMaxEntries, listCatalog } from "./catalog.ts";
import { entry, errorBody, RegistryError, registryError, registryErrorHandler } from "./errors.ts";
import { noJournal, type GcJournal } from "./gc-journal.ts";
import { Links } from "../resources/registry-storage.ts";
import { ManifestStore, type StoredManifest } from "./manifest-store.ts";
import { acceptable, acceptedTypes, maxManifestBytes, mediaTypes, parseManifest } from "./manifests.ts";
import { isRepositoryName, isTag, isUploadId, parseDigest, parseReference, type Digest, type DigestAlgorithm } from "../resources/registry-names.ts";
import { parsePage, type Page } from "./pagination.ts";
import { listReferrers } from "./referrers.ts";
import { listTags, maxTagsPerPage } from "./tags.ts";
import { checkDeclaredLength, parseContentRange, readBodyUpTo, requestBody } from "./transfer.ts";
import { rangeOf, uploadLocation, Uploads } from "./uploads.ts";
import { systemWallClock, type WallClock } from "../http/clock.ts";

export interface RegistryApiOptions {
  driver: StorageDriver;
  /** distribution's `storage.delete.enabled`: without it DELETE of manifests, tags and blobs is 405 UNSUPPORTED. */
  deleteEnabled: boolean;
  authorizer: RegistryAuthorizer;
  log?: Logger;
  /** Wall-clock time for uploads' `startedat`. */
  clock?: WallClock;
  /** Where touches and changed repositories are written for garbage collection (gc-journal.ts). */
  journal?: GcJournal;
  /** Counts requests, so garbage collection can yield to them (controllers/registrygc/pacer.ts). */
  activity?: { seen(): void };
}

/** At most this many `?tag=` on one manifest PUT. */
export const maxTagsPerPut = 100;

type Route =
  | { kind: "base" }
  | { kind: "catalog" }
  | { kind: "tags"; name: string }
  | { kind: "manifest"; name: string; ref: string }
  | { kind: "uploads"; name: string }
  | { kind: "upload"; name: string; id: string }
  | { kind: "blob"; name: string; ref: string }
  | { kind: "referrers"; name: string; ref: string };

// Tried in order; the name part is greedy, as distribution's router is, and checked afterwards.
const routes: [RegExp, (m: RegExpExecArray) => Route][] = [
  [/^\/v2\/?$/, () => ({ kind: "base" })],
  [/^\/v2\/_catalog$/, () => ({ kind: "catalog" })],
  [/^\/v2\/(.+)\/tags\/list$/, (m) => ({ kind: "tags", name: m[1]! })],
  [/^\/v2\/(.+)\/manifests\/([^/]+)$/, (m) => ({ kind: "manifest", name: m[1]!, ref: m[2]! })],
  [/^\/v2\/(.+)\/blobs\/uploads\/?$/, (m) => ({ kind: "uploads", name: m[1]! })],
  [/^\/v2\/(.+)\/blobs\/uploads\/([^/]+)$/, (m) => ({ kind: "upload", name: m[1]!, id: m[2]! })],
  [/^\/v2\/(.+)\/blobs\/([^/]+)$/, (m) => ({ kind: "blob", name: m[1]!, ref: m[2]! })],
  [/^\/v2\/(.+)\/referrers\/([^/]+)$/, (m) => ({ kind: "referrers", name: m[1]!, ref: m[2]! })],
];

function matchRoute(path: string): Route | undefined {
  for (const [re, make] of routes) {
    const m = re.exec(path);
    if (m) return make(m);
  }
  return undefined;
}

export function createRegistryApi(opts: RegistryApiOptions): Hono {
  const { driver, deleteEnabled, authorizer } = opts;
  const log = (opts.log ?? silentLogger).child({ api: "registry" });
  const journal = opts.journal ?? noJournal;
  const links = new Links(driver);
  const blobs = new Blobs(driver, links, journal);
  const uploads = new Uploads(driver, blobs, links, opts.clock ?? systemWallClock, journal);
  const manifests = new ManifestStore(links, blobs, journal);

  const app = new Hono();
  app.onError(registryErrorHandler(log));
  app.use("*", async (c, next) => {
    opts.activity?.seen();
    await next();
    c.res.headers.set("docker-distribution-api-version", "registry/2.0");
  });
  app.all("*", async (c) => {
    const path = rawPath(c);
    const route = matchRoute(path);
    if (route === undefined) return c.json(errorBody([entry("UNSUPPORTED", { path }, `no registry endpoint at ${path}`)]), 404);
    const method = c.req.method;
    switch (route.kind) {
      case "base":
        return only(method, ["GET", "HEAD"], () => base(c));
      case "catalog":
        return only(method, ["GET", "HEAD"], () => catalog(c));
      case "tags":
        return only(method, ["GET", "HEAD"], () => tags(c, checkName(route.name)));
      case "manifest": {
        const name = checkName(route.name);
        if (method === "GET" || method === "HEAD") return getManifest(c, name, route.ref);
        if (method === "PUT") return putManifest(c, name, route.ref);
        if (method === "DELETE") return deleteManifest(c, name, route.ref);
        return unsupported(method);
      }
      case "blob": {
        const name = checkName(route.name);
        if (method === "GET" || method === "HEAD") return getBlob(c, name, route.ref);
        if (method === "DELETE") return deleteBlob(c, name, route.ref);
        return unsupported(method);
      }
      case "uploads":
        return only(method, ["POST"], () => startUpload(c, checkName(route.name)));
      case "upload": {
        const name = checkName(route.name);
        if (method === "GET" || method === "HEAD") return uploadStatus(c, name, route.id);
        if (method === "PATCH") return patchUpload(c, name, route.id);
        if (method === "PUT") return putUpload(c, name, route.id);
        if (method === "DELETE") return cancelUpload(c, name, route.id);
        return unsupported(method);
      }
      case "referrers":
        return only(method, ["GET", "HEAD"], () => referrers(c, checkName(route.name), route.ref));
    }
  });

  // ---- access

  async function authorize(c: Context, needed: AccessEntry[]): Promise<void> {
    const decision = await authorizer.authorize(c.req.header("authorization"), needed);
    if (decision.ok) return;
    // distribution's detail: one {Type, Class, Name, Action} per action needed.
    const detail = needed.flatMap((n) => n.actions.map((a) => ({ Type: n.type, Class: "", Name: n.name, Action: a })));
    throw new RegistryError([entry("UNAUTHORIZED", detail)]).withHeaders({ "www-authenticate": decision.challenge });
  }

  const pull = (name: string): AccessEntry => ({ type: "repository", name, actions: ["pull"] });
  const push = (name: string): AccessEntry => ({ type: "repository", name, actions: ["pull", "push"] });
  const del = (name: string): AccessEntry => ({ type: "repository", name, actions: ["delete"] });

  // ---- base, catalog, tags

  async function base(c: Context): Promise<Response> {
    await authorize(c, []);
    return c.json({});
  }

  async function catalog(c: Context): Promise<Response> {
    await authorize(c, [{ type: "registry", name: "catalog", actions: ["*"] }]);
    const page = await listCatalog(driver, parsePage((k) => c.req.query(k), catalogDefaultEntries, catalogMaxEntries));
    return listAnswer(c, { repositories: page.entries }, page);
  }

  async function tags(c: Context, name: string): Promise<Response> {
    await authorize(c, [pull(name)]);
    const page = await listTags(links, name, parsePage((k) => c.req.query(k), undefined, maxTagsPerPage));
    return listAnswer(c, { name, tags: page.entries }, page);
  }

  function listAnswer(c: Context, body: object, page: Page): Response {
    return c.json(body, 200, page.link === undefined ? {} : { link: page.link });
  }

  // ---- manifests

  async function getManifest(c: Context, name: string, rawRef: string): Promise<Response> {
    await authorize(c, [pull(name)]);
    const ref = parseReference(decode(rawRef));
    let digest: Digest;
    if (typeof ref === "string") throw referenceError(ref, rawRef);
    if (ref.kind === "tag") {
      const tagged = await links.readTag(name, ref.tag);
      if (tagged === undefined) throw registryError("MANIFEST_UNKNOWN", { Tag: ref.tag });
      digest = tagged;
    } else digest = ref.digest;
    // A 304 only for a manifest this repository has: an ETag names content, not a repository's right to serve it.
    if (etagMatches(c, digest) && (await manifests.exists(name, digest))) return c.body(null, 304);
    let stored = await manifests.get(name, digest);
    if (stored === undefined) throw registryError("MANIFEST_UNKNOWN", ref.kind === "tag" ? { Tag: ref.tag } : { Digest: digest.value });
    const accept = c.req.raw.headers.get("accept") ?? "";
    if (!acceptable(stored.mediaType, [accept])) {
      const kind = stored.mediaType === mediaTypes.ociIndex ? "index" : "manifest";
      throw registryError("MANIFEST_UNKNOWN", { mediaType: stored.mediaType }, `OCI ${kind} found, but the Accept header does not accept ${stored.mediaType}`);
    }
    if (ref.kind === "tag") stored = (await platformFallback(name, stored, accept)) ?? stored;
    const headers = {
      "content-type": stored.mediaType,
      "content-length": String(stored.bytes.byteLength),
      "docker-content-digest": stored.digest.value,
      etag: `"${stored.digest.value}"`,
    };
    return c.body(new Uint8Array(stored.bytes), 200, headers);
  }

  /**
   * distribution's answer to an old client asking by tag for a Docker manifest list it does not
   * accept (while accepting schema 2 manifests): the linux/amd64 image of the list.
   */
  async function platformFallback(name: string, stored: StoredManifest, accept: string): Promise<StoredManifest | undefined> {
    if (stored.mediaType !== mediaTypes.dockerList) return undefined;
    const accepted = acceptedTypes([accept]);
    if (accepted.has(mediaTypes.dockerList) || accepted.has("*/*") || accepted.has("application/*") || !accepted.has(mediaTypes.dockerManifest)) return undefined;
    let list;
    try {
      list = parseManifest(stored.bytes, stored.mediaType);
    } catch {
      return undefined;
    }
    const child = list.manifests.find((m) => m.platform?.os === "linux" && m.platform.architecture === "amd64");
    if (child === undefined) throw registryError("MANIFEST_UNKNOWN", undefined, "manifest list has no linux/amd64 image and the client does not accept manifest lists");
    const found = await manifests.get(name, child.digest);
    if (found === undefined) throw registryError("MANIFEST_UNKNOWN", { Digest: child.digest.value });
    return found;
  }

  async function putManifest(c: Context, name: string, rawRef: string): Promise<Response> {
    await authorize(c, [push(name)]);
    const ref = parseReference(decode(rawRef));
    if (typeof ref === "string") throw referenceError(ref, rawRef);
    const queryTags = c.req.queries("tag") ?? [];
    if (queryTags.length > maxTagsPerPut) throw registryError("TAG_INVALID", { tags: queryTags.length, max: maxTagsPerPut }, `at most ${maxTagsPerPut} tag parameters per PUT`);
    for (const t of queryTags) if (!isTag(t)) throw registryError("TAG_INVALID", { tag: t }, `invalid tag ${JSON.stringify(t)}`);
    const bytes = await readBodyUpTo(c, maxManifestBytes, (size) =>
      registryError("MANIFEST_INVALID", { size, limit: maxManifestBytes }, `manifest invalid: larger than ${maxManifestBytes} bytes (4 MiB)`),
    );
    const tagsToSet = [...new Set([...(ref.kind === "tag" ? [ref.tag] : []), ...queryTags])];
    const { digest, manifest } = await manifests.put(name, bytes, c.req.header("content-type"), ref.kind === "digest" ? ref.digest : undefined, tagsToSet);
    log.info({ repository: name, digest: digest.value, tags: tagsToSet }, "manifest pushed");
    const headers: Record<string, string> = {
      location: `/v2/${name}/manifests/${digest.value}`,
      "docker-content-digest": digest.value,
      "content-length": "0",
    };
    if (manifest.subject !== undefined) headers["oci-subject"] = manifest.subject.digest.value;
    if (queryTags.length > 0) headers["oci-tag"] = [...new Set(queryTags)].join(", ");
    return c.body(null, 201, headers);
  }

  async function deleteManifest(c: Context, name: string, rawRef: string): Promise<Response> {
    await authorize(c, [del(name)]);
    const ref = parseReference(decode(rawRef));
    if (typeof ref === "string") throw referenceError(ref, rawRef);
    if (!deleteEnabled) throw deleteDisabled();
    if (ref.kind === "tag") {
      if (!(await manifests.untag(name, ref.tag))) throw registryError("MANIFEST_UNKNOWN", { Tag: ref.tag });
    } else if (!(await manifests.delete(name, ref.digest))) {
      throw registryError("MANIFEST_UNKNOWN", { Digest: ref.digest.value });
    }
    log.info({ repository: name, reference: ref.kind === "tag" ? ref.tag : ref.digest.value }, "manifest deleted");
    return c.body(null, 202, { "content-length": "0" });
  }

  // ---- blobs

  async function getBlob(c: Context, name: string, rawRef: string): Promise<Response> {
    await authorize(c, [pull(name)]);
    const digest = checkDigest(decode(rawRef));
    let info = await blobs.statInRepository(name, digest);
    if (info !== undefined && c.req.method === "HEAD") {
      // A HEAD that answers 200 may be all a client checks before it skips the upload and PUTs a
      // manifest: the blob is touched, then checked again, so a collector removing it meanwhile
      // either sees the touch or makes this answer 404 (docs/registry-gc.md).
      await journal.touch([digest.value]);
      info = await blobs.statInRepository(name, digest);
    }
    if (info === undefined) throw registryError("BLOB_UNKNOWN", digest.value);
    const headers: Record<string, string> = {
      "docker-content-digest": digest.value,
      etag: `"${digest.value}"`,
      "cache-control": "max-age=31536000",
      "accept-ranges": "bytes",
    };
    if (etagMatches(c, digest)) return c.body(null, 304, headers);
    const range = parseRange(c.req.header("range"), info.size);
    if (range === "unsatisfiable") {
      throw registryError("RANGE_INVALID", { size: info.size, range: c.req.header("range") }, "requested range not satisfiable").withHeaders({ "content-range": `bytes */${info.size}` });
    }
    const start = range?.start ?? 0;
    const length = range === undefined ? info.size : range.end - range.start + 1;
    headers["content-type"] = "application/octet-stream";
    headers["content-length"] = String(length);
    if (range !== undefined) headers["content-range"] = `bytes ${range.start}-${range.end}/${info.size}`;
    const status = range === undefined ? 200 : 206;
    if (c.req.method === "HEAD") return c.body(null, status, headers);
    let stream: Readable;
    try {
      stream = await blobs.open(digest, start, length);
    } catch (err) {
      if (err instanceof PathNotFoundError) throw registryError("BLOB_UNKNOWN", digest.value);
      throw err;
    }
    return c.body(Readable.toWeb(stream) as ReadableStream<Uint8Array>, status, headers);
  }

  async function deleteBlob(c: Context, name: string, rawRef: string): Promise<Response> {
    await authorize(c, [del(name)]);
    const digest = checkDigest(decode(rawRef));
    if (!deleteEnabled) throw deleteDisabled();
    if (!(await links.unlinkBlob(name, digest))) throw registryError("BLOB_UNKNOWN", digest.value);
    return c.body(null, 202, { "docker-content-digest": digest.value, "content-length": "0" });
  }

  // ---- uploads

  async function startUpload(c: Context, name: string): Promise<Response> {
    const mount = c.req.query("mount");
    const from = c.req.query("from");
    const mountDigest = mount === undefined ? undefined : checkDigest(mount);
    const fromName = mount !== undefined && from !== undefined && from !== "" ? checkName(from) : undefined;
    await authorize(c, fromName !== undefined && fromName !== name ? [push(name), pull(fromName)] : [push(name)]);

    if (mountDigest !== undefined && fromName !== undefined && (await uploads.mount(name, fromName, mountDigest))) {
      log.info({ repository: name, from: fromName, digest: mountDigest.value }, "blob mounted");
      return blobCreated(c, name, mountDigest);
    }
    // Without `from` (or when it lacks the blob) a mount is a plain upload session, as the OCI
    // distribution spec allows (docs/registry.md, "Uploads").

    const rawDigest = c.req.query("digest");
    const digest = rawDigest === undefined ? undefined : checkDigest(rawDigest);
    const algorithm = digestAlgorithm(c.req.query("digest-algorithm"));
    const id = await uploads.start(name, digest?.algorithm ?? algorithm);
    if (digest !== undefined) {
      // A monolithic upload in one POST: the body is the blob.
      try {
        await uploads.finish(name, id, digest, requestBody(c));
      } catch (err) {
        await uploads.cancel(name, id).catch(() => {});
        throw err;
      }
      return blobCreated(c, name, digest);
    }
    return uploadAnswer(c, name, id, 0, 202);
  }

  async function uploadStatus(c: Context, name: string, id: string): Promise<Response> {
    await authorize(c, [pull(name)]);
    checkUploadId(id);
    return uploadAnswer(c, name, id, await uploads.size(name, id), 204);
  }

  async function patchUpload(c: Context, name: string, id: string): Promise<Response> {
    await authorize(c, [push(name)]);
    checkUploadId(id);
    const range = parseContentRange(c.req.header("content-range"));
    checkDeclaredLength(c, range);
    const size = await uploads.append(name, id, requestBody(c), range);
    return uploadAnswer(c, name, id, size, 202);
  }

  async function putUpload(c: Context, name: string, id: string): Promise<Response> {
    await authorize(c, [push(name)]);
    checkUploadId(id);
    const raw = c.req.query("digest");
    if (raw === undefined || raw === "") throw registryError("DIGEST_INVALID", undefined, "the closing PUT needs ?digest=<digest of the whole blob>");
    const digest = checkDigest(raw);
    const range = parseContentRange(c.req.header("content-range"));
    checkDeclaredLength(c, range);
    await uploads.finish(name, id, digest, requestBody(c), range);
    log.info({ repository: name, digest: digest.value }, "blob pushed");
    return blobCreated(c, name, digest);
  }

  async function cancelUpload(c: Context, name: string, id: string): Promise<Response> {
    await authorize(c, [del(name)]);
    checkUploadId(id);
    await uploads.cancel(name, id);
    return c.body(null, 204);
  }

  function uploadAnswer(c: Context, name: string, id: string, size: number, status: 202 | 204): Response {
    const headers: Record<string, string> = { location: uploadLocation(name, id), range: rangeOf(size), "docker-upload-uuid": id };
    if (status === 202) headers["content-length"] = "0";
    return c.body(null, status, headers);
  }

  function blobCreated(c: Context, name: string, digest: Digest): Response {
    return c.body(null, 201, { location: `/v2/${name}/blobs/${digest.value}`, "docker-content-digest": digest.value, "content-length": "0" });
  }

  // ---- referrers

  async function referrers(c: Context, name: string, rawRef: string): Promise<Response> {
    await authorize(c, [pull(name)]);
    const subject = checkDigest(decode(rawRef));
    const artifactType = c.req.query("artifactType") || undefined;
    const index = await listReferrers(links, manifests, name, subject, artifactType);
    const headers: Record<string, string> = { "content-type": mediaTypes.ociIndex };
    if (artifactType !== undefined) headers["oci-filters-applied"] = "artifactType";
    return c.body(JSON.stringify(index), 200, headers);
  }

  return app;
}

// ---- input checks: each a 4xx before anything is read or written

function checkName(raw: string): string {
  if (!isRepositoryName(raw)) throw registryError("NAME_INVALID", { name: raw }, `invalid repository name ${JSON.stringify(raw)}`);
  return raw;
}

function checkDigest(raw: string): Digest {
  const d = parseDigest(raw);
  if (typeof d === "string") throw digestError(d, raw);
  return d;
}

function digestError(problem: "format" | "algorithm", raw: string): RegistryError {
  const why = problem === "algorithm" ? "unsupported digest algorithm (sha256 and sha512 are)" : "malformed digest";
  return registryError("DIGEST_INVALID", { digest: raw }, `${why}: ${JSON.stringify(raw)}`);
}

function checkUploadId(id: string): void {
  if (!isUploadId(id)) throw registryError("BLOB_UPLOAD_UNKNOWN", { uuid: id });
}

function digestAlgorithm(raw: string | undefined): DigestAlgorithm {
  if (raw === undefined || raw === "" || raw === "sha256") return "sha256";
  if (raw === "sha512") return "sha512";
  throw registryError("DIGEST_INVALID", { "digest-algorithm": raw }, `unsupported digest-algorithm ${JSON.stringify(raw)} (sha256 and sha512 are)`);
}

function referenceError(problem: "tag-invalid" | "format" | "algorithm", raw: string): RegistryError {
  return problem === "tag-invalid" ? registryError("TAG_INVALID", { tag: raw }, `invalid tag ${JSON.stringify(raw)}`) : digestError(problem, raw);
}

/**
 * The request target's path as the client sent it: `..` and `.` segments unresolved (the WHATWG URL
 * of the request has them resolved, so `/v2/a/../b/...` would quietly become repository `b`) and
 * escapes kept (names never contain any, so an escaped character fails the name check).
 */
function rawPath(c: Context): string {
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  const target = incoming instanceof IncomingMessage && incoming.url !== undefined ? incoming.url : undefined;
  if (target === undefined) return new URL(c.req.url).pathname;
  const path = target.split("?")[0]!;
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(path) ? path.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, "") || "/" : path;
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function etagMatches(c: Context, digest: Digest): boolean {
  const header = c.req.header("if-none-match");
  if (header === undefined) return false;
  return header.split(",").some((v) => {
    const t = v.trim().replace(/^W\//, "");
    return t === digest.value || t === `"${digest.value}"`;
  });
}

function deleteDisabled(): RegistryError {
  return registryError("UNSUPPORTED", undefined, "deletes are disabled on this registry (storage.delete.enabled)");
}

function unsupported(method: string): never {
  throw registryError("UNSUPPORTED", { method }, `${method} is not supported here`);
}

async function only(method: string, allowed: string[], fn: () => Promise<Response>): Promise<Response> {
  if (!allowed.includes(method)) unsupported(method);
  return fn();
}
