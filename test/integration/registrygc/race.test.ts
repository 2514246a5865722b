// The race test (docs/registry-gc.md, "Why nothing is lost"): writers push images continuously to
// a real `capstan registry` (new layers, and layers from a small shared pool that the client skips
// after a HEAD answered 200), while they delete tags and images and garbage collection runs again
// and again inside the registry with a grace of 1 s. Afterwards every image whose push succeeded
// and was not deleted pulls completely, every blob's sha256 matching, and the runs did delete
// blobs. On filesystem storage and on S3 (the services' s3rver).
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { s3Service, uniqueName } from "../../helpers/services.ts";
import { Client, mt } from "../registry/harness.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-gc-race-"));
const started: CapstanProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const writers = 4;
const pushForMs = 15_000;
const sha = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

interface Pushed {
  repo: string;
  tag: string;
  manifest: string;
  digest: string;
  blobs: Buffer[];
}

/** A small OCI image: a fresh config and layer, and layers of the shared pools. */
function image(...shared: Buffer[]): { blobs: Buffer[]; manifest: string; digest: string } {
  const layer = randomBytes(512);
  const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", nonce: randomBytes(8).toString("hex") }));
  const desc = (mediaType: string, b: Buffer) => ({ mediaType, digest: sha(b), size: b.byteLength });
  const layers = [...shared, layer];
  const manifest = JSON.stringify({ schemaVersion: 2, mediaType: mt.ociManifest, config: desc(mt.ociConfig, config), layers: layers.map((l) => desc(mt.ociLayer, l)) });
  return { blobs: [config, ...layers], manifest, digest: sha(Buffer.from(manifest)) };
}

/**
 * docker's push: HEAD each blob, upload only the missing ones, then the manifest, `pauseMs` later
 * (a client still uploading other, larger layers). false when the registry refused it.
 */
async function push(c: Client, repo: string, tag: string, img: { blobs: Buffer[]; manifest: string }, pauseMs = 0): Promise<{ ok: boolean; skipped: number }> {
  let skipped = 0;
  for (const b of img.blobs) {
    if ((await c.req("HEAD", `/v2/${repo}/blobs/${sha(b)}`)).status === 200) {
      skipped++;
      continue;
    }
    await c.pushBlob(repo, b);
  }
  if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  const put = await c.pushManifest(repo, tag, img.manifest, mt.ociManifest);
  if (put.status === 201) return { ok: true, skipped };
  expect(put.status, put.text).toBe(400);
  expect(put.text).toContain("MANIFEST_BLOB_UNKNOWN"); // a refused push, the only failure allowed
  return { ok: false, skipped };
}

