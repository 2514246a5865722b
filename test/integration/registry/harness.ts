// The registry over real HTTP on loopback (127.0.0.1, a free port) on a StorageDriver, a small
// client for its API, test images, and a snapshot of everything in storage (for "nothing
// written" checks). Shared by the conformance suite (driver-parameterised) and the compatibility
// test against distribution.
import { createHash, randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { PathNotFoundError, type StorageDriver } from "../../../adapters/blobstore/driver.ts";
import type { AccessEntry, AuthDecision, RegistryAuthorizer } from "../../../api/registry/access.ts";
import { openRegistry } from "../../../api/registry/access.ts";
import { serveApp, type Served } from "../console/harness.ts";
import { createRegistryApi } from "../../../api/registry/api.ts";

/** A driver over a fresh root, and how to open another one on the same root (a restarted registry). */
export interface DriverFixture {
  driver: StorageDriver;
  reopen(): Promise<StorageDriver>;
  cleanup(): Promise<void>;
}

export type DriverFactory = () => Promise<DriverFixture>;

export type { Served } from "../console/harness.ts";

export interface ServeOptions {
  deleteEnabled?: boolean;
  authorizer?: RegistryAuthorizer;
}

export async function serveRegistry(driver: StorageDriver, opts: ServeOptions = {}): Promise<Served> {
  return serveApp(createRegistryApi({ driver, deleteEnabled: opts.deleteEnabled ?? true, authorizer: opts.authorizer ?? openRegistry }));
}

/** Records every decision asked for; answers with `decide` (everyone in by default). */
export class RecordingAuthorizer implements RegistryAuthorizer {
  readonly asked: { authorization: string | undefined; needed: AccessEntry[] }[] = [];
  decide: (needed: AccessEntry[], authorization: string | undefined) => AuthDecision = () => ({ ok: true });

  async authorize(authorization: string | undefined, needed: AccessEntry[]): Promise<AuthDecision> {
    this.asked.push({ authorization, needed });
    return this.decide(needed, authorization);
  }
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  json<T = Record<string, unknown>>(): T;
}

export interface ErrorsBody {
  errors: { code: string; message: string; detail?: unknown }[];
}

export class Client {
  constructor(readonly base: string) {}

  async req(method: string, path: string, opts: { headers?: Record<string, string>; body?: Uint8Array | string } = {}): Promise<Answer> {
    const url = path.startsWith("http") ? path : this.base + path;
    const res = await fetch(url, { method, headers: opts.headers, body: opts.body as string | undefined, signal: AbortSignal.timeout(30_000) });
    const body = Buffer.from(await res.arrayBuffer());
    const text = body.toString("utf8");
    return { status: res.status, headers: res.headers, body, text, json: <T>() => JSON.parse(text) as T };
  }

  /** A request with the path sent exactly as given (fetch would resolve `..` and `.` segments first). */
  raw(method: string, path: string, body?: Uint8Array | string): Promise<{ status: number; text: string }> {
    const { hostname, port } = new URL(this.base);
    return new Promise((resolve, reject) => {
      const req = httpRequest({ hostname, port, method, path, headers: body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  /** Resolve a Location header (relative or absolute) against the registry. */
  url(location: string | null): string {
    if (location === null) throw new Error("no Location header");
    return new URL(location, this.base).toString();
  }

  /** Monolithic POST ?digest= (201). */
  async pushBlob(repo: string, bytes: Uint8Array, algorithm: "sha256" | "sha512" = "sha256"): Promise<string> {
    const digest = digestOf(bytes, algorithm);
    const res = await this.req("POST", `/v2/${repo}/blobs/uploads/?digest=${digest}`, { body: bytes, headers: { "content-type": "application/octet-stream" } });
    if (res.status !== 201) throw new Error(`push blob to ${repo}: ${res.status} ${res.text}`);
    return digest;
  }

  async pushManifest(repo: string, ref: string, bytes: Uint8Array | string, mediaType: string): Promise<Answer> {
    return this.req("PUT", `/v2/${repo}/manifests/${ref}`, { body: bytes, headers: { "content-type": mediaType } });
  }

  /** Push config + layers + manifest (tagged `tag`); the image's digests. */
  /** The image by `ref` (tag or digest): its manifest, and every blob with the bytes pushed. */
  async pullsCompletely(repo: string, ref: string, image: TestImage): Promise<boolean> {
    const m = await this.req("GET", `/v2/${repo}/manifests/${ref}`, { headers: { accept: image.mediaType } });
    if (m.status !== 200) return false;
    for (const b of image.blobs) {
      const r = await this.req("GET", `/v2/${repo}/blobs/${digestOf(b)}`);
      if (r.status !== 200 || !r.body.equals(b)) return false;
    }
    return true;
  }

  async pushImage(repo: string, tag: string, image: TestImage): Promise<string> {
    for (const blob of image.blobs) await this.pushBlob(repo, blob);
    const res = await this.pushManifest(repo, tag, image.manifest, image.mediaType);
    if (res.status !== 201) throw new Error(`push manifest ${repo}:${tag}: ${res.status} ${res.text}`);
    return image.digest;
  }
}

export function digestOf(bytes: Uint8Array | string, algorithm: "sha256" | "sha512" = "sha256"): string {
  return `${algorithm}:${createHash(algorithm).update(bytes).digest("hex")}`;
}

export const mt = {
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  ociIndex: "application/vnd.oci.image.index.v1+json",
  ociConfig: "application/vnd.oci.image.config.v1+json",
  ociLayer: "application/vnd.oci.image.layer.v1.tar+gzip",
  ociEmpty: "application/vnd.oci.empty.v1+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  dockerConfig: "application/vnd.docker.container.image.v1+json",
  dockerLayer: "application/vnd.docker.image.rootfs.diff.tar.gzip",
} as const;

export interface TestImage {
  /** Config first, then the layers. */
  blobs: Buffer[];
  manifest: string;
  mediaType: string;
  digest: string;
}

export interface ImageOptions {
  layers?: number;
  layerSize?: number;
  docker?: boolean;
  subject?: { digest: string; size: number; mediaType: string };
  artifactType?: string;
  annotations?: Record<string, string>;
  /** Config media type (an artifact's). */
  configType?: string;
}

/** A small image (random layers), OCI unless `docker`. */
export function makeImage(opts: ImageOptions = {}): TestImage {
  const layers = Array.from({ length: opts.layers ?? 2 }, () => randomBytes(opts.layerSize ?? 1024));
  const config = Buffer.from(
    JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: layers.map((l) => digestOf(l)) }, nonce: randomBytes(8).toString("hex") }),
  );
  const desc = (mediaType: string, b: Buffer) => ({ mediaType, digest: digestOf(b), size: b.byteLength });
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: opts.docker ? mt.dockerManifest : mt.ociManifest,
    ...(opts.artifactType !== undefined && { artifactType: opts.artifactType }),
    config: desc(opts.configType ?? (opts.docker ? mt.dockerConfig : mt.ociConfig), config),
    layers: layers.map((l) => desc(opts.docker ? mt.dockerLayer : mt.ociLayer, l)),
    ...(opts.subject !== undefined && { subject: opts.subject }),
    ...(opts.annotations !== undefined && { annotations: opts.annotations }),
  });
  return { blobs: [config, ...layers], manifest, mediaType: opts.docker ? mt.dockerManifest : mt.ociManifest, digest: digestOf(manifest) };
}

/** An index (OCI, or a Docker manifest list) over `children` (linux/amd64, linux/arm64, ...). */
export function makeIndex(children: TestImage[], opts: { docker?: boolean; subject?: ImageOptions["subject"]; artifactType?: string } = {}): { manifest: string; mediaType: string; digest: string } {
  const arches = ["amd64", "arm64", "s390x", "ppc64le"];
  const mediaType = opts.docker ? mt.dockerList : mt.ociIndex;
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType,
    ...(opts.artifactType !== undefined && { artifactType: opts.artifactType }),
    manifests: children.map((c, i) => ({ mediaType: c.mediaType, digest: c.digest, size: Buffer.byteLength(c.manifest), platform: { os: "linux", architecture: arches[i % arches.length] } })),
    ...(opts.subject !== undefined && { subject: opts.subject }),
  });
  return { manifest, mediaType, digest: digestOf(manifest) };
}

/** Every object in storage with its size: equal snapshots mean nothing was written or removed. */
export async function snapshot(driver: StorageDriver, dir = "/"): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let children: string[];
  try {
    children = await driver.list(dir);
  } catch (err) {
    if (err instanceof PathNotFoundError) return out;
    throw err;
  }
  for (const child of children) {
    const info = await driver.stat(child);
    if (info.isDir) for (const [k, v] of await snapshot(driver, child)) out.set(k, v);
    else out.set(child, info.size);
  }
  return out;
}
