// A real `capstan console` process, started as a new user would: with CAPSTAN_WEB exported for
// another server (it must not move the console: every server reads its own variable, here
// CAPSTAN_CONSOLE_WEB), with an operator-chosen CAPSTAN_ADMIN_TOKEN (any secret of enough entropy,
// as k3s takes --token), and driven by the client commands: apps maintainers add|remove, -o json,
// --version. A CAPSTAN_ADMIN_TOKEN such as "changeme" is refused, saying how to make a good one.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capstanBin, runCapstan } from "../helpers/capstan-process.ts";
import { uniqueName } from "../helpers/services.ts";

describe("capstan console and the console's client commands", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-console-cli-"));
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const admin = randomBytes(32).toString("hex"); // openssl rand -hex 32
  const app = uniqueName("cli-app");
  const baseEnv = { HOME: home, CAPSTAN_SERVER: "", CAPSTAN_TOKEN: "", CAPSTAN_CA: "", CAPSTAN_STORE: "", CAPSTAN_CLUSTER: "", CAPSTAN_ADMIN_TOKEN: "", CAPSTAN_CONSOLE_WEB: "" };
  let busy: Server;
  let busyPort = 0;
  let console: ChildProcess;
  let log = "";
  let url = "";
  const capstan = (args: string[]) => runCapstan(args, baseEnv, 60_000);

  beforeAll(async () => {
    // A port some other server holds, exported as CAPSTAN_WEB, as in a shell that started it.
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    busyPort = (busy.address() as { port: number }).port;
    console = spawn(capstanBin, ["console", "-store", `sqlite://${dir}/state.db`], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...baseEnv, CAPSTAN_WEB: `127.0.0.1:${busyPort}`, CAPSTAN_CONSOLE_WEB: "127.0.0.1:0", CAPSTAN_ADMIN_TOKEN: admin },
    });
    console.stdout!.on("data", (d: Buffer) => (log += d.toString()));
    console.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    const deadline = Date.now() + 30_000;
    while (!url && Date.now() < deadline && console.exitCode === null) {
      const m = /"address":\{"host":"127\.0\.0\.1","port":(\d+)\}[^\n]*"msg":"console is up"/.exec(log);
      if (m) url = `http://127.0.0.1:${m[1]}`;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, `console did not come up; log:\n${log}`).not.toBe("");
    const login = await capstan(["login", "t", "-url", url, "-token", admin]);
    expect(login.code, login.stderr).toBe(0);
  }, 60_000);

  afterAll(async () => {
    if (console && console.exitCode === null) console.kill("SIGKILL");
    await new Promise((resolve) => busy?.close(resolve));
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("listens where CAPSTAN_CONSOLE_WEB says, not on CAPSTAN_WEB's busy port", () => {
    expect(url).not.toBe(`http://127.0.0.1:${busyPort}`);
    expect(log).not.toContain("EADDRINUSE");
  });

  it("says that a variable of the old form is not read, naming the one that is", async () => {
    const r = await runCapstan(["get", "podgroups", "-server", url], { ...baseEnv, CAPSTAN_OUTPUT: "json", CAPSTAN_GET_OUTPUT: "" }, 30_000);
    expect(r.stderr).toContain('capstan get: CAPSTAN_OUTPUT is not read: -output reads CAPSTAN_GET_OUTPUT (docs/cli.md, "Environment variables")');
  });

  it("takes the operator-chosen admin token: whoami says admin", async () => {
    const me = await capstan(["whoami", "-context", "t", "-o", "json"]);
    expect(me.code, me.stderr).toBe(0);
    expect(JSON.parse(me.stdout)).toMatchObject({ user: "admin", role: "admin", allApps: true });
    const listed = await capstan(["tokens", "list", "t", "-o", "json"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ user: "admin", role: "admin" })]);
    // A wrong secret of the same shape is refused.
    const wrong = await runCapstan(["whoami", "-context", "t"], { ...baseEnv, CAPSTAN_TOKEN: randomBytes(32).toString("hex") });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/Unauthorized/);
  });

  it("apps maintainers add and remove change the console's record; the last one stays", async () => {
    expect((await capstan(["apps", "add", "t", app, "-maintainer", "alice@example.com"])).code).toBe(0);
    const added = await capstan(["apps", "maintainers", "add", "t", app, "Bob@Example.com,carol@example.com", "alice@example.com"]);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toBe(
      `app ${app}: added bob@example.com, carol@example.com; alice@example.com was already maintainer (maintainers: alice@example.com, bob@example.com, carol@example.com)\n`,
    );
    const removed = await capstan(["apps", "maintainers", "remove", "t", app, "alice@example.com", "-o", "json"]);
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout)).toMatchObject({ appname: app, maintainers: ["bob@example.com", "carol@example.com"] });
    const list = await capstan(["apps", "list", "t", "-o", "json"]);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ appname: app, maintainers: ["bob@example.com", "carol@example.com"] })]);

    const last = await capstan(["apps", "maintainers", "remove", "t", app, "bob@example.com", "carol@example.com"]);
    expect(last.code).toBe(1);
    expect(last.stderr).toContain(`capstan apps maintainers remove: app ${app} would have no maintainer left`);
    const none = await capstan(["apps", "maintainers", "remove", "t", app, "zed@example.com"]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toMatch(/nothing changed \(zed@example.com was not a maintainer\)/);
    const unknown = await capstan(["apps", "maintainers", "add", "t", `${app}-none`, "bob@example.com"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/NotFound: app .* is not registered/);
    const bad = await capstan(["apps", "maintainers", "add", "t", app, "not-an-email"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/add\[\d\]: must be an e-mail address/);
    // Several at once: each lands (the console edits the list as stored).
    const at = await Promise.all(["d@example.com", "e@example.com", "f@example.com"].map((e) => capstan(["apps", "maintainers", "add", "t", app, e])));
    expect(at.map((r) => r.code)).toEqual([0, 0, 0]);
    const after = await capstan(["apps", "list", "t", "-o", "json"]);
    expect(JSON.parse(after.stdout)[0].maintainers).toEqual(expect.arrayContaining(["bob@example.com", "carol@example.com", "d@example.com", "e@example.com", "f@example.com"]));
  });

  it("apps maintainers against a console from before the edit (no PATCH) says to upgrade it", async () => {
    // That console's answers: whoami (for the login) and its 404 for a route it does not have.
    const old = createHttpServer((req, res) => {
      const whoami = req.method === "GET" && req.url === "/api/v1/whoami";
      const body = whoami
        ? { id: "a".repeat(16), user: "admin", role: "admin", apps: [], allApps: true }
        : { error: `no route for ${req.method} ${req.url}`, code: "NotFound", message: `no route for ${req.method} ${req.url}` };
      res.writeHead(whoami ? 200 : 404, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => old.listen(0, "127.0.0.1", resolve));
    try {
      const oldUrl = `http://127.0.0.1:${(old.address() as { port: number }).port}`;
      const login = await capstan(["login", "old", "-url", oldUrl, "-token", admin]);
      expect(login.code, login.stderr).toBe(0);
      const r = await capstan(["apps", "maintainers", "add", "old", app, "g@example.com"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`capstan apps maintainers add: the console at ${oldUrl} cannot edit maintainers (no PATCH /api/v1/apps/APP/maintainers): upgrade it\n`);
    } finally {
      await new Promise((resolve) => old.close(resolve));
    }
  });

  it("capstan --version prints package.json's version", async () => {
    const version = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
    for (const args of [["--version"], ["version"]]) {
      const r = await capstan(args);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`capstan version ${version}\n`);
    }
  });

  it("refuses CAPSTAN_ADMIN_TOKEN=changeme (exit 2), saying how to make one", async () => {
    const r = await runCapstan(["console", "-web", "127.0.0.1:0", "-store", `sqlite://${dir}/other.db`], { ...baseEnv, CAPSTAN_ADMIN_TOKEN: "changeme" }, 30_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/CAPSTAN_ADMIN_TOKEN is not usable: it has 8 characters; at least 32 are needed\. .*openssl rand -hex 32/);
  });
});
