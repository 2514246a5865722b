// A registry tree written straight to disk in distribution's filesystem layout (docs/registry.md,
// "Layout"; the paths are api/resources/registry-paths.ts's), for garbage-collection benchmarks and tests:
// no registry runs while it is written, so a 27,000-blob tree takes seconds instead of the minutes
// that pushing it would.
//
// What is in it (all deterministic given the seed; the digests are the real sha256 of the bytes):
//
// - `repositories` repositories named `org<NN>/app<NNNN>`, each with `manifestsPerRepository` OCI
//   image manifests (schema 2, mediaType set, as pushed by a client): a config blob (a small image
//   config JSON) and 2 to 6 layers. The first one or two layers come from a pool of shared base
//   layers (the base images many repositories build on), then, when a repository has one, a layer
//   shared by all of that repository's manifests (its dependencies), then layers of the manifest's
//   own. Every config and layer has a `_layers` link in each repository whose manifests use it,
//   every manifest a revision link, as a push leaves them.
// - Tags: manifest i (oldest first) is tagged `1.<i>.0`, the newest also `latest`, and `latest`'s
//   index lists every manifest of the repository (it moved at each push). In a fraction of the
//   repositories the oldest one or two manifests are untagged (their version tag was deleted):
//   still referenced by their revision link, garbage only for a collector that deletes untagged
//   manifests (distribution's `garbage-collect --delete-untagged`).
// - Garbage even without that: in a fraction of the repositories one more manifest was deleted by
//   digest (revision link and tags gone, its blob, config and own layers stay, with their `_layers`
//   links, as distribution and Capstan leave them), and orphan blobs (uploads whose manifest never
//   came; half with a `_layers` link in some repository, half without) fill the tree up to `blobs`.
//
// Blob contents are small (64 to 512 random bytes for layers) so that writing is fast; the
// summary counts what was written and lists the blobs each kind of collector should delete.
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { join } from "node:path";
import * as paths from "../../api/resources/registry-paths.ts";
import type { Digest } from "../../api/resources/registry-names.ts";

export interface GenerateOptions {
  repositories: number;
  manifestsPerRepository: number;
  seed: number;
  /** Blob files in all (manifests, configs, layers, orphans); orphans fill up to it. Default 27 per repository. */
  blobs?: number;
  /** Orphan blobs at least, whatever `blobs` says. Default 2 % of the image blobs. */
  minOrphans?: number;
  /** Shared base layers. Default max(4, repositories / 25). */
  baseLayers?: number;
  /** Share of the repositories whose oldest manifests are untagged. Default 0.2. */
  untaggedFraction?: number;
  /** Share of the repositories holding a manifest deleted by digest. Default 0.1. */
  deletedFraction?: number;
  /** Layer sizes, bytes. Default 64 to 512. */
  minLayerBytes?: number;
  maxLayerBytes?: number;
  /** Threads writing the files. Default the cores, at most 4. */
  writers?: number;
}

export type ManifestState = "tagged" | "untagged" | "deleted";

export interface GeneratedManifest {
  repository: string;
  digest: string;
  /** Tags pointing at it now (none when untagged or deleted). */
  tags: string[];
  /** Config first, then the layers. */
  blobs: string[];
  /** "deleted": no revision link (nothing references it); "untagged": a revision link but no tag. */
  state: ManifestState;
}

export interface TreeSummary {
  /** The registry's rootdirectory (the tree is under <root>/docker/registry/v2). */
  root: string;
  seed: number;
  repositories: number;
  /** Manifests with a revision link (what a mark walks): tagged + untagged. */
  manifests: number;
  taggedManifests: number;
  untaggedManifests: number;
  /** Manifests deleted by digest: their blobs are on disk, nothing links the manifest. */
  deletedManifests: number;
  /** Tags with a current link. */
  tags: number;
  /** Blob data files and their bytes. */
  blobs: number;
  bytes: number;
  /** Orphan blobs (never referenced by a manifest), included in `blobs`. */
  orphanBlobs: number;
  /** Files written (blob data and every link). */
  files: number;
  /** Blobs no manifest with a revision link references: what a mark and sweep deletes. */
  garbage: { blobs: string[]; bytes: number };
  /** The same when untagged manifests are deleted too (distribution's --delete-untagged). */
  garbageUntagged: { blobs: string[]; bytes: number; manifests: number };
  /** Every manifest, deleted ones included, in repository order. */
  manifestList: GeneratedManifest[];
  /** Wall time of writing the files, ms. */
  writeMs: number;
}

