// `capstan restart` and `capstan logs -previous` against a real `capstan up` (embedded store, the
// real engines), through POST /api/podgroups/restart and GET /api/podgroups/logs?previous=true:
// a group whose containers print their own hostname (the container id) is restarted, after which
// the previous container of each instance (the replaced one, kept stopped) prints the old id; it
// is not an instance and reserves nothing on its node; deleting the group removes it. A container
// that prints a line and exits 3 under restart policy onfail is started again in place, and
// previous=true shows that line while it runs again. A viewer may not restart; an unknown group is
// a 404, an instance without a previous container too (docs/orchestrator.md).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import { generateToken } from "../../api/console/index.ts";
import type { NodeRecord } from "../../api/resources/node.ts";
import type { PodGroupWithSpec } from "../../api/resources/podgroup.ts";
import { isPreviousContainer } from "../../controllers/shared/previous.ts";
import { runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const run = uniqueName("rs").replace(/[^a-z0-9]/g, "");
const app = `${run}a`;
const web = `${app}.web`;
const crash = `${app}.crash`;
const admin = generateToken().token;
let viewer = "";
let up: CapstanProcess;
let dir: string;
let home: string;

const serve = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
const lines = (text: string) => text.split("\n").filter((l) => l !== "");

function capstan(args: string[], token: string) {
  return runCapstan(args, { HOME: home, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: token, CAPSTAN_WEB: "" }, 60_000);
}

async function call(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(up.url + path, {
    method,
    headers: { "access-token": token, ...(body !== undefined && { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  return { status: res.status, text: await res.text() };
}

async function adminJson<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<T> {
  const a = await call(method, path, admin, body);
  expect(a.status, `${method} ${path}: ${a.text}`).toBeLessThan(300);
  return JSON.parse(a.text) as T;
}

const getGroup = (name: string) => adminJson<PodGroupWithSpec>("GET", `/api/podgroups?name=${name}`);

async function containersOf(name: string): Promise<ContainerSummary[]> {
  return cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${name}`] } });
}

/** The instances' containers (not the previous ones), by instance, once every one runs. */
async function running(name: string, n: number): Promise<ContainerSummary[]> {
  const all = (await containersOf(name)).filter((c) => !isPreviousContainer(c));
  if (all.length !== n || !all.every((c) => c.state === "running")) return [];
  return all.sort((a, b) => Number(a.labels["io.capstan.instance"]) - Number(b.labels["io.capstan.instance"]));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-restart-e2e-"));
  home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  up = await startCapstan("up", ["-data", dir, "-cluster", services.cluster, "-update-wait", "1s", "-refresh-interval", "2s"], { CAPSTAN_ADMIN_TOKEN: admin });
  // Ready means the node records are in (docs/orchestrator.md, "Readiness"): a create before that is refused.
  await pollUntil("capstan up ready", async () => (await fetch(`${up.url}/readyz`, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined))?.status === 200, 30_000, 200);
  await adminJson("POST", "/api/v1/apps", { appname: app, maintainers: [`alice-${run}@example.com`] });
  viewer = (await adminJson<{ token: string }>("POST", "/api/v1/tokens", { user: `carol-${run}@example.com`, role: "viewer", apps: [app] })).token;
}, 60_000);

afterAll(async () => {
  await up?.stop();
  for (const name of [web, crash]) for (const c of await containersOf(name)) await cluster.remove(c, { force: true, volumes: true }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

describe("capstan restart and the previous container", () => {
  it("restarts every instance, keeps the replaced containers for logs -previous, counts and reserves nothing for them, removes them with the group", async () => {
    await adminJson("POST", "/api/podgroups", {
      name: web,
      namespace: app,
      numInstances: 2,
      restartPolicy: "always",
      pod: { namespace: app, network: "none", containers: [{ image: services.testImage, command: ["sh", "-c", `echo run-$(hostname); ${serve}`], memoryLimit: 16 << 20 }] },
    });
    const before = await pollUntil(`${web}: 2 running`, async () => {
      const r = await running(web, 2);
      return r.length === 2 && (await getGroup(web)).state === "running" ? r : undefined;
    }, 60_000);

    // Nothing replaced yet: no previous container; previous needs an instance.
    const none = await call("GET", `/api/podgroups/logs?name=${web}&instance=1&previous=true`, viewer);
    expect(none.status, none.text).toBe(404);
    expect(JSON.parse(none.text).message).toBe(`instance 1 of podgroup ${web} has no previous container: none of its containers was restarted or replaced since it was deployed`);
    const all = await call("GET", `/api/podgroups/logs?name=${web}&previous=true`, viewer);
    expect(all.status).toBe(400);
    expect(JSON.parse(all.text).details).toEqual([{ path: "previous", message: "needs instance: previous containers are read one instance at a time" }]);

    // A viewer may not restart (403, nothing written); an unknown group is a 404.
    const refused = await capstan(["restart", web], viewer);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^capstan restart: Forbidden: /);
    expect((await call("POST", `/api/podgroups/restart?name=${web}`, viewer)).status).toBe(403);
    expect((await getGroup(web)).spec.restartedAt).toBeUndefined();
    const missing = await call("POST", `/api/podgroups/restart?name=${app}.nope`, admin);
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.text)).toMatchObject({ code: "NotFound", message: `podgroup ${app}.nope not found` });

    const restart = await capstan(["restart", web], admin);
    expect(restart.code, restart.stderr).toBe(0);
    expect(restart.stdout).toMatch(new RegExp(`^podgroup/${web.replace(".", "\\.")} restart requested: podgroup .* is being restarted, one instance at a time`));
    const after = await pollUntil(`${web}: both instances replaced`, async () => {
      const r = await running(web, 2);
      if (r.length !== 2 || r.some((c, i) => c.id === before[i]!.id)) return undefined;
      const g = await getGroup(web);
      return g.state === "running" && g.pods.every((p) => p.previous?.length === 1) ? { r, g } : undefined;
    }, 90_000);
    expect(after.g.spec.pod.version).toBe(1);
    expect(after.g.pods.map((p) => [p.instanceNo, p.containers.map((c) => c.id), p.previous!.map((c) => [c.id, c.status])])).toEqual(
      before.map((b, i) => [i + 1, [after.r[i]!.id], [[b.id, "exited"]]]),
    );

    // logs -previous: the replaced container's line; without it, the new one's.
    const prev = await capstan(["logs", `${web}/1`, "-previous"], viewer);
    expect(prev).toMatchObject({ code: 0, stdout: `run-${before[0]!.id.slice(0, 12)}\n`, stderr: "" });
    expect((await capstan(["logs", `${web}/1`], viewer)).stdout).toBe(`run-${after.r[0]!.id.slice(0, 12)}\n`);
    const shown = await capstan(["get", "podgroup", web], viewer);
    expect(shown.stdout).toMatch(new RegExp(`running +2/2 +1 +always`));
    expect(shown.stdout).toContain(`rolling restart requested at ${after.g.spec.restartedAt}`);

    // The kept containers keep their memory limit but reserve nothing: the node monitor's
    // reservation of their node is the sum over the Capstan containers that are up there.
    const kept = await Promise.all(before.map((b) => cluster.inspect(b)));
    for (const k of kept) expect([k.status.running, k.memoryBytes]).toEqual([false, 16 << 20]);
    for (const node of new Set(kept.map((k) => k.node))) {
      await pollUntil(`${node}: reserved memory is that of its up containers`, async () => {
        const up = await cluster.listContainers(node, { filters: { label: ["io.capstan.podgroup"], status: ["running"] } });
        const deps = await cluster.listContainers(node, { filters: { label: ["io.capstan.dependency"], status: ["running"] } });
        const ids = new Set([...up, ...deps].map((c) => c.id));
        let sum = 0;
        for (const id of ids) sum += await cluster.inspect({ node, id }).then((d) => d.memoryBytes, () => 0);
        const record = (await adminJson<NodeRecord[]>("GET", "/api/nodes")).find((n) => n.name === node);
        return record?.reserved.memoryBytes === sum;
      }, 30_000);
    }

    // Deleting the group removes the kept containers too.
    await adminJson("DELETE", `/api/podgroups?name=${web}`);
    await pollUntil(`${web}: every container gone`, async () => (await containersOf(web)).length === 0 && (await call("GET", `/api/podgroups?name=${web}`, admin)).status === 404, 60_000);
  });

  it("a container that printed a line and exited 3 is started again in place (onfail); logs -previous shows that line while it runs", async () => {
    const script = `if [ -f /tmp/ran ]; then echo second-run; ${serve}; else touch /tmp/ran; echo first-run; echo first-run-end; exit 3; fi`;
    await adminJson("POST", "/api/podgroups", {
      name: crash,
      namespace: app,
      numInstances: 1,
      restartPolicy: "onfail",
      pod: { namespace: app, network: "none", containers: [{ image: services.testImage, command: ["sh", "-c", script] }] },
    });
    const g = await pollUntil(`${crash}: running again after one restart`, async () => {
      const x = await getGroup(crash);
      return x.state === "running" && x.pods[0]?.restartCount === 1 ? x : undefined;
    }, 60_000);
    const node = g.pods[0]!.node;
    await pollUntil(`${crash}: second run's line written`, async () => (await capstan(["logs", `${crash}/1`], viewer)).stdout === "first-run\nfirst-run-end\nsecond-run\n", 20_000);

    const text = await call("GET", `/api/podgroups/logs?name=${crash}&instance=1&previous=true`, viewer);
    expect(text.status, text.text).toBe(200);
    expect(lines(text.text)).toEqual([`1@${node} stdout first-run`, `1@${node} stdout first-run-end`]);
    expect(await capstan(["logs", `${crash}/1`, "-previous"], viewer)).toMatchObject({ code: 0, stdout: "first-run\nfirst-run-end\n", stderr: "" });
    // The tail of the earlier runs, not of the whole log (which ends with the current run's line).
    expect(await capstan(["logs", `${crash}/1`, "-p", "-n", "1"], viewer)).toMatchObject({ code: 0, stdout: "first-run-end\n", stderr: "" });
    // The same container all along: restarted, not replaced, and nothing kept beside it.
    expect((await containersOf(crash)).map((c) => c.id)).toEqual([g.pods[0]!.containers[0]!.id]);
    expect(g.pods[0]!.previous).toBeUndefined();

    // -previous reads one instance.
    const usage = await capstan(["logs", crash, "-previous"], viewer);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/-previous reads one instance/);
  });
});
