// The real `capstan` binary, as a user runs it: help, usage errors, and `capstan up` on a fresh
// embedded store against the real engines, serving probes and the orchestrator's API, and stopping
// cleanly on SIGTERM. (test/e2e/orchestrator.test.ts drives the orchestrator itself.)
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { loadServices } from "../helpers/services.ts";

const bin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));
const run = promisify(execFile);

async function capstan(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(bin, args, { timeout: 30_000, env: { ...process.env, CAPSTAN_WEB: "" } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe("capstan command", () => {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  afterAll(() => {
    // A failed assertion must not leave a capstan up driving the shared engines.
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
  });

  it("lists commands, and -h of up lists options with defaults and environment variables", async () => {
    const top = await capstan(["-h"]);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^ {2}up +every component/m);
    for (const command of ["orchestrator", "secrets", "console", "apply", "get", "scale", "delete", "login", "secret", "deploy", "apps", "tokens"]) expect(top.stdout).toMatch(new RegExp(`^ {2}${command} +\\w`, "m"));
    const up = await capstan(["up", "-h"]);
    expect(up.code).toBe(0);
    expect(up.stdout).toContain("-web VALUE");
    expect(up.stdout).toContain("(default 127.0.0.1:9000) [CAPSTAN_UP_WEB]");
    expect(up.stdout).toContain("-history DURATION");
    expect(up.stdout).toContain("-update-wait DURATION");
    expect(up.stdout).toContain("(default 30s) [CAPSTAN_UP_REFRESH_INTERVAL]");
    expect(up.stdout).toContain("-admin-token-file VALUE");
    for (const sub of [["secret", "add"], ["secret", "view"], ["secret", "delete"], ["deploy"], ["login"], ["secrets", "init"], ["secrets", "unseal"], ["console"], ["secrets"]]) {
      const help = await capstan([...sub, "-h"]);
      expect(help.code, sub.join(" ")).toBe(0);
      expect(help.stdout).toContain(`usage: capstan ${sub.join(" ")} [options]`);
    }
  });

  it("answers usage errors with exit code 2 and a message naming the option", async () => {
    expect(await capstan(["nope"])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command "nope"') });
    const bad = await capstan(["up", "-history", "10"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("-history: invalid duration");
    const unknown = await capstan(["up", "-bogus"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown option -bogus");
    // No listener without authentication outside loopback: -auth none on every interface is refused.
    const open = await capstan(["orchestrator", "-auth", "none", "-web", "0.0.0.0:0", "-store", "sqlite://:memory:"]);
    expect(open.code).toBe(2);
    expect(open.stderr).toContain("-auth none is allowed only on a loopback listen address");
  });

  it("capstan up serves /healthz, /readyz, /metrics and the orchestrator's API, then stops with exit 0 on SIGTERM", async () => {
    const services = loadServices();
    const data = mkdtempSync(join(tmpdir(), "capstan-up-"));
    dirs.push(data);
    const child = spawn(bin, ["up", "-web", "127.0.0.1:0", "-registry-web", "", "-data", data, "-cluster", services.cluster, "-history", "1m"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, CAPSTAN_WEB: "" },
    });
    children.push(child);
    let log = "";
    child.stdout.on("data", (d: Buffer) => (log += d.toString()));
    child.stderr.on("data", (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));

    // The log line "capstan is up" carries the address the kernel gave port 0.
    const deadline = Date.now() + 30_000;
    let port = 0;
    while (!port && Date.now() < deadline) {
      const m = /"address":\{"host":"127\.0\.0\.1","port":(\d+)\}/.exec(log);
      if (m) port = Number(m[1]);
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(port, `capstan up did not come up; log:\n${log}`).toBeGreaterThan(0);
    const base = `http://127.0.0.1:${port}`;
    expect(await (await fetch(`${base}/healthz`)).text()).toBe("ok");
    // Ready once the node records are in (docs/orchestrator.md, "Readiness"), a moment after "is up".
    let ready = await fetch(`${base}/readyz`);
    for (const deadline = Date.now() + 30_000; ready.status !== 200 && Date.now() < deadline; ready = await fetch(`${base}/readyz`)) {
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "ok", checks: { "leader-election": true, "informer:podgroups": true, "informer:nodes": true } });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    // The orchestrator's leader key: up and orchestrator processes on one etcd elect one leader.
    expect(metrics).toMatch(/^leader_election_master_status\{name="\/platform\/orchestrator\/leader"\} 1$/m);
    // Every API needs a token: none is 401 with a challenge; the admin token capstan up wrote works.
    const anonymous = await fetch(`${base}/api/podgroups/_all`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toBe('Bearer realm="capstan"');
    const adminToken = readFileSync(join(data, "admin-token"), "utf8").trim();
    const groups = await fetch(`${base}/api/podgroups/_all`, { headers: { authorization: `Bearer ${adminToken}` } });
    expect(groups.status).toBe(200);
    expect(await groups.json()).toEqual([]);
    for (const node of Object.keys(services.engines)) {
      expect(log).toMatch(new RegExp(`"node":"${node}"[^\\n]*"state":"ready"`));
    }
    expect(existsSync(join(data, "state.db"))).toBe(true);

    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(log).toContain('"msg":"stopped"');
  });
});