const ociManifest = "application/vnd.oci.image.manifest.v1+json";
const ociConfig = "application/vnd.oci.image.config.v1+json";
const ociLayer = "application/vnd.oci.image.layer.v1.tar+gzip";

/** sfc32: a small seeded generator; the same seed gives the same tree. */
class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88;
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 16; i++) this.next();
  }

  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + (this.next() % (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }

  bytes(n: number): Buffer {
    const b = Buffer.allocUnsafe(n + 3);
    for (let i = 0; i < n; i += 4) b.writeUInt32LE(this.next(), i);
    return b.subarray(0, n);
  }
}

function digestOf(bytes: Uint8Array): Digest {
  const hex = createHash("sha256").update(bytes).digest("hex");
  return { algorithm: "sha256", hex, value: `sha256:${hex}` };
}

interface Blob {
  digest: Digest;
  content: Buffer;
  mediaType: string;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

/**
 * Writes the tree under `root` (made if missing; expected empty) and answers what it holds.
 */
export async function generateTree(root: string, opts: GenerateOptions): Promise<TreeSummary> {
  const rng = new Rng(opts.seed);
  const targetBlobs = opts.blobs ?? 27 * opts.repositories;
  const baseCount = opts.baseLayers ?? Math.max(4, Math.round(opts.repositories / 25));
  const untaggedFraction = opts.untaggedFraction ?? 0.2;
  const deletedFraction = opts.deletedFraction ?? 0.1;
  const minLayer = opts.minLayerBytes ?? 64;
  const maxLayer = opts.maxLayerBytes ?? 512;
  const created = Date.UTC(2026, 0, 1) + (opts.seed % 1000) * 86_400_000;

  const blobs = new Map<string, Blob>();
  /** Driver path -> content, in the order generated. */
  const files = new Map<string, Buffer>();
  const addBlob = (content: Buffer, mediaType: string): Blob => {
    const digest = digestOf(content);
    const existing = blobs.get(digest.value);
    if (existing) return existing;
    const b = { digest, content, mediaType };
    blobs.set(digest.value, b);
    files.set(paths.blobData(digest), content);
    return b;
  };
  const link = (path: string, d: Digest) => files.set(path, Buffer.from(d.value));
  const layer = () => addBlob(rng.bytes(rng.int(minLayer, maxLayer)), ociLayer);

  // Base images: one or two layers each, drawn from the shared pool.
  const basePool = Array.from({ length: baseCount }, layer);
  const baseImages: Blob[][] = Array.from({ length: Math.max(2, Math.ceil(baseCount / 2)) }, (_, i) =>
    rng.chance(0.5) ? [basePool[(2 * i) % baseCount]!] : [basePool[(2 * i) % baseCount]!, basePool[(2 * i + 1) % baseCount]!],
  );

  const manifestList: GeneratedManifest[] = [];
  const repositoryNames: string[] = [];
  let tags = 0;
  const makeManifest = (name: string, index: number, base: Blob[], shared: Blob | undefined): { digest: Digest; blobs: Blob[] } => {
    const n = rng.int(2, 6);
    const layers: Blob[] = base.slice(0, n - 1);
    if (shared && layers.length < n - 1) layers.push(shared);
    while (layers.length < n) layers.push(layer());
    const config = addBlob(
      Buffer.from(
        JSON.stringify({
          created: new Date(created + index * 3_600_000).toISOString(),
          architecture: "amd64",
          os: "linux",
          config: { Env: [`APP=${name}`, `BUILD=${index}`], Cmd: ["/app"], Labels: { nonce: rng.next().toString(16) } },
          rootfs: { type: "layers", diff_ids: layers.map((l) => l.digest.value) },
        }),
      ),
      ociConfig,
    );
    const desc = (b: Blob) => ({ mediaType: b.mediaType, digest: b.digest.value, size: b.content.length });
    const manifest = addBlob(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: ociManifest, config: desc(config), layers: layers.map(desc) })), ociManifest);
    for (const b of [config, ...layers]) link(paths.layerLink(name, b.digest), b.digest);
    return { digest: manifest.digest, blobs: [config, ...layers] };
  };

  for (let r = 0; r < opts.repositories; r++) {
    const name = `org${pad(r % 40, 2)}/app${pad(r, 4)}`;
    repositoryNames.push(name);
    let base = baseImages[rng.int(0, baseImages.length - 1)]!;
    const shared = rng.chance(0.6) ? layer() : undefined;
    const untagged = rng.chance(untaggedFraction) ? Math.min(rng.int(1, 2), opts.manifestsPerRepository - 1) : 0;
    const deletedAt = rng.chance(deletedFraction) ? rng.int(0, opts.manifestsPerRepository - 1) : -1;
    const history: Digest[] = [];
    for (let i = 0; i < opts.manifestsPerRepository; i++) {
      // Now and then the repository moves to another base image.
      if (rng.chance(0.15)) base = baseImages[rng.int(0, baseImages.length - 1)]!;
      if (i === deletedAt) {
        // Pushed, tagged, then deleted by digest: its tag went with it, `latest` moved on.
        const m = makeManifest(name, 100 + i, base, shared);
        history.push(m.digest);
        manifestList.push({ repository: name, digest: m.digest.value, tags: [], blobs: m.blobs.map((b) => b.digest.value), state: "deleted" });
      }
      const m = makeManifest(name, i, base, shared);
      history.push(m.digest);
      link(paths.revisionLink(name, m.digest), m.digest);
      const newest = i === opts.manifestsPerRepository - 1;
      const isUntagged = i < untagged;
      const manifestTags = isUntagged ? [] : [`1.${i}.0`, ...(newest ? ["latest"] : [])];
      for (const tag of manifestTags) {
        link(paths.tagCurrentLink(name, tag), m.digest);
        if (tag !== "latest") link(paths.tagIndexLink(name, tag, m.digest), m.digest);
        tags++;
      }
      manifestList.push({ repository: name, digest: m.digest.value, tags: manifestTags, blobs: m.blobs.map((b) => b.digest.value), state: isUntagged ? "untagged" : "tagged" });
    }
    for (const d of history) link(paths.tagIndexLink(name, "latest", d), d);
  }

  // Orphans: uploads whose manifest never came, half of them linked in a repository.
  const imageBlobs = blobs.size;
  const orphans = Math.max(targetBlobs - imageBlobs, opts.minOrphans ?? Math.ceil(imageBlobs * 0.02));
  for (let i = 0; i < orphans; i++) {
    const b = layer();
    if (rng.chance(0.5)) link(paths.layerLink(repositoryNames[rng.int(0, repositoryNames.length - 1)]!, b.digest), b.digest);
  }

  const marked = new Set<string>();
  const markedTagged = new Set<string>();
  for (const m of manifestList) {
    if (m.state === "deleted") continue;
    for (const d of [m.digest, ...m.blobs]) {
      marked.add(d);
      if (m.state === "tagged") markedTagged.add(d);
    }
  }
  const garbage = [...blobs.keys()].filter((d) => !marked.has(d));
  const garbageUntagged = [...blobs.keys()].filter((d) => !markedTagged.has(d));
  const bytesOf = (ds: string[]) => ds.reduce((s, d) => s + blobs.get(d)!.content.length, 0);

  const t0 = performance.now();
  await writeFiles(root, files, Math.max(1, opts.writers ?? Math.min(4, availableParallelism())));
  const writeMs = performance.now() - t0;

  const count = (s: ManifestState) => manifestList.filter((m) => m.state === s).length;
  return {
    root,
    seed: opts.seed,
    repositories: opts.repositories,
    manifests: count("tagged") + count("untagged"),
    taggedManifests: count("tagged"),
    untaggedManifests: count("untagged"),
    deletedManifests: count("deleted"),
    tags,
    blobs: blobs.size,
    bytes: bytesOf([...blobs.keys()]),
    orphanBlobs: orphans,
    files: files.size,
    garbage: { blobs: garbage, bytes: bytesOf(garbage) },
    garbageUntagged: { blobs: garbageUntagged, bytes: bytesOf(garbageUntagged), manifests: count("untagged") },
    manifestList,
    writeMs,
  };
}

