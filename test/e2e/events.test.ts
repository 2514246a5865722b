// `capstan events` against a real `capstan up` (embedded store, the real engines), as a user runs
// it: a group applied by an admin is deployed; a viewer of its app sees DeployStarted and
// DeploySucceeded in the table and, with -w, as they happen (Ctrl-C ends it, exit 0); a
// maintainer of another app sees none of them and is refused -app (docs/events.md, docs/cli.md).
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster } from "../../adapters/cluster/index.ts";
import { generateToken } from "../../api/console/index.ts";
import { apiCallOk, capstanBin, runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const run = uniqueName("ev").replace(/[^a-z0-9]/g, "");
const app = `${run}a`;
const otherApp = `${run}b`;
const admin = generateToken().token;
const tokens: Record<"viewer" | "other", string> = { viewer: "", other: "" };

let up: CapstanProcess;
let dir: string;
let home: string;

const env = (token: string) => ({ ...process.env, HOME: home, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: token, CAPSTAN_WEB: "" });

function capstan(args: string[], token: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(capstanBin, args, { timeout: 60_000, env: env(token) }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const adminCall = (method: string, path: string, body?: unknown) => apiCallOk(up.url, admin, method, path, body);

const group = (name: string) => ({
  name,
  namespace: app,
  numInstances: 1,
  restartPolicy: "always",
  pod: { namespace: app, network: "none", containers: [{ image: services.testImage, command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"], memoryLimit: 8 << 20 }] },
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-events-e2e-"));
  home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  up = await startCapstan("up", ["-data", dir, "-cluster", services.cluster, "-refresh-interval", "2s", "-event-ttl", "30m"], { CAPSTAN_ADMIN_TOKEN: admin });
  await adminCall("POST", "/api/v1/apps", { appname: app, maintainers: [`alice-${run}@example.com`] });
  await adminCall("POST", "/api/v1/apps", { appname: otherApp, maintainers: [`bob-${run}@example.com`] });
  tokens.viewer = (await adminCall("POST", "/api/v1/tokens", { user: `carol-${run}@example.com`, role: "viewer", apps: [app] })).token as string;
  tokens.other = (await adminCall("POST", "/api/v1/tokens", { user: `bob-${run}@example.com`, role: "user" })).token as string;
}, 120_000);

afterAll(async () => {
  await up?.stop();
  const left = await cluster.listContainers(undefined, { all: true, filters: { label: ["io.capstan.podgroup"] } });
  for (const c of left.filter((c) => (c.labels["io.capstan.podgroup"] ?? "").startsWith(app))) await cluster.remove(c, { force: true, volumes: true }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}, 120_000);

describe("capstan events", () => {
  it("-w prints a deploy's events as they are recorded, the table shows them, Ctrl-C ends the watch", async () => {
    const name = `${app}.web`;
    const child = spawn(capstanBin, ["events", "-name", name, "-w"], { env: env(tokens.viewer), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await pollUntil("the watch's header", async () => out.startsWith("LAST SEEN"), 30_000);
      await adminCall("POST", "/api/podgroups", group(name));
      await pollUntil(`DeploySucceeded in the watch (out: ${out}, err: ${err})`, async () => out.includes("DeploySucceeded"), 60_000);
      const lines = out.split("\n").filter((l) => l !== "");
      expect(lines[0]).toMatch(/^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+COUNT\s+MESSAGE$/);
      expect(lines[1]).toMatch(new RegExp(`^\\d+s\\s+Normal\\s+DeployStarted\\s+podgroup/${name.replace(/\./g, "\\.")}\\s+1\\s+deploying version 1: 1 instance\\(s\\)$`));
      expect(lines.findIndex((l) => l.includes("DeployStarted"))).toBeLessThan(lines.findIndex((l) => l.includes("DeploySucceeded")));
      child.kill("SIGINT");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }

    const table = await capstan(["events", "-app", app, "-since", "10m"], tokens.viewer);
    expect(table.code, table.stderr).toBe(0);
    const rows = table.stdout.split("\n").filter((l) => l !== "");
    expect(rows[0]).toMatch(/^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+COUNT\s+MESSAGE$/);
    expect(rows.map((r) => r.split(/\s{2,}/)[2])).toEqual(["REASON", "DeployStarted", "DeploySucceeded"]);
    expect(rows[2]).toContain(`podgroup/${name}`);
  });

  it("a maintainer of another app sees none of the app's events and may not ask for them", async () => {
    const mine = await capstan(["events", "-kind", "podgroup"], tokens.other);
    expect(mine.code, mine.stderr).toBe(0);
    expect(mine.stdout).toBe("no events\n");
    const refused = await capstan(["events", "-app", app], tokens.other);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Forbidden/);
  });

  it("bad options are usage errors (exit 2), -event-ttl 0 too", async () => {
    expect((await capstan(["events", "-since", "yesterday"], tokens.viewer)).code).toBe(2);
    expect((await capstan(["events", "-limit", "0"], tokens.viewer)).code).toBe(2);
    const ttl = await runCapstan(["orchestrator", "-event-ttl", "0", "-store", `sqlite://${join(dir, "other.db")}`, "-auth", "none"]);
    expect(ttl.code).toBe(2);
    expect(ttl.stderr).toMatch(/-event-ttl/);
  });
});
