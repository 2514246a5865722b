// Garbage collection as an operator runs it (docs/registry-gc.md): `capstan registry` serving a
// filesystem root, and `capstan registry garbage-collect config.yaml` (handed to the serving registry, or run in
// the command when none serves), `capstan registry gc` following a run, the HTTP endpoint, and the
// metrics.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { runCapstan, startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { Client, digestOf, makeImage } from "../registry/harness.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-gc-cli-"));
const started: CapstanProcess[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeConfig(name: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, name)}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:5000\n`);
  return file;
}

const capstan = (args: string[]) => runCapstan(args, { CAPSTAN_STORE: "", CAPSTAN_LOG_LEVEL: "warn" });

describe("capstan registry garbage-collect and gc", () => {
  it("collects while the registry serves, through the registry, and on its own once it stopped", async () => {
    const config = writeConfig("a");
    const registry = await startCapstan("registry", ["-config", config]);
    started.push(registry);
    const client = new Client(registry.url);
    const keep = makeImage({ layers: 2 });
    const gone = makeImage({ layers: 2 });
    await client.pushImage("app/keep", "v1", keep);
    await client.pushImage("app/gone", "v1", gone);
    expect((await client.req("DELETE", `/v2/app/gone/manifests/${gone.digest}`)).status).toBe(202);
    const garbage = [gone.digest, ...gone.blobs.map((b) => digestOf(b))].sort();

    // `garbage-collect` while the registry serves: handed to it. With -grace 0s a blob still
    // counts as touched for the touch resolution and the clock allowance (3 s) after its push.
    let eligible: string[] = [];
    await pollUntil("a dry run listing the deleted image's blobs", async () => {
      const dry = await capstan(["registry", "garbage-collect", "--dry-run", "-grace", "0s", config]);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stderr).toContain("handed to it");
      eligible = [...dry.stdout.matchAll(/blob eligible for deletion: (sha256:[0-9a-f]+)/g)].map((m) => m[1]!).sort();
      return eligible.length === garbage.length;
    }, 30_000, 500);
    expect(eligible).toEqual(garbage);
    for (const d of garbage) expect((await client.req("HEAD", `/v2/app/keep/blobs/${d}`)).status).toBe(404); // not linked there
    // Still stored (a GET: a HEAD that answers 200 would touch the blob, and keep it a while longer).
    expect((await client.req("GET", `/v2/app/gone/blobs/${digestOf(gone.blobs[1]!)}`)).status).toBe(200);

    // The default grace keeps what was pushed a moment ago.
    // -json is the deprecated spelling of -o json: it still works and says so.
    const graceful = await capstan(["registry", "gc", "-config", config, "-json"]);
    expect(graceful.code, graceful.stderr).toBe(0);
    expect(graceful.stderr).toContain("-json is deprecated: use -o json");
    const kept = JSON.parse(graceful.stdout) as { state: string; report: { blobsDeleted: number; pending: number; mode: string } };
    expect(kept.state).toBe("done");
    expect(kept.report.blobsDeleted).toBe(0);
    expect(kept.report.pending).toBe(garbage.length);

    const real = await capstan(["registry", "gc", "-config", config, "-grace", "0s", "-o", "json"]);
    expect(real.code, real.stderr).toBe(0);
    const report = (JSON.parse(real.stdout) as { report: { mode: string; deleted: { digest: string }[] } }).report;
    expect(report.mode).toBe("incremental");
    expect(report.deleted.map((d) => d.digest).sort()).toEqual(garbage);
    expect(await client.pullsCompletely("app/keep", "v1", keep)).toBe(true);
    expect((await client.req("HEAD", `/v2/app/gone/blobs/${digestOf(gone.blobs[1]!)}`)).status).toBe(404);

    const metrics = await (await fetch(`${registry.url}/metrics`)).text();
    const runs = Number(/registry_gc_runs_total\{result="done"\} (\d+)/.exec(metrics)?.[1]);
    expect(runs).toBeGreaterThanOrEqual(3); // the dry runs of the poll, and the two gc runs
    expect(metrics).toMatch(new RegExp(`registry_gc_blobs_deleted_total ${garbage.length}`));

    // The HTTP endpoint (loopback, no auth configured: the registry runs with -auth token by
    // default, so an unauthenticated request is refused).
    expect((await fetch(`${registry.url}/api/registry/gc/runs`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(401);

    // Stopped: the command runs on its own, holding the root's lock.
    await registry.stop();
    started.length = 0;
    const local = await capstan(["registry", "garbage-collect", "-grace", "0s", config]);
    expect(local.code, local.stderr).toBe(0);
    expect(local.stderr).not.toContain("handed to it");
    expect(local.stdout).toMatch(/full run: 2 of 2 repositories read/);
    expect(local.stdout).toMatch(/deleted 0 blobs/);
    const localJson = await capstan(["registry", "garbage-collect", "-o", "json", "-grace", "0s", config]);
    expect(localJson.code, localJson.stderr).toBe(0);
    expect(JSON.parse(localJson.stdout)).toMatchObject({ id: "local", state: "done", report: { mode: "full", repositories: 2 } });
  }, 120_000);

  it("refuses bad options naming them", async () => {
    const config = writeConfig("b");
    const r = await capstan(["registry", "gc", "-config", config, "-grace", "soon"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("-grace");
    const o = await capstan(["registry", "gc", "-config", config, "-o", "yaml"]);
    expect(o.code).toBe(2);
    expect(o.stderr).toContain('-output: "yaml" is not table or json');
    const none = await capstan(["registry", "garbage-collect"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("config file");
  });
});