/**
 * Blobs that become garbage when `deleted` manifests lose their revision links (deleted by digest),
 * given the tree's other manifests: the manifests themselves and every config and layer no
 * remaining manifest (tagged or untagged) references.
 */
export function garbageAfterDeleting(summary: TreeSummary, deleted: GeneratedManifest[]): string[] {
  const gone = new Set(deleted.map((m) => `${m.repository}@${m.digest}`));
  const stillMarked = new Set<string>();
  for (const m of summary.manifestList) {
    if (m.state === "deleted" || gone.has(`${m.repository}@${m.digest}`)) continue;
    stillMarked.add(m.digest);
    for (const b of m.blobs) stillMarked.add(b);
  }
  const out = new Set<string>();
  for (const m of deleted) for (const d of [m.digest, ...m.blobs]) if (!stillMarked.has(d)) out.add(d);
  return [...out];
}

/**
 * The tree is split into disjoint subtrees (blobs/sha256/<xx>, repositories/<first name component>),
 * dealt out to worker threads that make each directory once, parents first, and write the files
 * with synchronous calls. 27,000 blobs and their links are ~93,000 directories and ~69,000 files;
 * on the 2-core CI machine kind (ext4, quiet disk) four such threads took 3.8 s, one 8 s, and
 * async calls through libuv's pool about 20 s. A busy disk multiplies all of these.
 */