async function race(configText: string, name: string): Promise<void> {
  const config = join(dir, `${name}.yaml`);
  writeFileSync(config, configText);
  const registry = await startCapstan("registry", ["-config", config, "-data", join(dir, `${name}-data`), "-auth", "none"]);
  started.push(registry);
  const c = new Client(registry.url);
  // Shared layers: the cold pool's are used by a push every few seconds only, so between two
  // uses they are unreferenced and untouched for longer than the effective grace, and a run may
  // take one while a writer has just HEADed it; the hot pool's are HEADed and skipped all the time.
  const pool = Array.from({ length: 16 }, () => randomBytes(256));
  const hot = Array.from({ length: 2 }, () => randomBytes(256));
  // Push each pool layer once (then delete the image): old, unreferenced blobs that the
  // collector goes after while writers HEAD them and skip their upload.
  for (const [i, b] of pool.entries()) {
    const img = image(b);
    expect((await push(c, "race/seed", `s${i}`, img)).ok).toBe(true);
    expect((await c.req("DELETE", `/v2/race/seed/manifests/${img.digest}`)).status).toBe(202);
  }

  const alive = new Map<string, Pushed>();
  let refused = 0;
  let skippedUploads = 0;
  let stop = false;
  const writer = async (w: number) => {
    const repo = `race/w${w}`;
    for (let n = 0; !stop; n++) {
      const img = image(pool[(w * 4 + n) % pool.length]!, hot[n % hot.length]!);
      const tag = `t${n}`;
      // Every third push is slow between its HEADs and its manifest: the HEAD-then-skip race.
      const r = await push(c, repo, tag, img, n % 3 === 1 ? 1500 + Math.floor(Math.random() * 2000) : 0);
      skippedUploads += r.skipped;
      if (!r.ok) {
        refused++;
        continue;
      }
      alive.set(`${repo}:${tag}`, { repo, tag, ...img });
      // Delete most images again, by digest or by tag, so pool layers keep becoming unreferenced.
      const older = alive.get(`${repo}:t${n - 1}`);
      if (older !== undefined && n % 3 !== 0) {
        const byTag = n % 2 === 0;
        const del = await c.req("DELETE", `/v2/${repo}/manifests/${byTag ? older.tag : older.digest}`);
        expect(del.status).toBe(202);
        alive.delete(`${repo}:${older.tag}`);
      }
    }
  };

  const runs: { blobsDeleted: number }[] = [];
  const collector = async () => {
    for (let i = 0; !stop; i++) {
      const post = await fetch(`${registry.url}/api/registry/gc/runs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ graceSeconds: 1, mode: i % 4 === 3 ? "full" : "incremental", deleteUntagged: true, untaggedGraceSeconds: 0 }),
      });
      expect(post.status).toBe(202);
      const { id } = (await post.json()) as { id: string };
      const done = await pollUntil(
        `run ${id}`,
        async () => {
          const r = (await (await fetch(`${registry.url}/api/registry/gc/runs/${id}`)).json()) as { state: string; report?: { blobsDeleted: number }; error?: string };
          return r.state === "done" || r.state === "failed" ? r : undefined;
        },
        60_000,
        50,
      );
      expect(done.state, done.error).toBe("done");
      runs.push(done.report!);
    }
  };
  const timer = setTimeout(() => (stop = true), pushForMs);
  await Promise.all([...Array.from({ length: writers }, (_, w) => writer(w)), collector()]);
  clearTimeout(timer);

  // Every image that was pushed and not deleted pulls completely, bytes checked.
  expect(alive.size).toBeGreaterThan(writers);
  const lost: string[] = [];
  for (const p of alive.values()) {
    const m = await c.req("GET", `/v2/${p.repo}/manifests/${p.tag}`, { headers: { accept: mt.ociManifest } });
    if (m.status !== 200 || m.text !== p.manifest) {
      lost.push(`${p.repo}:${p.tag} manifest ${m.status}`);
      continue;
    }
    for (const b of p.blobs) {
      const r = await c.req("GET", `/v2/${p.repo}/blobs/${sha(b)}`);
      if (r.status !== 200 || sha(r.body) !== sha(b)) lost.push(`${p.repo}:${p.tag} blob ${sha(b)} ${r.status}`);
    }
  }
  expect(lost).toEqual([]);
  const deleted = runs.reduce((s, r) => s + r.blobsDeleted, 0);
  expect(runs.length).toBeGreaterThan(2);
  expect(deleted).toBeGreaterThan(0); // collection really happened while the pushes went on
  expect(skippedUploads).toBeGreaterThan(0); // the HEAD-then-skip path was taken
  console.log(`${name}: ${alive.size} images alive, ${runs.length} runs deleted ${deleted} blobs, ${refused} pushes refused and retried, ${skippedUploads} uploads skipped after a HEAD`);
}

describe("garbage collection while pushes go on", () => {
  it("loses nothing on filesystem storage", async () => {
    await race(`version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, "fs-root")}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:5000\n`, "fs");
  }, 120_000);

  it("loses nothing on S3", async () => {
    const s3 = s3Service();
    await race(
      `version: 0.1\nstorage:\n  s3:\n    accesskey: ${s3.accessKey}\n    secretkey: ${s3.secretKey}\n    region: ${s3.region}\n    regionendpoint: ${s3.endpoint}\n` +
        `    bucket: ${s3.bucket}\n    secure: false\n    rootdirectory: /${uniqueName("gcrace")}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:5000\n`,
      "s3",
    );
  }, 180_000);
});
