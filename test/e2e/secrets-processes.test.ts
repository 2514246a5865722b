// `capstan console` and `capstan secrets` as separate processes (each on its own embedded store;
// the secrets service reaches the console only over HTTP, as in a real deployment): the first admin
// token, authorization across the two processes, and a restart of the secrets service, which comes
// back sealed until unsealed again.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadServices, uniqueName } from "../helpers/services.ts";

const bin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));
const services = loadServices();

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

interface Server {
  child: ChildProcess;
  exited: Promise<number | null>;
  log: () => string;
  url: string;
}

describe("capstan console and capstan secrets as separate processes", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-procs-e2e-"));
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const app = uniqueName("e2e-procs");
  const proc = `${app}.web.web`;
  const content = `token=${uniqueName("content")}`;
  const env = { ...process.env, HOME: home, CAPSTAN_SERVER: "", CAPSTAN_WEB: "", CAPSTAN_TOKEN: "", CAPSTAN_CLUSTER: "", CAPSTAN_ADMIN_TOKEN: "", CAPSTAN_STORE: "" };
  let consoleServer: Server;
  let secretsServer: Server;
  let keys: string[] = [];
  let bobToken = "";
  let rootToken = "";

  function capstan(args: string[], input = ""): Promise<Ran> {
    return new Promise((resolve) => {
      const child = execFile(bin, args, { timeout: 60_000, env }, (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end(input);
    });
  }

  async function start(name: string, args: string[]): Promise<Server> {
    const child = spawn(bin, [name, "-web", "127.0.0.1:0", ...args], { stdio: ["ignore", "pipe", "pipe"], env });
    let log = "";
    child.stdout!.on("data", (d: Buffer) => (log += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    let url = "";
    while (!url && Date.now() < deadline && child.exitCode === null) {
      const m = new RegExp(`"address":\\{"host":"127\\.0\\.0\\.1","port":(\\d+)\\}[^\\n]*"msg":"${name} is up"`).exec(log);
      if (m) url = `http://127.0.0.1:${m[1]}`;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, `${name} did not come up; log:\n${log}`).not.toBe("");
    return { child, exited, log: () => log, url };
  }

  // One store for both: the secrets service checks tokens from the store the console writes them to.
  const startSecrets = () => start("secrets", ["-store", `sqlite://${dir}/state.db`, "-cluster", services.cluster]);

  beforeAll(async () => {
    consoleServer = await start("console", ["-store", `sqlite://${dir}/state.db`, "-admin-token-file", join(dir, "admin-token")]);
    secretsServer = await startSecrets();
  });

  afterAll(() => {
    for (const s of [consoleServer, secretsServer]) if (s && s.child.exitCode === null) s.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("a console without an admin token and nowhere to put one refuses to start (exit 2)", async () => {
    const r = await capstan(["console", "-web", "127.0.0.1:0", "-store", `sqlite://${dir}/empty.db`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("give -admin-token-file or CAPSTAN_ADMIN_TOKEN");
  });

  it("the console writes the first admin token (0600); the admin registers the app and a maintainer logs in", async () => {
    const tokenFile = join(dir, "admin-token");
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(consoleServer.log()).not.toContain(readFileSync(tokenFile, "utf8").trim());
    const urls = ["-console", consoleServer.url, "-secrets", secretsServer.url];
    expect((await capstan(["login", "admin", ...urls], readFileSync(tokenFile, "utf8"))).code).toBe(0);
    expect((await capstan(["apps", "add", "admin", app, "-maintainer", "bob@example.com"])).code).toBe(0);
    const token = await capstan(["tokens", "create", "admin", "-user", "bob@example.com", "-expires-in", "1h"]);
    expect(token.code, token.stderr).toBe(0);
    expect(token.stderr).toMatch(/for bob@example\.com \(role user, expires /);
    bobToken = token.stdout.trim();
    expect((await capstan(["login", "bob", ...urls, "-token", bobToken])).code).toBe(0);
  });

  it("the secrets service asks the other process's console: maintainers write, others are refused", async () => {
    const init = await capstan(["secrets", "init", "admin", "-shares", "2", "-threshold", "2"]);
    expect(init.code, init.stderr).toBe(0);
    keys = [...init.stdout.matchAll(/^Unseal key \d: (\S+)$/gm)].map((m) => m[1]!);
    rootToken = /^Root token: (\S+)$/m.exec(init.stdout)![1]!;
    for (const key of keys) expect((await capstan(["secrets", "unseal", "-secrets", secretsServer.url, "-key", key])).code).toBe(0);

    const put = await capstan(["secret", "add", "bob", proc, "app.env", "-c", content]);
    expect(put, put.stderr).toMatchObject({ code: 0 });
    const other = await capstan(["secret", "view", "bob", `${uniqueName("e2e-other")}.web.web`]);
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/^capstan secret view: NotFound: /);
    const anonymous = await capstan(["secret", "view", "bob", proc, "-token", "cst_000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"]);
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toMatch(/^capstan secret view: Unauthorized: /);
  });

  it("after a restart the service is sealed until unsealed again, and the records are back", async () => {
    secretsServer.child.kill("SIGTERM");
    expect(await secretsServer.exited).toBe(0);
    secretsServer = await startSecrets();
    // The saved cluster still names the old port; -secrets points the status command at the new one.
    const status = await capstan(["secrets", "status", "-secrets", secretsServer.url]);
    expect(JSON.parse(status.stdout)).toMatchObject({ initialized: true, sealed: true });
    expect((await capstan(["login", "bob", "-secrets", secretsServer.url], bobToken)).code).toBe(0);
    const sealed = await capstan(["secret", "view", "bob", proc]);
    expect(sealed.code).toBe(1);
    expect(sealed.stderr).toContain("sealed");
    expect((await capstan(["secrets", "unseal", "bob"], keys[0])).stdout).toBe("still sealed: 1/2 shares given\n");
    expect((await capstan(["secrets", "unseal", "bob"], keys[1])).stdout).toBe("unsealed\n");
    const view = await capstan(["secret", "view", "bob", proc]);
    expect(JSON.parse(view.stdout)).toEqual([expect.objectContaining({ path: "app.env", content, mode: "400" })]);
  });

  it("seal needs the root token, and seals", async () => {
    const wrong = await capstan(["secrets", "seal", "bob", "-root-token", bobToken]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^capstan secrets seal: Unauthorized: /);
    expect(await capstan(["secrets", "seal", "bob"], `${rootToken}\n`)).toMatchObject({ code: 0, stdout: "sealed\n" });
    expect(JSON.parse((await capstan(["secrets", "status", "bob"])).stdout)).toMatchObject({ initialized: true, sealed: true });
  });

  it("tokens revoke ends bob's token in the other process (the secrets service) within 5 s", async () => {
    const id = bobToken.slice(4, 16);
    expect(await capstan(["tokens", "revoke", "admin", id])).toMatchObject({ code: 0, stdout: `token ${id} revoked\n` });
    // The service is sealed now (previous test): a valid token gets 503, a revoked one 401, since
    // the token is checked first.
    const deadline = Date.now() + 5_000;
    let last = "";
    while (Date.now() < deadline) {
      last = (await capstan(["secret", "view", "bob", proc])).stderr;
      if (/Unauthorized/.test(last)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(last).toMatch(/^capstan secret view: Unauthorized: /);
    expect(Date.now()).toBeLessThan(deadline);
  });

  it("both stop with exit 0 on SIGTERM; neither logged the secret", async () => {
    for (const s of [secretsServer, consoleServer]) {
      s.child.kill("SIGTERM");
      expect(await s.exited).toBe(0);
      expect(s.log()).not.toContain(content);
    }
  });
});
