// Garbage collection under failures (docs/registry-gc.md): two registries on one S3 bucket and one
// store, both asked for a run, exactly one collects; and a registry killed with SIGKILL in the
// middle of a run, after which the restarted registry finishes the run and no referenced blob is
// missing.
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { s3Service, uniqueName } from "../../helpers/services.ts";
import { Client, makeImage, type TestImage } from "../registry/harness.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-gc-fail-"));
const started: CapstanProcess[] = [];
let etcd: EtcdProcess | undefined;
afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop()));
});
afterAll(async () => {
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  id: string;
  state: string;
  runner?: string;
  report?: { blobsDeleted: number; rescued: number };
  error?: string;
}

async function requestRun(url: string, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${url}/api/registry/gc/runs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

async function finished(url: string, id: string, timeoutMs = 60_000): Promise<Run> {
  return pollUntil(
    `run ${id} to finish`,
    async () => {
      const r = (await (await fetch(`${url}/api/registry/gc/runs/${id}`)).json()) as Run;
      return r.state === "done" || r.state === "failed" ? r : undefined;
    },
    timeoutMs,
    100,
  );
}

describe("garbage collection under failures", () => {
  it("two registries on one bucket and one store: both asked, one collects", async () => {
    etcd = await startEtcd();
    const s3 = s3Service();
    const config = join(dir, "shared.yaml");
    writeFileSync(
      config,
      `version: 0.1\nstorage:\n  s3:\n    accesskey: ${s3.accessKey}\n    secretkey: ${s3.secretKey}\n    region: ${s3.region}\n    regionendpoint: ${s3.endpoint}\n` +
        `    bucket: ${s3.bucket}\n    secure: false\n    rootdirectory: /${uniqueName("gcleader")}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:5000\n`,
    );
    const store = ["-store", `etcd://${etcd.endpoint}`, "-auth", "none"];
    const a = await startCapstan("registry", ["-config", config, ...store]);
    started.push(a);
    const b = await startCapstan("registry", ["-config", config, ...store]);
    started.push(b);
    const c = new Client(a.url);
    const img = makeImage({ layers: 1 });
    await c.pushImage("lead/app", "v1", img);
    const orphan = await c.pushBlob("lead/app", randomBytes(100));

    const ids = [await requestRun(a.url, { mode: "full", graceSeconds: 0 }), await requestRun(b.url, { mode: "full", graceSeconds: 0 })];
    const runs = await Promise.all(ids.map((id) => finished(b.url, id)));
    for (const r of runs) expect(r.state, r.error).toBe("done");
    // One runner for both: the leader's identity, whichever registry asked.
    expect(new Set(runs.map((r) => r.runner)).size).toBe(1);
    const leaders = [a, b].filter((p) => p.log().includes('"msg":"elected leader"'));
    expect(leaders.length, `a: ${a.log().slice(-2000)}\nb: ${b.log().slice(-2000)}`).toBe(1);
    expect(leaders[0]!.log()).toContain("garbage collection run started");
    expect([a, b].find((p) => p !== leaders[0])!.log()).not.toContain("garbage collection run started");
    // The orphan goes once its touch is older than the effective grace; the image stays.
    await pollUntil(
      "the orphan blob collected",
      async () => {
        const r = await finished(a.url, await requestRun(a.url, { graceSeconds: 0 }));
        return r.state === "done" && (await c.req("GET", `/v2/lead/app/blobs/${orphan}`)).status === 404;
      },
      30_000,
      500,
    );
    expect(await new Client(b.url).pullsCompletely("lead/app", "v1", img)).toBe(true);
  }, 120_000);

  it("a registry killed in the middle of a run: the restarted one finishes it, nothing referenced is missing", async () => {
    const root = join(dir, "crash-root");
    const config = join(dir, "crash.yaml");
    writeFileSync(config, `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${root}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:5000\n`);
    const args = ["-config", config, "-auth", "none"];
    let reg = await startCapstan("registry", args);
    started.push(reg);
    let c = new Client(reg.url);
    const images: TestImage[] = [];
    for (let i = 0; i < 5; i++) {
      const img = makeImage({ layers: 2 });
      images.push(img);
      await c.pushImage(`crash/app${i}`, "v1", img);
    }
    // Thousands of old orphan blobs written straight into the tree, so the run takes a while.
    const old = new Date(Date.now() - 86_400_000);
    for (let i = 0; i < 6000; i++) {
      const bytes = randomBytes(32);
      const hex = createHash("sha256").update(bytes).digest("hex");
      const d = join(root, "docker/registry/v2/blobs/sha256", hex.slice(0, 2), hex);
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, "data"), bytes);
      utimesSync(join(d, "data"), old, old);
    }
    const id = await requestRun(reg.url, { mode: "full", graceSeconds: 0 });
    await pollUntil(
      "the run to be moving blobs",
      async () => {
        const r = (await (await fetch(`${reg.url}/api/registry/gc/runs/${id}`)).json()) as Run;
        if (r.state === "done") throw new Error("the run finished before the kill: make it bigger");
        const q = join(root, "docker/registry/v2/_quarantine/sha256");
        try {
          return readdirSync(q).length > 0;
        } catch {
          return false;
        }
      },
      60_000,
      5,
    );
    reg.child.kill("SIGKILL");
    await reg.exited;
    started.length = 0;

    reg = await startCapstan("registry", args);
    started.push(reg);
    c = new Client(reg.url);
    const run = await finished(reg.url, id, 120_000);
    expect(run.state, run.error).toBe("done");
    expect(run.report!.blobsDeleted).toBeGreaterThan(0);
    for (const [i, img] of images.entries()) expect(await c.pullsCompletely(`crash/app${i}`, "v1", img), `crash/app${i}`).toBe(true);
    // Nothing left behind: no orphan data, an empty quarantine.
    const after = await finished(reg.url, await requestRun(reg.url, { mode: "full", graceSeconds: 0, dryRun: true }));
    expect(after.report!.blobsDeleted).toBe(0);
    const q = join(root, "docker/registry/v2/_quarantine/sha256");
    const leftovers = readdirSync(q).filter((h) => {
      try {
        return readdirSync(join(q, h)).length > 0;
      } catch {
        return false;
      }
    });
    expect(leftovers).toEqual([]);
  }, 180_000);
});
