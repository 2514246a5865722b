// Notify channels against a real `capstan up` (embedded store, the real engines), as an admin and
// a maintainer use them (docs/notify.md): the admin sets a channel kind's webhook, the maintainer
// routes the app's events to it from app.yaml, and a loopback receiver gets the events of a
// deploy and of a crash-looping instance, in order and once each. A refusing webhook shows as
// NotifyFailed in `capstan events`. The webhook URL appears neither in `notify list` nor in the
// process's log; only admins may set channels, only the app's maintainers its routes.
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster } from "../../adapters/cluster/index.ts";
import { generateToken } from "../../api/console/index.ts";
import type { EventRecord } from "../../api/resources/event.ts";
import { apiCallOk, capstanBin, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const run = uniqueName("nt").replace(/[^a-z0-9]/g, "");
const app = `${run}a`;
const otherApp = `${run}b`;
const admin = generateToken().token;
const tokens = { alice: "", bob: "", carol: "" };
const secret = "T0SECRET/B0SECRET/xoxWebhookSecret42";
const hookPath = `/services/${secret}`;

let up: CapstanProcess;
let dir: string;
let home: string;
let server: Server;
let base = "";
const received: { text: string; channel: string; event: EventRecord }[] = [];

const env = (token: string) => ({ ...process.env, HOME: home, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: token, CAPSTAN_WEB: "" });
function capstan(args: string[], token: string, cwd = dir): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(capstanBin, args, { timeout: 60_000, env: env(token), cwd }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
const adminCall = (method: string, path: string, body?: unknown) => apiCallOk(up.url, admin, method, path, body);
const group = (name: string, script: string) => ({
  name,
  namespace: app,
  numInstances: 1,
  restartPolicy: "always",
  pod: { namespace: app, network: "none", containers: [{ image: services.testImage, command: ["sh", "-c", script], memoryLimit: 8 << 20 }] },
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-notify-e2e-"));
  home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      if (req.url !== hookPath) return void res.writeHead(404).end();
      received.push(JSON.parse(body) as (typeof received)[number]);
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  up = await startCapstan("up", ["-data", dir, "-cluster", services.cluster, "-refresh-interval", "2s"], { CAPSTAN_ADMIN_TOKEN: admin });
  await adminCall("POST", "/api/v1/apps", { appname: app, maintainers: [`alice-${run}@example.com`] });
  await adminCall("POST", "/api/v1/apps", { appname: otherApp, maintainers: [`bob-${run}@example.com`] });
  tokens.alice = (await adminCall("POST", "/api/v1/tokens", { user: `alice-${run}@example.com`, role: "user" })).token as string;
  tokens.bob = (await adminCall("POST", "/api/v1/tokens", { user: `bob-${run}@example.com`, role: "user" })).token as string;
  tokens.carol = (await adminCall("POST", "/api/v1/tokens", { user: `carol-${run}@example.com`, role: "viewer", apps: [app] })).token as string;
}, 120_000);

afterAll(async () => {
  await up?.stop();
  await new Promise((r) => server?.close(r));
  const left = await cluster.listContainers(undefined, { all: true, filters: { label: ["io.capstan.podgroup"] } });
  for (const c of left.filter((c) => (c.labels["io.capstan.podgroup"] ?? "").startsWith(app))) await cluster.remove(c, { force: true, volumes: true }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}, 120_000);

describe("notify channels", () => {
  it("only an admin sets a channel; list shows it redacted", async () => {
    const refused = await capstan(["notify", "set", "hook", "-webhook", `${base}${hookPath}`], tokens.alice);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Forbidden/);
    const set = await capstan(["notify", "set", "hook", "-webhook", `${base}${hookPath}`], admin);
    expect(set.code, set.stderr).toBe(0);
    const broken = await capstan(["notify", "set", "broken", "-webhook", `${base}/nothing-here/at-all`], admin);
    expect(broken.code, broken.stderr).toBe(0);
    for (const args of [["notify", "list"], ["notify", "list", "-o", "json"]]) {
      const list = await capstan(args, admin);
      expect(list.code, list.stderr).toBe(0);
      expect(list.stdout).toContain(`${base}/…et42`);
      expect(list.stdout).not.toContain("SECRET");
      expect(list.stdout).not.toContain("nothing-here");
      expect(set.stdout + list.stderr).not.toContain("SECRET");
    }
    expect((await capstan(["notify", "list"], tokens.alice)).code).toBe(1);
  });

  it("the app's maintainer routes its events from app.yaml; another app's may not", async () => {
    writeFileSync(join(dir, "app.yaml"), `appname: ${app}\nnotify:\n  hook: "#${app}-alerts"\n  broken: "#nowhere"\n`);
    const other = await capstan(["notify", "route", "-f", "app.yaml"], tokens.bob);
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/Forbidden/);
    const route = await capstan(["notify", "route", "-f", "app.yaml"], tokens.alice);
    expect(route.code, route.stderr).toBe(0);
    expect(route.stdout).toMatch(new RegExp(`notify routes of ${app} set`));
    expect((await capstan(["notify", "route", "-f", "app.yaml"], tokens.alice)).stdout).toMatch(/unchanged/);
    const shown = await capstan(["notify", "routes", app], tokens.alice);
    expect(shown.stdout).toMatch(new RegExp(`hook\\s+#${app}-alerts`));
  });

  it("a receiver gets the events of a deploy and of a crash-looping instance, in order, once each", async () => {
    const web = `${app}.web`;
    const crash = `${app}.crash`;
    await adminCall("POST", "/api/podgroups", group(web, "trap 'exit 0' TERM; sleep 3600 & wait"));
    await adminCall("POST", "/api/podgroups", group(crash, "exit 3"));
    await pollUntil(
      `the deploy's and the crash loop's events (got ${received.map((r) => `${r.event.name}:${r.event.reason}`).join(", ")})`,
      async () => received.some((r) => r.event.name === web && r.event.reason === "DeploySucceeded") && received.some((r) => r.event.name === crash && r.event.reason === "CrashLooping"),
      90_000,
    );
    const reasons = (name: string) => received.filter((r) => r.event.name === name).map((r) => r.event.reason);
    expect(reasons(web).slice(0, 2)).toEqual(["DeployStarted", "DeploySucceeded"]);
    const c = reasons(crash);
    expect(c[0]).toBe("DeployStarted");
    expect(c.indexOf("InstanceCrashed")).toBeGreaterThan(0);
    expect(c.indexOf("InstanceCrashed")).toBeLessThan(c.indexOf("CrashLooping"));
    // Once each: no event twice at the same count; counts of one event only grow.
    const seen = received.map((r) => `${r.event.id}#${r.event.count}`);
    expect(new Set(seen).size).toBe(seen.length);
    expect(received.every((r) => r.channel === `#${app}-alerts` && r.text.startsWith(`[${app}] `))).toBe(true);
    expect(received.some((r) => r.event.reason === "NotifyFailed")).toBe(false);
    await adminCall("DELETE", `/api/podgroups?name=${crash}`);
  }, 120_000);

  it("the refusing channel shows as NotifyFailed in capstan events, and the URLs are in no log line", async () => {
    const events = await pollUntil(
      "NotifyFailed in capstan events",
      async () => {
        const r = await capstan(["events", "-app", app], tokens.alice);
        return r.stdout.includes("NotifyFailed") ? r.stdout : undefined;
      },
      30_000,
    );
    expect(events).toMatch(/notify broken #nowhere: DeployStarted not delivered: HTTP 404/);
    expect(events).not.toContain("nothing-here");
    expect(up.log()).toContain("notifier started");
    expect(up.log()).not.toContain("SECRET");
    expect(up.log()).not.toContain("nothing-here");
  }, 60_000);

  it("the API refuses before writing: a viewer's routes, a bad webhook (not echoed), a bad kind", async () => {
    const call = async (token: string, method: string, path: string, body?: unknown) => {
      const res = await fetch(up.url + path, { method, headers: { "access-token": token, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
      return { status: res.status, text: await res.text() };
    };
    const viewer = await call(tokens.carol, "PUT", `/api/notify/routes/${app}`, { routes: {} });
    expect(viewer.status).toBe(403);
    expect((await call(tokens.carol, "GET", `/api/notify/routes/${app}`)).text).toContain(`#${app}-alerts`);
    expect((await call(tokens.bob, "GET", `/api/notify/routes/${app}`)).status).toBe(403);
    const bad = await call(admin, "PUT", "/api/notify/channels/hook", { webhook: "ftp://hooks.example.com/SECRETpath" });
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/webhook/);
    expect(bad.text).not.toContain("SECRETpath");
    expect((await call(admin, "PUT", "/api/notify/channels/Bad!", { webhook: base })).status).toBe(400);
    expect((await call(admin, "PUT", `/api/notify/routes/${app}`, { routes: { hook: "" } })).status).toBe(400);
    expect((await call(admin, "GET", "/api/notify/channels")).text).toContain(`${base}/…et42`);
  });

  it("delete removes a channel; a second delete is exit 1", async () => {
    expect((await capstan(["notify", "delete", "broken"], admin)).code).toBe(0);
    const again = await capstan(["notify", "delete", "broken"], admin);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no notify channel broken/);
    expect((await capstan(["notify", "set", "Bad!", "-webhook", base], admin)).code).toBe(2);
  });
});
