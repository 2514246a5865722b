// The registry bench's image: an OCI image layout directory (oci-layout, index.json, blobs/sha256/)
// holding one image tagged `img` with a single layer: a tar of one file of random (incompressible)
// bytes, gzip level 1 as `gzip -1` writes it (docs/benchmarks.md, "registry"). Gzipped because
// skopeo compresses an uncompressed layer on its way to a docker:// destination, and that gzip
// would cost more than the transfer being measured. Made once per run, streamed (never whole in
// memory).
import { createHash, randomFillSync } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";

export const imageTag = "img";

const mediaTypes = {
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layer: "application/vnd.oci.image.layer.v1.tar+gzip",
};

export interface BenchImage {
  /** The layout directory: `oci:<dir>:img`. */
  dir: string;
  /** Bytes of the file inside the layer's tar. */
  contentBytes: number;
  /** Bytes of the gzipped layer as pushed. */
  layerBytes: number;
  layerDigest: string;
  manifestDigest: string;
}

/** A 512-byte ustar header of a regular file. */
function tarHeader(name: string, size: number): Buffer {
  const h = Buffer.alloc(512);
  const field = (offset: number, length: number, value: string) => h.write(value, offset, length, "ascii");
  const octal = (offset: number, length: number, value: number) => field(offset, length, value.toString(8).padStart(length - 1, "0") + "\0");
  field(0, 100, name);
  octal(100, 8, 0o644);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, 0);
  field(148, 8, "        ");
  field(156, 1, "0");
  field(257, 6, "ustar\0");
  field(263, 2, "00");
  let sum = 0;
  for (const b of h) sum += b;
  field(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

function sha256(b: Buffer | string): string {
  return createHash("sha256").update(b).digest("hex");
}

/** Write the layout to `dir` (created): one image whose layer holds `contentBytes` random bytes. */
export async function makeImage(dir: string, contentBytes: number): Promise<BenchImage> {
  const blobs = join(dir, "blobs", "sha256");
  await mkdir(blobs, { recursive: true });
  const tarHash = createHash("sha256");
  const layerHash = createHash("sha256");
  let layerBytes = 0;
  const gzip = createGzip({ level: 1 });
  const partial = join(blobs, "layer.partial");
  const written = pipeline(
    gzip,
    new Transform({
      transform(chunk: Buffer, _enc, done) {
        layerHash.update(chunk);
        layerBytes += chunk.length;
        done(null, chunk);
      },
    }),
    createWriteStream(partial),
  );
  const feed = async (chunk: Buffer) => {
    tarHash.update(chunk);
    if (!gzip.write(chunk)) await once(gzip, "drain");
  };
  await feed(tarHeader("data.bin", contentBytes));
  const chunkSize = 1 << 20;
  for (let left = contentBytes; left > 0; left -= chunkSize) {
    await feed(randomFillSync(Buffer.allocUnsafe(Math.min(chunkSize, left))));
  }
  const pad = (512 - (contentBytes % 512)) % 512;
  await feed(Buffer.alloc(pad + 1024)); // the file's padding, then the two zero blocks that end a tar
  gzip.end();
  await written;
  const layerHex = layerHash.digest("hex");
  await rename(partial, join(blobs, layerHex));

  const config = JSON.stringify({
    architecture: "amd64",
    os: "linux",
    config: {},
    rootfs: { type: "layers", diff_ids: [`sha256:${tarHash.digest("hex")}`] },
  });
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: mediaTypes.manifest,
    config: { mediaType: mediaTypes.config, digest: `sha256:${sha256(config)}`, size: Buffer.byteLength(config) },
    layers: [{ mediaType: mediaTypes.layer, digest: `sha256:${layerHex}`, size: layerBytes }],
  });
  await writeFile(join(blobs, sha256(config)), config);
  await writeFile(join(blobs, sha256(manifest)), manifest);
  await writeFile(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  await writeFile(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [{ mediaType: mediaTypes.manifest, digest: `sha256:${sha256(manifest)}`, size: Buffer.byteLength(manifest), annotations: { "org.opencontainers.image.ref.name": imageTag } }],
    }),
  );
  return { dir, contentBytes, layerBytes, layerDigest: `sha256:${layerHex}`, manifestDigest: `sha256:${sha256(manifest)}` };
}

/** A file of `bytes` random bytes at `path`, for raw blob pushes: its sha256 digest. */
export async function makeRandomFile(path: string, bytes: number): Promise<string> {
  const hash = createHash("sha256");
  const out = createWriteStream(path);
  const chunkSize = 1 << 20;
  for (let left = bytes; left > 0; left -= chunkSize) {
    const chunk = randomFillSync(Buffer.allocUnsafe(Math.min(chunkSize, left)));
    hash.update(chunk);
    if (!out.write(chunk)) await once(out, "drain");
  }
  out.end();
  await once(out, "finish");
  return `sha256:${hash.digest("hex")}`;
}
