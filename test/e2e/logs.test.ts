// `capstan logs` against a real `capstan up` (embedded store, the real engines), as a user runs it:
// a group of two instances applied by an admin, whose containers print known lines to stdout and
// stderr; read by a viewer of its app, merged and per instance, with tail, since and timestamps;
// followed, with a line written after the command started, and ended by Ctrl-C, after which the
// engines have ended their readers. A maintainer of another app is refused (docs/security.md).
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import { generateToken } from "../../api/console/index.ts";
import { apiCallOk, capstanBin, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { engineDescriptorsOn, logPathOf } from "../helpers/engine-log-readers.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const exec = promisify(execFile);
const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const run = uniqueName("lg").replace(/[^a-z0-9]/g, "");
const app = `${run}a`;
const otherApp = `${run}b`;
const group = `${app}.web`;
const admin = generateToken().token;
const tokens: Record<"viewer" | "other", string> = { viewer: "", other: "" };

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

let up: CapstanProcess;
let dir: string;
let home: string;
let containers: ContainerSummary[] = [];

/** The real `capstan` binary against `capstan up`, with `token`. */
function capstan(args: string[], token: string): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(capstanBin, args, { timeout: 120_000, env: { ...process.env, HOME: home, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: token, CAPSTAN_WEB: "" } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const adminCall = (method: string, path: string, body?: unknown) => apiCallOk(up.url, admin, method, path, body);

/** Writes a line to a container's stdout (its main process's, which the engine logs). */
async function say(c: ContainerSummary, line: string): Promise<void> {
  await exec("docker", ["-H", services.engines[c.node]!, "exec", c.id, "sh", "-c", `echo ${line} > /proc/1/fd/1`], { timeout: 20_000 });
}

const lines = (text: string) => text.split("\n").filter((l) => l !== "");

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-logs-e2e-"));
  // A HOME without ~/.capstan/config.yaml: only CAPSTAN_SERVER and CAPSTAN_TOKEN point the client.
  home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  up = await startCapstan("up", ["-data", dir, "-cluster", services.cluster, "-update-wait", "1s", "-refresh-interval", "2s"], { CAPSTAN_ADMIN_TOKEN: admin });
  await adminCall("POST", "/api/v1/apps", { appname: app, maintainers: [`alice-${run}@example.com`] });
  await adminCall("POST", "/api/v1/apps", { appname: otherApp, maintainers: [`bob-${run}@example.com`] });
  tokens.viewer = (await adminCall("POST", "/api/v1/tokens", { user: `carol-${run}@example.com`, role: "viewer", apps: [app] })).token as string;
  tokens.other = (await adminCall("POST", "/api/v1/tokens", { user: `bob-${run}@example.com`, role: "user" })).token as string;

  const file = join(dir, "web.json");
  const script = "echo out-1; echo err-1 >&2; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
  writeFileSync(
    file,
    JSON.stringify({
      name: group,
      namespace: app,
      numInstances: 2,
      restartPolicy: "always",
      pod: { namespace: app, network: "none", containers: [{ image: services.testImage, command: ["/bin/sh", "-c", script] }] },
    }),
  );
  const applied = await capstan(["apply", "-f", file, "-wait", "-timeout", "90s"], admin);
  expect(applied, up.log().slice(-3000)).toMatchObject({ code: 0 });
  const all = await cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${group}`] } });
  containers = all.sort((a, b) => Number(a.labels["io.capstan.instance"]) - Number(b.labels["io.capstan.instance"]));
  expect(containers.map((c) => c.labels["io.capstan.instance"])).toEqual(["1", "2"]);
  // Both have written their lines once the engines hold them.
  await pollUntil("both instances' lines", async () => lines((await capstan(["logs", group], tokens.viewer)).stdout).length === 2, 30_000);
}, 180_000);

afterAll(async () => {
  await up?.stop();
  for (const c of await cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${group}`] } })) {
    await cluster.remove(c, { force: true, volumes: true });
  }
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

describe("capstan logs", () => {
  it("prints every instance's lines with INSTANCE@NODE, stdout to stdout and stderr to stderr", async () => {
    const r = await capstan(["logs", group], tokens.viewer);
    expect(r.code, r.stderr).toBe(0);
    const [c0, c1] = containers;
    expect(lines(r.stdout).sort()).toEqual([`1@${c0!.node} out-1`, `2@${c1!.node} out-1`]);
    expect(lines(r.stderr).sort()).toEqual([`1@${c0!.node} err-1`, `2@${c1!.node} err-1`]);
  });

  it("prints one instance's lines as they are; instance 0 is a usage error (instances are numbered from 1)", async () => {
    expect(await capstan(["logs", `${group}/1`], tokens.viewer)).toEqual({ code: 0, stdout: "out-1\n", stderr: "err-1\n" });
    const zero = await capstan(["logs", `${group}/0`], tokens.viewer);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain("instances are numbered from 1");
  });

  it("keeps the last line with -n 1, shows times with -t, cuts with -since", async () => {
    const r = await capstan(["logs", `${group}/1`, "-n", "1", "-t"], tokens.viewer);
    expect(r.code).toBe(0);
    const shown = lines(r.stdout + r.stderr);
    expect(shown).toHaveLength(1);
    expect(shown[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (out|err)-1$/);
    expect(await capstan(["logs", group, "-since", "2099-01-01T00:00:00Z"], tokens.viewer)).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(lines((await capstan(["logs", group, "-since", "1h"], tokens.viewer)).stdout)).toHaveLength(2);
  });

  it("-f prints a line written after it started; Ctrl-C ends it with exit 0, and the engines end their readers", async () => {
    const paths = await Promise.all(containers.map((c) => logPathOf(c.node, c.id)));
    const readers = () => Promise.all(containers.map((c, i) => engineDescriptorsOn(c.node, paths[i]!)));
    expect(await readers()).toEqual([1, 1]);

    const child = spawn(capstanBin, ["logs", group, "-f", "-n", "0"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, HOME: home, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: tokens.viewer, CAPSTAN_WEB: "" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await pollUntil("the engines to follow both containers", async () => (await readers()).every((n) => n === 2), 20_000);
      const line = `late-${Date.now()}`;
      await say(containers[1]!, line);
      await pollUntil(`${line} on capstan logs' stdout`, async () => stdout.includes(`2@${containers[1]!.node} ${line}\n`), 20_000);
      child.kill("SIGINT");
      expect(await exited).toBe(0);
      expect(stderr).toBe("");
      expect(lines(stdout)).toEqual([`2@${containers[1]!.node} ${line}`]);
      await pollUntil("the engines to end their follow readers", async () => (await readers()).every((n) => n === 1), 10_000);
      // A client that leaves is the normal end of a follow: no error or warning in the server's log.
      expect(up.log()).not.toMatch(/log stream failed|reading a container's log failed|request failed/);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  it("refuses a maintainer of another app, a caller without a token, and an unknown group", async () => {
    const other = await capstan(["logs", group], tokens.other);
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/^capstan logs: Forbidden: .* may not read app /);
    const none = await capstan(["logs", group], "");
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^capstan logs: Unauthorized: /);
    const unknown = await capstan(["logs", `${app}.nope`], tokens.viewer);
    expect(unknown).toMatchObject({ code: 1, stderr: `capstan logs: NotFound: podgroup ${app}.nope not found\n` });
    const instance = await capstan(["logs", `${group}/9`], tokens.viewer);
    expect(instance).toMatchObject({ code: 1, stderr: `capstan logs: NotFound: podgroup ${group} has no instance 9 (instances: 1, 2)\n` });
  });
});