async function writeFiles(root: string, files: Map<string, Buffer>, workers: number): Promise<void> {
  const parts: { dirs: Set<string>; files: [string, Buffer][] }[] = Array.from({ length: workers }, () => ({ dirs: new Set(), files: [] }));
  const above = new Set<string>();
  const blobsPrefix = `${paths.root}/blobs/`;
  for (const [p, content] of files) {
    // The subtree root: blobs/<alg>/<xx> or repositories/<first component>.
    const rest = p.startsWith(blobsPrefix) ? p.slice(blobsPrefix.length).split("/", 2) : p.slice(paths.repositoriesRoot.length + 1).split("/", 1);
    const subtree = p.startsWith(blobsPrefix) ? `${blobsPrefix}${rest.join("/")}` : `${paths.repositoriesRoot}/${rest[0]}`;
    above.add(subtree.slice(0, subtree.lastIndexOf("/")));
    const part = parts[hashOf(subtree) % workers]!;
    part.files.push([p, content]);
    for (let i = p.lastIndexOf("/"); i >= subtree.length; i = p.lastIndexOf("/", i - 1)) {
      const d = p.slice(0, i);
      if (part.dirs.has(d)) break;
      part.dirs.add(d);
    }
  }
  for (const d of above) await mkdir(join(root, d), { recursive: true });
  await Promise.all(
    parts.map(
      (part) =>
        new Promise<void>((resolve, reject) => {
          // Plain JavaScript: the worker needs no TypeScript loader.
          const w = new Worker(workerSource, {
            eval: true,
            workerData: { root, dirs: [...part.dirs].sort((a, b) => a.length - b.length), files: part.files },
          });
          w.once("message", () => resolve());
          w.once("error", reject);
          w.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`tree writer exited with ${code}`))));
        }),
    ),
  );
}

const workerSource = `
const { mkdirSync, writeFileSync } = require("node:fs");
const { workerData, parentPort } = require("node:worker_threads");
const { root, dirs, files } = workerData;
for (const d of dirs) mkdirSync(root + d);
for (const [p, content] of files) writeFileSync(root + p, content);
parentPort.postMessage("done");
`;

function hashOf(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}
