// The real `capstan orchestrator` binary on a fresh embedded store against the two real engines,
// driven by the real client commands as a user types them: apply -wait, get (table and JSON),
// scale up and down, a rolling update, delete, a group that fails, bad input, and SIGTERM. Every
// step is checked against the containers Docker actually has, not only against what the API says.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { request as httpRequest } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import type { PodGroupWithSpec } from "../../api/resources/podgroup.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";
import { isPreviousContainer } from "../../controllers/shared/previous.ts";

const bin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));
const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

describe("capstan orchestrator with the client commands", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-orch-e2e-"));
  // A HOME without ~/.capstan/config.yaml, so only CAPSTAN_SERVER points the client.
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const group = uniqueName("e2e-hello");
  const failing = uniqueName("e2e-crash");
  let orchestrator: ChildProcess;
  let exited: Promise<number | null>;
  let log = "";
  let server = "";

  /** Run the real `capstan` binary against the orchestrator. */
  function capstan(args: string[], timeoutMs = 120_000): Promise<Ran> {
    return new Promise((resolve) => {
      execFile(
        bin,
        args,
        { timeout: timeoutMs, env: { ...process.env, HOME: home, CAPSTAN_SERVER: server, CAPSTAN_WEB: "" } },
        (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  function manifest(file: string, spec: Record<string, unknown>): string {
    const path = join(dir, file);
    writeFileSync(path, JSON.stringify(spec, null, 2));
    return path;
  }

  // PID 1 ignores SIGTERM unless it traps it; without the trap every stop would last killTimeout.
  const stopsOnTerm = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
  const sleeper = (name: string, numInstances: number, env: string[] = []) => ({
    name,
    namespace: "e2e",
    numInstances,
    restartPolicy: "always",
    pod: {
      namespace: "e2e",
      network: "none",
      containers: [{ image: services.testImage, command: ["/bin/sh", "-c", stopsOnTerm], env }],
    },
  });

  async function containersOf(name: string): Promise<ContainerSummary[]> {
    const all = await cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${name}`] } });
    return all.sort((a, b) => Number(a.labels["io.capstan.instance"]) - Number(b.labels["io.capstan.instance"]));
  }

  beforeAll(async () => {
    orchestrator = spawn(
      bin,
      ["orchestrator", "-web", "127.0.0.1:0", "-store", `sqlite://${dir}/state.db`, "-cluster", services.cluster, "-auth", "none", "-update-wait", "1s", "-refresh-interval", "2s"],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CAPSTAN_WEB: "" } },
    );
    orchestrator.stdout!.on("data", (d: Buffer) => (log += d.toString()));
    orchestrator.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    exited = new Promise((resolve) => orchestrator.on("exit", (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    while (!server && Date.now() < deadline) {
      const m = /"msg":"orchestrator is up"/.test(log) && /"address":\{"host":"127\.0\.0\.1","port":(\d+)\}/.exec(log);
      if (m) server = `http://127.0.0.1:${m[1]}`;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(server, `the orchestrator did not come up; log:\n${log}`).not.toBe("");
  });

  afterAll(async () => {
    if (orchestrator.exitCode === null) orchestrator.kill("SIGKILL");
    for (const name of [group, failing]) {
      for (const c of await containersOf(name)) await cluster.remove(c, { force: true, volumes: true });
    }
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("apply -f -wait creates the group and returns once its containers run", async () => {
    const file = manifest("hello.json", sleeper(group, 2));
    const r = await capstan(["apply", "-f", file, "-wait", "-timeout", "90s"]);
    expect(r, log.slice(-3000)).toMatchObject({ code: 0 });
    expect(r.stdout).toContain(`podgroup/${group} created`);
    expect(r.stdout).toContain(`${group}: 2/2 running at version 1`);
    const containers = await containersOf(group);
    expect(containers.map((c) => [c.labels["io.capstan.instance"], c.labels["io.capstan.version"], c.state])).toEqual([
      ["1", "1", "running"],
      ["2", "1", "running"],
    ]);
    expect(containers.every((c) => c.networkMode === "none")).toBe(true);
  });

  it("get podgroup shows a table of the instances, -o json the server's answer, get podgroups the list", async () => {
    const table = await capstan(["get", "podgroup", group]);
    expect(table.code).toBe(0);
    const lines = table.stdout.split("\n");
    expect(lines[0]).toMatch(/^PODGROUP +NAMESPACE +STATE +INSTANCES +VERSION +RESTART +LAST ERROR$/);
    expect(lines[1]).toMatch(new RegExp(`^${group} +e2e +\\w+ +2/2 +1 +always +`));
    expect(lines[3]).toMatch(/^INSTANCE +STATE +NODE +VERSION +RESTARTS +CONTAINERS +LAST ERROR$/);
    expect(lines[4]).toMatch(/^1 +running +n[12] +1 +\d+ +/);
    expect(lines[5]).toMatch(/^2 +running +n[12] +1 +\d+ +/);

    const json = await capstan(["get", "podgroup", group, "-o", "json"]);
    expect(json.code).toBe(0);
    const answer = JSON.parse(json.stdout) as PodGroupWithSpec;
    expect(answer.spec).toMatchObject({ name: group, numInstances: 2, pod: { version: 1 } });
    const docker = await containersOf(group);
    expect(answer.pods.flatMap((p) => p.containers.map((c) => c.id)).sort()).toEqual(docker.map((c) => c.id).sort());

    const list = await capstan(["get", "podgroups"]);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^${group} +e2e +\\w+ +2/2 +1 +always`, "m"));
  });

  it("apply of the unchanged file changes nothing", async () => {
    const r = await capstan(["apply", "-f", join(dir, "hello.json")]);
    expect(r).toMatchObject({ code: 0, stdout: `podgroup/${group} unchanged\n` });
    expect((await containersOf(group)).map((c) => c.labels["io.capstan.version"])).toEqual(["1", "1"]);
  });

  it("scale -wait adds instances, and removes the highest instance numbers first", async () => {
    const up = await capstan(["scale", group, "3", "-wait", "-timeout", "60s"]);
    expect(up, log.slice(-3000)).toMatchObject({ code: 0 });
    expect(up.stdout).toContain(`${group}: 3/3 running at version 1`);
    expect((await containersOf(group)).map((c) => [c.labels["io.capstan.instance"], c.state])).toEqual([
      ["1", "running"],
      ["2", "running"],
      ["3", "running"],
    ]);

    const down = await capstan(["scale", group, "1", "-wait", "-timeout", "60s"]);
    expect(down, log.slice(-3000)).toMatchObject({ code: 0 });
    expect(down.stdout).toContain(`${group}: 1/1 running at version 1`);
    expect((await containersOf(group)).map((c) => [c.labels["io.capstan.instance"], c.state])).toEqual([["1", "running"]]);
  });

  it("apply of a changed spec rolls every instance to the new version", async () => {
    const file = manifest("hello.json", sleeper(group, 2, ["GREETING=v2"]));
    const r = await capstan(["apply", "-f", file, "-wait", "-timeout", "90s"]);
    expect(r, log.slice(-3000)).toMatchObject({ code: 0 });
    expect(r.stdout).toContain(`podgroup/${group} spec updated`);
    expect(r.stdout).toContain("replicas set to 2");
    expect(r.stdout).toContain(`${group}: 2/2 running at version 2`);
    const all = await containersOf(group);
    const containers = all.filter((c) => !isPreviousContainer(c));
    expect(containers.map((c) => [c.labels["io.capstan.instance"], c.labels["io.capstan.version"], c.state])).toEqual([
      ["1", "2", "running"],
      ["2", "2", "running"],
    ]);
    // The replaced version-1 containers are kept stopped, at most one per instance (logs -previous).
    const kept = all.filter((c) => isPreviousContainer(c));
    expect(kept.every((c) => c.labels["io.capstan.version"] === "1" && c.state !== "running")).toBe(true);
    expect(new Set(kept.map((c) => c.labels["io.capstan.instance"])).size).toBe(kept.length);
    const env = (await cluster.inspect(containers[0]!)).env;
    expect(env).toContain("GREETING=v2");
  });

  it("delete podgroup -wait removes every container, then the group", async () => {
    const r = await capstan(["delete", "podgroup", group, "-wait", "-timeout", "60s"]);
    expect(r, log.slice(-3000)).toMatchObject({ code: 0 });
    expect(r.stdout).toContain(`${group}: deleted`);
    expect(await containersOf(group)).toEqual([]);
    const gone = await capstan(["get", "podgroup", group]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/^capstan get: NotFound: /);
  });

  it("apply -wait of a group whose command exits 3 with restart policy never fails and shows why", async () => {
    const spec = { ...sleeper(failing, 1), restartPolicy: "never" };
    spec.pod.containers[0]!.command = ["/bin/sh", "-c", "exit 3"];
    const r = await capstan(["apply", "-f", manifest("crash.json", spec), "-wait", "-timeout", "60s"]);
    expect(r.code, `${r.stdout}${r.stderr}`).not.toBe(0);
    expect(r.stdout).toMatch(new RegExp(`${failing}: failed: instance 1.* code 3`));
    const containers = await containersOf(failing);
    expect(containers.map((c) => c.state)).toEqual(["exited"]);
    expect(containers[0]!.status).toMatch(/Exited \(3\)/);
    expect((await capstan(["delete", "podgroup", failing, "-wait", "-timeout", "60s"])).code).toBe(0);
    expect(await containersOf(failing)).toEqual([]);
  });

  it("-auth none answers requests for a loopback Host only (a DNS-rebound page gets 403)", async () => {
    const get = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${server}/api/nodes`, { headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", reject);
        req.setTimeout(5_000, () => req.destroy(new Error("timeout")));
        req.end();
      });
    expect(await get(new URL(server).host)).toBe(200);
    expect(await get("localhost")).toBe(200);
    expect(await get("rebind.example.com:80")).toBe(403);
  });

  it("reports bad input with its line, and the server's errors with its message, exiting non-zero", async () => {
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, `name: ${group}\nnamespace: e2e\nnumInstances: 1\nrestartPolicy: always\npod:\n  namespace: e2e\n  replicas: 3\n  containers: [{image: x}]\n`);
    const invalid = await capstan(["apply", "-f", bad]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain(`${bad}:7:3: pod: Unrecognized key: "replicas"`);

    const missing = await capstan(["scale", uniqueName("e2e-nothing"), "2"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^capstan scale: NotFound: .*not found/);

    const usage = await capstan(["scale", group]);
    expect(usage.code).toBe(2);
  });

  it("capstan orchestrator -h lists its options with their defaults", async () => {
    const r = await capstan(["orchestrator", "-h"]);
    expect(r.code).toBe(0);
    for (const option of ["-web VALUE", "-cluster VALUE", "-store VALUE", "-update-wait DURATION", "-refresh-interval DURATION", "-depends-gc DURATION", "-workers N"]) {
      expect(r.stdout).toContain(option);
    }
    expect(r.stdout).toContain("(default sqlite://./capstan-data/state.db) [CAPSTAN_STORE]");
  });

  it("stops with exit code 0 on SIGTERM", async () => {
    orchestrator.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(log).toContain('"msg":"stopped"');
  });
});
