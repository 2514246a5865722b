// A 200 MB layer pushes (POST, one streamed PATCH, PUT) and pulls with bounded memory: bodies go
// chunk by chunk between the socket and the storage driver, never whole into memory
// (docs/registry.md, "Uploads"). Client and registry share this process, so the RSS peak over the
// run bounds them both; a registry that buffered the blob would add 200 MB to it.
import { createHash, randomBytes } from "node:crypto";
import { request } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";
import { Client, serveRegistry, type Served } from "./harness.ts";

const totalBytes = 200 * 1024 * 1024;
const chunkBytes = 1024 * 1024;
/** Allowed RSS growth over the push and the pull; buffering the blob would need 200 MB. */
const maxGrowthBytes = 96 * 1024 * 1024;

/** `totalBytes` of random data, 1 MiB at a time, hashed as it is produced. */
function generated(hash: ReturnType<typeof createHash>): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= totalBytes) return void this.push(null);
      const chunk = randomBytes(Math.min(chunkBytes, totalBytes - sent));
      sent += chunk.length;
      hash.update(chunk);
      this.push(chunk);
    },
  });
}

function send(base: string, method: string, path: string, body: Readable): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, method, path, headers: { "content-type": "application/octet-stream", "transfer-encoding": "chunked" } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on("error", reject);
    body.pipe(req);
  });
}

function pull(base: string, path: string): Promise<{ status: number; bytes: number; digest: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    let bytes = 0;
    const req = request({ hostname, port, method: "GET", path }, (res) => {
      res.on("data", (c: Buffer) => {
        bytes += c.length;
        hash.update(c);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes, digest: `sha256:${hash.digest("hex")}` }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("a 200 MB layer", () => {
  let root: string;
  let served: Served;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "capstan-registry-large-"));
    served = await serveRegistry(new FilesystemDriver({ rootDirectory: root }));
  });

  afterAll(async () => {
    await served?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("pushes (POST, streamed PATCH, PUT) and pulls with bounded memory and the right digest", { timeout: 180_000 }, async () => {
    const c = new Client(served.base);
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
    try {
      const post = await c.req("POST", "/v2/big/layer/blobs/uploads/");
      expect(post.status).toBe(202);
      const hash = createHash("sha256");
      const patch = await send(served.base, "PATCH", post.headers.get("location")!, generated(hash));
      expect(patch.status).toBe(202);
      expect(patch.headers.range).toBe(`0-${totalBytes - 1}`);
      const digest = `sha256:${hash.digest("hex")}`;
      const put = await c.req("PUT", `${patch.headers.location as string}?digest=${digest}`);
      expect(put.status, put.text).toBe(201);

      const got = await pull(served.base, `/v2/big/layer/blobs/${digest}`);
      expect(got.status).toBe(200);
      expect(got.bytes).toBe(totalBytes);
      expect(got.digest).toBe(digest);
    } finally {
      clearInterval(sampler);
    }
    const growth = peak - baseline;
    expect(growth, `RSS grew by ${Math.round(growth / 2 ** 20)} MiB`).toBeLessThan(maxGrowthBytes);
  });
});
