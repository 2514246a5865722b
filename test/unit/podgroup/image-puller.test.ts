// The shared image puller (controllers/shared/image-pull.ts) over a scripted cluster: one pull per
// node and image however many pods wait, progress while it runs, a failure told once per waiter,
// then a fresh pull; credentials only for the platform registry's images.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EngineError, type PullOptions } from "../../../adapters/cluster/index.ts";
import { imageRegistry, ImagePuller, tokenFileCredentials } from "../../../controllers/shared/image-pull.ts";

class Scripted {
  present = new Set<string>();
  pulls: { node: string; image: string; options: PullOptions; resolve: () => void; reject: (e: unknown) => void }[] = [];
  async hasImage(node: string, image: string): Promise<boolean> {
    return this.present.has(`${node}/${image}`);
  }
  pullImage(node: string, image: string, options: PullOptions = {}): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pulls.push({ node, image, options, resolve: () => (this.present.add(`${node}/${image}`), resolve()), reject });
    });
  }
}

const signal = new AbortController().signal;
const tick = () => new Promise((r) => setTimeout(r, 0));
const dir = mkdtempSync(join(tmpdir(), "capstan-puller-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("ImagePuller", () => {
  it("is ready at once for an image the node has, without a pull", async () => {
    const c = new Scripted();
    c.present.add("n1/busybox");
    const p = new ImagePuller({ cluster: c });
    expect(await p.ensureImages("n1", ["busybox", "busybox"], "a", signal)).toEqual({ kind: "ready" });
    expect(c.pulls).toHaveLength(0);
  });

  it("pulls once for every pod waiting, reports progress, and is ready once pulled", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c });
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "a", signal)).toEqual({ kind: "pulling", message: "pulling r:5000/shop/web:v1 on n2" });
    await tick();
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "b", signal)).toMatchObject({ kind: "pulling" });
    expect(c.pulls).toHaveLength(1);
    c.pulls[0]!.options.onProgress!({ currentBytes: 35, totalBytes: 100, layers: 1, layersDone: 0, status: "Downloading" });
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "a", signal)).toEqual({ kind: "pulling", message: "pulling r:5000/shop/web:v1 on n2 (35%)" });
    c.pulls[0]!.resolve();
    await tick();
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "a", signal)).toEqual({ kind: "ready" });
    expect(p.inFlight).toBe(0);
  });

  it("tells a failure once to each waiter, then pulls afresh", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c });
    await p.ensureImages("n1", ["r:5000/nope:v1"], "a", signal);
    await tick();
    await p.ensureImages("n1", ["r:5000/nope:v1"], "b", signal);
    c.pulls[0]!.reject(new EngineError("pullImage r:5000/nope:v1 on n1: manifest unknown", "n1", "r:5000/nope:v1", "pullImage", 404));
    await tick();
    const failed = { kind: "failed", message: "image pull failed: r:5000/nope:v1 on n1: manifest unknown" };
    expect(await p.ensureImages("n1", ["r:5000/nope:v1"], "a", signal)).toEqual(failed);
    expect(await p.ensureImages("n1", ["r:5000/nope:v1"], "b", signal)).toEqual(failed);
    expect(await p.ensureImages("n1", ["r:5000/nope:v1"], "a", signal)).toMatchObject({ kind: "pulling" });
    await tick();
    expect(c.pulls).toHaveLength(2);
  });

  it("aborts the pulls in flight when stopped", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c });
    const stop = new AbortController();
    const running = p.start(stop.signal);
    await p.ensureImages("n1", ["x/y:1"], "a", signal);
    await tick();
    stop.abort();
    await running;
    expect(c.pulls[0]!.options.signal!.aborted).toBe(true);
  });
});

describe("registry credentials", () => {
  it("reads the registry of a reference as the engine does", () => {
    expect(imageRegistry("busybox")).toBe("docker.io");
    expect(imageRegistry("capstan/busybox:latest")).toBe("docker.io");
    expect(imageRegistry("127.0.0.1:5000/shop/web:v1")).toBe("127.0.0.1:5000");
    expect(imageRegistry("localhost/x")).toBe("localhost");
    expect(imageRegistry("Registry.Example/x")).toBe("registry.example");
  });

  it("gives the token file's token, as its user, for the platform registry's images only", async () => {
    const file = join(dir, "token");
    writeFileSync(file, "cst_token\n");
    const creds = tokenFileCredentials({ host: "127.0.0.1:5000", file, userOf: async (t) => (t === "cst_token" ? "capstan-controllers" : "?") });
    expect(await creds("127.0.0.1:5000/shop/web:v1", signal)).toEqual({ username: "capstan-controllers", password: "cst_token", serveraddress: "127.0.0.1:5000" });
    expect(await creds("busybox", signal)).toBeUndefined();
    expect(await creds("127.0.0.1:5001/shop/web:v1", signal)).toBeUndefined();
    const bad = tokenFileCredentials({ host: "127.0.0.1:5000", file, userOf: async () => Promise.reject(new Error("invalid, expired or revoked access token")) });
    await expect(bad("127.0.0.1:5000/x:1", signal)).rejects.toThrow(/is not a valid console access token \(invalid, expired or revoked/);
    const missing = tokenFileCredentials({ host: "127.0.0.1:5000", file: join(dir, "none"), userOf: async () => "u" });
    await expect(missing("127.0.0.1:5000/x:1", signal)).rejects.toThrow(/cannot read the registry token file/);
  });
});
