// Compatibility with distribution on disk (docs/registry.md, "Layout"): Debian's docker-registry
// (distribution 2.8.2) writes a root, skopeo pushing a small image from an OCI layout made here;
// then Capstan serves that same root and skopeo pulls the image back intact. And the other way:
// what Capstan writes, distribution serves. Loopback only; both registries run on 127.0.0.1.
//
// Needs /usr/bin/docker-registry and skopeo. When they are missing the test tries
// `apt-get install -y docker-registry skopeo` (as root, `apt-get update` first if needed) and
// is skipped, saying why, when that is not possible.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { pack } from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { Client, mt, serveRegistry, type Served } from "./harness.ts";

const run = promisify(execFile);
const registryBin = "/usr/bin/docker-registry";

async function which(cmd: string): Promise<string | undefined> {
  try {
    return (await run("sh", ["-c", `command -v ${cmd}`])).stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

/** undefined when both tools are there (installing them if possible); else why the test is skipped. */
async function ensureTools(): Promise<string | undefined> {
  const missing = async () => [...(existsSync(registryBin) ? [] : ["docker-registry"]), ...((await which("skopeo")) ? [] : ["skopeo"])];
  let absent = await missing();
  if (absent.length === 0) return undefined;
  if (process.getuid?.() !== 0 || !(await which("apt-get"))) return `${absent.join(" and ")} missing and not installable here (needs root and apt-get)`;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () => run("apt-get", ["install", "-y", "--no-install-recommends", ...absent], { env, timeout: 600_000 });
  try {
    await install();
  } catch {
    try {
      await run("apt-get", ["update"], { env, timeout: 600_000 });
      await install();
    } catch (err) {
      return `apt-get install ${absent.join(" ")} failed: ${(err as Error).message.split("\n")[0]}`;
    }
  }
  absent = await missing();
  return absent.length === 0 ? undefined : `${absent.join(" and ")} still missing after apt-get install`;
}

const skipReason = await ensureTools();


async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Distribution {
  base: string;
  host: string;
  stop(): Promise<void>;
}

async function startDistribution(root: string, dir: string): Promise<Distribution> {
  const port = await freePort();
  const config = join(dir, `config-${port}.yml`);
  await writeFile(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: warn",
      "  accesslog:",
      "    disabled: true",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${root}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: 127.0.0.1:${port}`,
      "",
    ].join("\n"),
  );
  const env = { ...process.env };
  delete env.AWS_CA_BUNDLE;
  const proc: ChildProcess = spawn(registryBin, ["serve", config], { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr?.on("data", (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const base = `http://127.0.0.1:${port}`;
  await pollUntil(
    `docker-registry on ${base} (stderr: ${stderr})`,
    async () => proc.exitCode === null && (await fetch(`${base}/v2/`, { signal: AbortSignal.timeout(1000) })).status === 200,
    20_000,
  );
  return {
    base,
    host: `127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once("exit", () => resolve());
        proc.kill("SIGTERM");
      }),
  };
}

function sha256(b: Uint8Array | string): string {
  return createHash("sha256").update(b).digest("hex");
}

async function tarOf(files: Record<string, Buffer>): Promise<Buffer> {
  const p = pack();
  for (const [name, content] of Object.entries(files)) p.entry({ name, mode: 0o644, mtime: new Date(0) }, content);
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const c of p) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

interface Layout {
  dir: string;
  layer: Buffer;
  layerDigest: string;
  configDigest: string;
  manifest: string;
}

/** An OCI image layout with one tiny image, tagged v1: a config and one gzipped layer tar. */
async function makeLayout(dir: string): Promise<Layout> {
  const tar = await tarOf({ "hello.txt": Buffer.from(`hello from capstan ${randomBytes(8).toString("hex")}\n`) });
  const layer = gzipSync(tar);
  const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", config: {}, rootfs: { type: "layers", diff_ids: [`sha256:${sha256(tar)}`] } }));
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: mt.ociManifest,
    config: { mediaType: mt.ociConfig, digest: `sha256:${sha256(config)}`, size: config.length },
    layers: [{ mediaType: mt.ociLayer, digest: `sha256:${sha256(layer)}`, size: layer.length }],
  });
  await mkdir(join(dir, "blobs", "sha256"), { recursive: true });
  for (const b of [layer, config, Buffer.from(manifest)]) await writeFile(join(dir, "blobs", "sha256", sha256(b)), b);
  await writeFile(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  await writeFile(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [{ mediaType: mt.ociManifest, digest: `sha256:${sha256(manifest)}`, size: Buffer.byteLength(manifest), annotations: { "org.opencontainers.image.ref.name": "v1" } }],
    }),
  );
  return { dir, layer, layerDigest: `sha256:${sha256(layer)}`, configDigest: `sha256:${sha256(config)}`, manifest };
}

describe("compatibility with distribution 2.8 (Debian docker-registry) on the same root", () => {
  // scripts/services installs the tools; missing, the test fails saying so (never a silent skip).
  it("has docker-registry and skopeo", () => expect(skipReason).toBeUndefined());

  let work: string;
  let root: string;
  let policy: string;
  let layout: Layout;
  const stops: (() => Promise<void>)[] = [];

  const skopeo = async (...args: string[]) => {
    try {
      return (await run("skopeo", ["--policy", policy, ...args], { timeout: 120_000 })).stdout;
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`skopeo ${args.join(" ")} failed: ${e.stderr ?? e.message}`);
    }
  };

  /** skopeo's dir: transport: manifest.json and one file per blob, named by hex. */
  const pulledLayer = async (out: string) => {
    const manifest = JSON.parse(await readFile(join(out, "manifest.json"), "utf8")) as { layers: { digest: string }[] };
    const digest = manifest.layers[0]!.digest;
    return { digest, bytes: await readFile(join(out, digest.slice("sha256:".length))) };
  };

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "capstan-registry-compat-"));
    root = join(work, "root");
    policy = join(work, "policy.json");
    await writeFile(policy, JSON.stringify({ default: [{ type: "insecureAcceptAnything" }] }));
    layout = await makeLayout(join(work, "layout"));
  });

  afterAll(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("serves a root written by distribution, and distribution serves what Capstan writes", { timeout: 240_000 }, async () => {
    // 1. distribution writes the root: the image as OCI (v1) and converted to Docker schema 2 (v2s2).
    const dist = await startDistribution(root, work);
    stops.push(dist.stop);
    await skopeo("copy", "--dest-tls-verify=false", `oci:${layout.dir}:v1`, `docker://${dist.host}/compat/img:v1`);
    await skopeo("copy", "--dest-tls-verify=false", "--format", "v2s2", `oci:${layout.dir}:v1`, `docker://${dist.host}/compat/img:v2s2`);
    await dist.stop();
    expect(existsSync(join(root, "docker/registry/v2/repositories/compat/img/_manifests/tags/v1/current/link"))).toBe(true);

    // 2. Capstan serves the same root as it is.
    const driver = new FilesystemDriver({ rootDirectory: root });
    const capstan: Served = await serveRegistry(driver);
    stops.push(() => capstan.close());
    const host = new URL(capstan.base).host;
    const c = new Client(capstan.base);
    expect((await c.req("GET", "/v2/_catalog")).json()).toEqual({ repositories: ["compat/img"] });
    expect((await c.req("GET", "/v2/compat/img/tags/list")).json()).toEqual({ name: "compat/img", tags: ["v1", "v2s2"] });
    const oci = await c.req("GET", "/v2/compat/img/manifests/v1", { headers: { accept: mt.ociManifest } });
    expect(oci.status).toBe(200);
    expect(oci.text).toBe(layout.manifest);
    const docker = await c.req("GET", "/v2/compat/img/manifests/v2s2", { headers: { accept: mt.dockerManifest } });
    expect(docker.headers.get("content-type")).toBe(mt.dockerManifest);
    const blob = await c.req("GET", `/v2/compat/img/blobs/${layout.layerDigest}`);
    expect(blob.body.equals(layout.layer)).toBe(true);

    for (const tag of ["v1", "v2s2"]) {
      const out = join(work, `pulled-${tag}`);
      await skopeo("copy", "--src-tls-verify=false", `docker://${host}/compat/img:${tag}`, `dir:${out}`);
      const pulled = await pulledLayer(out);
      expect(pulled.digest).toBe(layout.layerDigest);
      expect(pulled.bytes.equals(layout.layer)).toBe(true);
    }

    // 3. Capstan writes (a push, and a cross-repository mount of the same layer); distribution serves it.
    await skopeo("copy", "--dest-tls-verify=false", `oci:${layout.dir}:v1`, `docker://${host}/compat/back:v1`);
    await skopeo("copy", "--src-tls-verify=false", "--dest-tls-verify=false", `docker://${host}/compat/img:v2s2`, `docker://${host}/compat/mounted:v2s2`);
    await capstan.close();
    const again = await startDistribution(root, work);
    stops.push(again.stop);
    const catalog = (await (await fetch(`${again.base}/v2/_catalog`)).json()) as { repositories: string[] };
    expect(catalog.repositories).toEqual(["compat/back", "compat/img", "compat/mounted"]);
    for (const ref of ["compat/back:v1", "compat/mounted:v2s2"]) {
      const out = join(work, `back-${ref.replace(/[/:]/g, "-")}`);
      await skopeo("copy", "--src-tls-verify=false", `docker://${again.host}/${ref}`, `dir:${out}`);
      expect((await pulledLayer(out)).bytes.equals(layout.layer)).toBe(true);
    }
    await again.stop();
  });
});
