// Writers pushing small images over HTTP, and the check afterwards that every image whose push
// succeeded still pulls completely (docs/registry.md, "Endpoints"). A minimal OCI push client on
// undici's Pool (keep-alive; not fetch, which costs the load generator several times the CPU per
// request on a machine whose cores it shares with the registry under test):
//
//   for each blob (config, a shared layer, a fresh layer), at once:
//     HEAD /v2/<name>/blobs/<d>   200: skipped (the registry has it; the client relies on it)
//     else POST /v2/<name>/blobs/uploads/ (202, Location), PUT <Location>?digest=<d> with the bytes (201)
//   then PUT /v2/<name>/manifests/<tag> (OCI image manifest, 201)
//
// The shared layers come from a small pool, so after a repository's first push of each, its HEAD
// answers 200 and the upload is skipped: the HEAD-then-skip path a collector must not break.
import { createHash, randomBytes } from "node:crypto";
import { Pool } from "undici";

const ociManifest = "application/vnd.oci.image.manifest.v1+json";
const ociConfig = "application/vnd.oci.image.config.v1+json";
const ociLayer = "application/vnd.oci.image.layer.v1.tar+gzip";
const manifestAccept = [ociManifest, "application/vnd.docker.distribution.manifest.v2+json"].join(", ");

export interface PushedImage {
  repository: string;
  tag: string;
  manifestDigest: string;
  /** Config, then the layers. */
  blobs: string[];
  /** Which window pushed it ("warm-up", "no-gc", "gc"). */
  window: string;
  /** When its manifest PUT answered (performance.now()). */
  at: number;
}

interface BlobToPush {
  digest: string;
  content: Buffer;
  mediaType: string;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

class PushError extends Error {
  constructor(
    readonly step: string,
    readonly status: number,
    detail: string,
  ) {
    super(`${step}: ${status} ${detail}`);
  }
}

function sha256(b: Uint8Array): string {
  return `sha256:${createHash("sha256").update(b).digest("hex")}`;
}

/** A keep-alive connection pool to one registry. */
export class RegistryClient {
  private readonly pool: Pool;

  constructor(
    readonly base: string,
    connections = 16,
  ) {
    this.pool = new Pool(base, { connections, keepAliveTimeout: 30_000, headersTimeout: 60_000, bodyTimeout: 60_000 });
  }

  async call(method: "GET" | "HEAD" | "POST" | "PUT" | "DELETE", path: string, o: { headers?: Record<string, string>; body?: Buffer; timeoutMs?: number } = {}): Promise<Answer> {
    const res = await this.pool.request({
      path,
      method,
      headers: o.headers ?? {},
      ...(o.body !== undefined && { body: o.body }),
      signal: AbortSignal.timeout(o.timeoutMs ?? 30_000),
    });
    const body = method === "HEAD" ? Buffer.alloc(0) : Buffer.from(await res.body.arrayBuffer());
    if (method === "HEAD") await res.body.dump();
    return { status: res.statusCode, headers: res.headers, body };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** Counts of what the client did, over all its pushes. */
export interface PushCounters {
  headSkipped: number;
  uploaded: number;
}

async function pushBlob(c: RegistryClient, repository: string, b: BlobToPush, counters: PushCounters): Promise<void> {
  const head = await c.call("HEAD", `/v2/${repository}/blobs/${b.digest}`);
  if (head.status === 200) {
    counters.headSkipped++;
    return;
  }
  if (head.status !== 404) throw new PushError("HEAD blob", head.status, "");
  const post = await c.call("POST", `/v2/${repository}/blobs/uploads/`, { headers: { "content-length": "0" } });
  const location = post.headers.location;
  if (post.status !== 202 || typeof location !== "string") throw new PushError("POST upload", post.status, post.body.toString("utf8").slice(0, 200));
  const url = new URL(location, c.base);
  url.searchParams.set("digest", b.digest);
  const put = await c.call("PUT", `${url.pathname}${url.search}`, {
    headers: { "content-type": "application/octet-stream", "content-length": String(b.content.length) },
    body: b.content,
  });
  if (put.status !== 201) throw new PushError("PUT upload", put.status, put.body.toString("utf8").slice(0, 200));
  counters.uploaded++;
}

/** One image: its blobs at once, then the manifest by tag. Throws a PushError naming the failed step. */
export async function pushImage(c: RegistryClient, repository: string, tag: string, blobs: BlobToPush[], counters: PushCounters): Promise<string> {
  await Promise.all(blobs.map((b) => pushBlob(c, repository, b, counters)));
  const [config, ...layers] = blobs;
  const desc = (b: BlobToPush) => ({ mediaType: b.mediaType, digest: b.digest, size: b.content.length });
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: ociManifest, config: desc(config!), layers: layers.map(desc) }));
  const put = await c.call("PUT", `/v2/${repository}/manifests/${tag}`, { headers: { "content-type": ociManifest, "content-length": String(manifest.length) }, body: manifest });
  if (put.status !== 201) throw new PushError("PUT manifest", put.status, put.body.toString("utf8").slice(0, 200));
  return sha256(manifest);
}

