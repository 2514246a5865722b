// The pull's reference and progress stream (adapters/cluster/pull.ts), without an engine; and what
// DockerCluster.pullImage puts in X-Registry-Auth, read by a fake engine on a unix socket.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { DockerCluster } from "../../../adapters/cluster/docker-cluster.ts";
import { followPull, pullReference, PullTracker } from "../../../adapters/cluster/pull.ts";
import type { PullProgress, RegistryAuth } from "../../../adapters/cluster/index.ts";

describe("pullReference", () => {
  it("splits tag and digest, and pulls :latest for a bare repository (never every tag)", () => {
    expect(pullReference("busybox")).toEqual({ fromImage: "busybox", tag: "latest" });
    expect(pullReference("capstan/busybox:latest")).toEqual({ fromImage: "capstan/busybox", tag: "latest" });
    expect(pullReference("127.0.0.1:5000/shop/web:v1")).toEqual({ fromImage: "127.0.0.1:5000/shop/web", tag: "v1" });
    expect(pullReference("127.0.0.1:5000/shop/web")).toEqual({ fromImage: "127.0.0.1:5000/shop/web", tag: "latest" });
    expect(pullReference("r.example/x@sha256:abc")).toEqual({ fromImage: "r.example/x", tag: "sha256:abc" });
  });
});

describe("PullTracker", () => {
  it("sums downloaded bytes over the layers and counts the layers done", () => {
    const t = new PullTracker();
    t.feed({ status: "Pulling from shop/web", id: "v1" });
    t.feed({ status: "Pulling fs layer", id: "a", progressDetail: {} });
    t.feed({ status: "Already exists", id: "b" });
    let p = t.feed({ status: "Downloading", id: "a", progressDetail: { current: 25, total: 100 } })!;
    expect(p).toEqual({ currentBytes: 25, totalBytes: 100, layers: 2, layersDone: 1, status: "Downloading" });
    t.feed({ status: "Download complete", id: "a" });
    p = t.feed({ status: "Pull complete", id: "a" })!;
    expect(p).toMatchObject({ currentBytes: 100, totalBytes: 100, layersDone: 2 });
    expect(t.error).toBeUndefined();
  });

  it("keeps the engine's error line", () => {
    const t = new PullTracker();
    expect(t.feed({ error: "x", errorDetail: { message: "manifest unknown" } })).toBeUndefined();
    expect(t.error).toBe("manifest unknown");
  });
});

describe("followPull", () => {
  const run = (chunks: string[], end: "end" | "close" | "abort") => {
    const s = new PassThrough();
    const ac = new AbortController();
    const seen: PullProgress[] = [];
    const done = followPull(s, ac.signal, new PullTracker(), (p) => seen.push(p), (m) => new Error(`failed: ${m}`));
    for (const c of chunks) s.write(c);
    if (end === "end") s.end();
    else if (end === "abort") {
      ac.abort(new Error("timed out"));
      s.destroy();
    } else s.destroy();
    return { done, seen };
  };

  it("resolves at the end of a clean stream, lines split anywhere, bad lines skipped", async () => {
    const { done, seen } = run(['{"status":"Downloading","id":"a","progressDetail":{"current":1,', '"total":4}}\nnot json\n{"status":"Pull complete","id":"a"}\n'], "end");
    await expect(done).resolves.toBeUndefined();
    expect(seen.map((p) => p.currentBytes)).toEqual([1, 4]);
  });

  it("rejects on an error line, on an early close, and with the abort's reason", async () => {
    await expect(run(['{"error":"denied","errorDetail":{"message":"denied: access"}}\n'], "end").done).rejects.toThrow("failed: denied: access");
    await expect(run([], "close").done).rejects.toMatchObject({ code: "ECONNRESET" });
    await expect(run([], "abort").done).rejects.toThrow("timed out");
  });
});

describe("pullImage's credentials", () => {
  it("reach the engine as X-Registry-Auth {registrytoken, serveraddress} and nothing else, never in the URL", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-pull-auth-"));
    const socket = join(dir, "docker.sock");
    const seen: { url: string; auth: string | undefined }[] = [];
    const engine = createServer((req, res) => {
      seen.push({ url: req.url ?? "", auth: req.headers["x-registry-auth"] as string | undefined });
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"status":"Pulling from shop/web","id":"v1"}\n{"status":"Status: Downloaded newer image"}\n');
    });
    await new Promise<void>((r) => engine.listen(socket, r));
    try {
      const cluster = DockerCluster.fromSpec(`n1=unix://${socket}`);
      // A caller that smuggles more than the type allows: none of it may reach the engine.
      const auth = { registrytoken: "eyJ.pull-only.jwt", serveraddress: "127.0.0.1:5000", password: "cst_secret", username: "u", key: "raw" } as RegistryAuth;
      await cluster.pullImage("n1", "127.0.0.1:5000/shop/web:v1", { auth });
      await cluster.pullImage("n1", "127.0.0.1:5000/shop/web:v2");
      const pulls = seen.filter((s) => s.url.includes("/images/create"));
      expect(pulls).toHaveLength(2);
      expect(JSON.parse(Buffer.from(pulls[0]!.auth!, "base64url").toString("utf8"))).toEqual({ registrytoken: "eyJ.pull-only.jwt", serveraddress: "127.0.0.1:5000" });
      expect(pulls[0]!.url).not.toMatch(/jwt|secret|registrytoken/);
      expect(pulls[1]!.auth).toBeUndefined();
    } finally {
      await new Promise((r) => engine.close(r));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