/** `count` random layers of `bytes` each, shared by every writer's images. */
export function sharedLayers(count: number, bytes = 2048): BlobToPush[] {
  return Array.from({ length: count }, () => {
    const content = randomBytes(bytes);
    return { digest: sha256(content), content, mediaType: ociLayer };
  });
}

/** A fresh image: a unique config, one layer from the shared pool, one fresh random layer (1-4 KiB). */
function makeImage(writer: number, seq: number, shared: BlobToPush[]): BlobToPush[] {
  const fresh = randomBytes(1024 + Math.floor(Math.random() * 3072));
  const sharedLayer = shared[Math.floor(Math.random() * shared.length)]!;
  const config = Buffer.from(
    JSON.stringify({
      created: new Date().toISOString(),
      architecture: "amd64",
      os: "linux",
      config: { Labels: { writer: String(writer), seq: String(seq), nonce: randomBytes(8).toString("hex") } },
      rootfs: { type: "layers", diff_ids: [sharedLayer.digest, sha256(fresh)] },
    }),
  );
  return [
    { digest: sha256(config), content: config, mediaType: ociConfig },
    sharedLayer,
    { digest: sha256(fresh), content: fresh, mediaType: ociLayer },
  ];
}

export interface WindowResult {
  window: string;
  images: PushedImage[];
  /** Pushes that failed, by step and status ("PUT manifest 400"). */
  failures: Record<string, number>;
  failed: number;
  /** From the start to the last writer's end (a push running at the deadline finishes). */
  seconds: number;
  pushesPerSecond: number;
  counters: PushCounters;
}

/**
 * `writers` writers push images back to back for `durationMs`, writer w to `repositoryOf(w)` with
 * tags `<tagPrefix>-w<w>-<n>`. A failed push is counted and the writer goes on (after 20 ms).
 */
export async function pushWindow(
  c: RegistryClient,
  o: { window: string; writers: number; durationMs: number; repositoryOf: (w: number) => string; tagPrefix: string; shared: BlobToPush[] },
): Promise<WindowResult> {
  const images: PushedImage[] = [];
  const failures: Record<string, number> = {};
  let failed = 0;
  const counters: PushCounters = { headSkipped: 0, uploaded: 0 };
  const t0 = performance.now();
  const end = t0 + o.durationMs;
  await Promise.all(
    Array.from({ length: o.writers }, async (_, w) => {
      const repository = o.repositoryOf(w);
      for (let n = 0; performance.now() < end; n++) {
        const tag = `${o.tagPrefix}-w${w}-${n}`;
        const blobs = makeImage(w, n, o.shared);
        try {
          const manifestDigest = await pushImage(c, repository, tag, blobs, counters);
          images.push({ repository, tag, manifestDigest, blobs: blobs.map((b) => b.digest), window: o.window, at: performance.now() });
        } catch (err) {
          failed++;
          const key = err instanceof PushError ? `${err.step} ${err.status}` : (err as Error).name || "error";
          failures[key] = (failures[key] ?? 0) + 1;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { window: o.window, images, failures, failed, seconds, pushesPerSecond: images.length / seconds, counters };
}

export interface VerifyResult {
  checked: number;
  lost: number;
  /** Lost images by window. */
  lostByWindow: Record<string, number>;
  /** Why, by kind ("manifest 404", "blob 404", "blob digest"). */
  reasons: Record<string, number>;
  /** A few of the lost, for the log. */
  examples: string[];
}

/**
 * Pull every image: its manifest by tag (the bytes must hash to the digest pushed) and each blob
 * (the bytes must hash to its digest). An image failing any of it is lost. A blob is fetched once
 * per repository.
 */
export async function verifyImages(c: RegistryClient, images: PushedImage[], concurrency = 8): Promise<VerifyResult> {
  const blobChecks = new Map<string, Promise<string | undefined>>();
  const checkBlob = (repository: string, digest: string): Promise<string | undefined> => {
    const key = `${repository}@${digest}`;
    let p = blobChecks.get(key);
    if (p === undefined) {
      p = c.call("GET", `/v2/${repository}/blobs/${digest}`, { timeoutMs: 60_000 }).then((r) => (r.status !== 200 ? `blob ${r.status}` : sha256(r.body) !== digest ? "blob digest" : undefined));
      blobChecks.set(key, p);
    }
    return p;
  };
  const result: VerifyResult = { checked: 0, lost: 0, lostByWindow: {}, reasons: {}, examples: [] };
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < images.length) {
        const img = images[next++]!;
        let reason: string | undefined;
        const m = await c.call("GET", `/v2/${img.repository}/manifests/${img.tag}`, { headers: { accept: manifestAccept }, timeoutMs: 60_000 });
        if (m.status !== 200) reason = `manifest ${m.status}`;
        else if (sha256(m.body) !== img.manifestDigest) reason = "manifest digest";
        else for (const d of img.blobs) if ((reason = await checkBlob(img.repository, d)) !== undefined) break;
        result.checked++;
        if (reason !== undefined) {
          result.lost++;
          result.lostByWindow[img.window] = (result.lostByWindow[img.window] ?? 0) + 1;
          result.reasons[reason] = (result.reasons[reason] ?? 0) + 1;
          if (result.examples.length < 5) result.examples.push(`${img.repository}:${img.tag} (${reason})`);
        }
      }
    }),
  );
  return result;
}
