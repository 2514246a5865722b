// The three-step usage of docs/deploy.md (register, write secrets, deploy) end to end, with the real `capstan` binary as a user types
// it: `capstan up` (orchestrator + console + secrets service + Secret-sync in one process, embedded
// store, the two real engines), then
//   1. register the app (admin token from the console's admin-token file), create a maintainer
//      token and log in with it; initialize and unseal the secrets service;
//   2. write secrets through the CLI (-c and -f) and through the HTTP API;
//   3. deploy from app.yaml: refused while the app is unregistered or a listed file is unwritten,
//      then the files are inside the running container (docker exec) with their content, owner
//      0:0 and mode; changing a secret changes the file.
// Nothing the test wrote as secret content may appear in the process's log.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import { loadServices, socketPath, uniqueName } from "../helpers/services.ts";

const bin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));
const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

describe("secrets end to end: register, write, deploy", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-secrets-e2e-"));
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const app = uniqueName("e2e-sec");
  const proc = `${app}.web.web`;
  const unregistered = uniqueName("e2e-unreg");
  // Distinct markers, so the log check below can look for each.
  const secrets = {
    config: `db_password: ${uniqueName("pw")}\n`,
    key: `-----KEY ${uniqueName("k")}-----\n`,
    raw: `raw body ${uniqueName("raw")}, not JSON`,
    changed: `db_password: ${uniqueName("pw2")}\n`,
    abs: `written absolute ${uniqueName("abs")}`,
  };
  let up: ChildProcess;
  let exited: Promise<number | null>;
  let log = "";
  let url = "";

  function capstan(args: string[], input?: string, timeoutMs = 90_000): Promise<Ran> {
    return new Promise((resolve) => {
      const child = execFile(
        bin,
        args,
        // A temporary HOME: ~/.capstan/config.yaml is this test's own.
        { timeout: timeoutMs, env: { ...process.env, HOME: home, CAPSTAN_SERVER: "", CAPSTAN_WEB: "", CAPSTAN_TOKEN: "", CAPSTAN_CLUSTER: "" } },
        (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end(input ?? "");
    });
  }

  async function containersOf(name: string): Promise<ContainerSummary[]> {
    return cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${name}`] } });
  }

  /** `docker exec` in the container: what the command printed. */
  async function exec(c: ContainerSummary, cmd: string[]): Promise<string> {
    const docker = new Docker({ socketPath: socketPath(services.engines[c.node]!) });
    const e = await docker.getContainer(c.id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
    const stream = await e.start({ hijack: true, stdin: false });
    const out = new PassThrough();
    let text = "";
    out.on("data", (d: Buffer) => (text += d.toString()));
    docker.modem.demuxStream(stream, out, out);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`exec ${cmd.join(" ")} did not finish`)), 10_000);
      stream.on("end", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return text;
  }

  /** Poll `check` until it passes or `ms` is up (then its last failure is thrown). */
  async function eventually(check: () => Promise<void>, ms = 30_000): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      try {
        return await check();
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  function appFile(name: string, appname: string, secretFiles: string[]): string {
    const path = join(dir, name);
    writeFileSync(
      path,
      [
        `appname: ${appname}`,
        "web:",
        // PID 1 ignores SIGTERM unless it traps it; without the trap every stop lasts killTimeout.
        `  cmd: "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"`,
        "  port: 8080",
        "  secret_files:",
        ...secretFiles.map((f) => `    - ${f}`),
        "notify:",
        '  slack: "#e2e"',
        "",
      ].join("\n"),
    );
    return path;
  }

  beforeAll(async () => {
    // Auto-unseal off: this test walks the operator's own init and unseal (docs/secrets.md).
    up = spawn(bin, ["up", "-web", "127.0.0.1:0", "-data", join(dir, "data"), "-unseal-key-file", "", "-cluster", services.cluster, "-update-wait", "1s", "-refresh-interval", "2s"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, CAPSTAN_WEB: "", CAPSTAN_ADMIN_TOKEN: "" },
    });
    up.stdout!.on("data", (d: Buffer) => (log += d.toString()));
    up.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    exited = new Promise((resolve) => up.on("exit", (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    while (!url && Date.now() < deadline) {
      const m = /"msg":"capstan is up"/.test(log) && /"address":\{"host":"127\.0\.0\.1","port":(\d+)\}/.exec(log);
      if (m) url = `http://127.0.0.1:${m[1]}`;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, `capstan up did not come up; log:\n${log}`).not.toBe("");
  });

  afterAll(async () => {
    if (up.exitCode === null) up.kill("SIGKILL");
    for (const c of await containersOf(proc)) await cluster.remove(c, { force: true, volumes: true });
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("step 1: the admin registers the app and a maintainer token; login saves it with mode 0600", async () => {
    const tokenFile = join(dir, "data", "admin-token");
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    const admin = await capstan(["login", "admin", "-url", url], readFileSync(tokenFile, "utf8"));
    expect(admin, admin.stderr).toMatchObject({ code: 0 });
    expect(statSync(join(home, ".capstan", "config.yaml")).mode & 0o777).toBe(0o600);

    const added = await capstan(["apps", "add", "admin", app, "-maintainer", "alice@example.com"]);
    expect(added, `${added.stderr}\n${log.slice(-4000)}`).toMatchObject({ code: 0, stdout: `app ${app} registered (maintainers: alice@example.com)\n` });
    expect((await capstan(["apps", "list"])).stdout).toMatch(new RegExp(`^${app} +alice@example\\.com`, "m"));

    const token = await capstan(["tokens", "create", "admin", "-user", "alice@example.com"]);
    expect(token.code, token.stderr).toBe(0);
    expect(token.stdout).toMatch(/^cst_[0-9a-f]{12}_\S+\n$/);
    const login = await capstan(["login", "local", "-url", url, "-token", token.stdout.trim()]);
    expect(login, login.stderr).toMatchObject({ code: 0 });
    // a maintainer token cannot register apps
    const denied = await capstan(["apps", "add", "local", unregistered, "-maintainer", "alice@example.com"]);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/^capstan apps add: Forbidden: /);
  });

  it("the secrets service starts sealed; init prints the shares once, unseal takes -key and standard input", async () => {
    const sealed = await capstan(["secret", "add", "local", proc, "config.yaml", "-c", "x"]);
    expect(sealed.code).toBe(1);
    expect(sealed.stderr).toContain("sealed");

    // Initializing is an admin's decision: the maintainer's login is refused, the admin's works.
    const refused = await capstan(["secrets", "init", "local", "-shares", "3", "-threshold", "2"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("needs an admin token");
    const init = await capstan(["secrets", "init", "admin", "-shares", "3", "-threshold", "2"]);
    expect(init.code, init.stderr).toBe(0);
    const keys = [...init.stdout.matchAll(/^Unseal key \d: (\S+)$/gm)].map((m) => m[1]!);
    expect(keys).toHaveLength(3);
    expect(init.stdout).toMatch(/^Root token: \S+$/m);
    expect(init.stderr).toContain("shown ONCE");
    expect((await capstan(["secrets", "init", "admin", "-shares", "1", "-threshold", "1"])).code).toBe(1);

    expect(await capstan(["secrets", "unseal", "local", "-key", keys[0]!])).toMatchObject({ code: 0, stdout: "still sealed: 1/2 shares given\n" });
    expect(await capstan(["secrets", "unseal", "local"], `${keys[2]}\n`)).toMatchObject({ code: 0, stdout: "unsealed\n" });
    const status = await capstan(["secrets", "status", "local"]);
    expect(JSON.parse(status.stdout)).toMatchObject({ initialized: true, sealed: false });
  });

  it("step 2: secrets are written through the CLI (-c, -f with a mode) and through the HTTP API", async () => {
    const c = await capstan(["secret", "add", "local", proc, "config.yaml", "-c", secrets.config]);
    expect(c, c.stderr).toMatchObject({ code: 0, stdout: `secret ${proc} config.yaml written\n` });
    const keyFile = join(dir, "key.pem");
    writeFileSync(keyFile, secrets.key);
    const f = await capstan(["secret", "add", "local", proc, `/etc/${app}/key.pem`, "-f", keyFile, "-mode", "440"]);
    expect(f, f.stderr).toMatchObject({ code: 0 });
    // The absolute spelling of a file under /platform/app is stored as its relative one.
    const abs = await capstan(["secret", "add", "local", proc, "/platform/app/abs.conf", "-c", secrets.abs]);
    expect(abs, abs.stderr).toMatchObject({ code: 0 });

    const config = readFileSync(join(home, ".capstan", "config.yaml"), "utf8");
    const token = /local:[\s\S]*?token: (\S+)/.exec(config)![1]!;
    // A body that is not the JSON object is stored whole as the content (docs/secrets.md, "Input rules").
    const put = await fetch(`${url}/v2/secrets?app=${app}&proc=${proc}&path=conf/raw.txt`, { method: "PUT", headers: { "access-token": token }, body: secrets.raw });
    expect(put.status).toBe(200);

    const view = await capstan(["secret", "view", "local", proc]);
    expect(view.code, view.stderr).toBe(0);
    const records = JSON.parse(view.stdout) as { path: string; content: string; mode: string; owner: string }[];
    expect(records.map((r) => [r.path, r.mode, r.owner, r.content])).toEqual([
      [`/etc/${app}/key.pem`, "440", "root", secrets.key],
      ["abs.conf", "400", "root", secrets.abs],
      ["conf/raw.txt", "400", "root", secrets.raw],
      ["config.yaml", "400", "root", secrets.config],
    ]);
    const one = await capstan(["secret", "view", "local", proc, "-path", "config.yaml", "-o", "table"]);
    expect(one.stdout).toMatch(/^config\.yaml +400 +root:root +\d+$/m);
    expect(one.stdout).not.toContain("key.pem");
    const whole = await capstan(["secret", "view", "local", app, "-o", "table"]);
    expect(whole.stdout.split("\n")[0]).toMatch(/^PROC +PATH +MODE +OWNER +BYTES$/);
    expect(whole.stdout.trim().split("\n")).toHaveLength(5);

    const usage = await capstan(["secret", "add", "local", proc, "x", "-c", "a", "-f", keyFile]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("exactly one of -c CONTENT or -f FILE");
  });

  it("step 3: deploy refuses an unregistered app and a missing secret file before creating anything", async () => {
    const unreg = await capstan(["deploy", "local", "-f", appFile("unreg.yaml", unregistered, ["config.yaml"]), "-image", services.testImage, "-network", "none"]);
    expect(unreg.code).toBe(1);
    expect(unreg.stderr).toContain(`app ${unregistered} is not registered`);

    const missing = await capstan(["deploy", "local", "-f", appFile("missing.yaml", app, ["config.yaml", "conf/missing.yaml", "/etc/also-missing"]), "-image", services.testImage, "-network", "none"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`2 secret files are not written for ${proc}:\n  conf/missing.yaml\n  /etc/also-missing\n`);
    const adminToken = readFileSync(join(dir, "data", "admin-token"), "utf8").trim();
    const group = await fetch(`${url}/api/podgroups?name=${proc}`, { headers: { "access-token": adminToken } });
    expect(group.status).toBe(404);

    const bad = await capstan(["deploy", "local", "-f", appFile("bad.yaml", app, ["../escape"]), "-image", services.testImage]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/bad\.yaml:6: web\.secret_files\[0\]: "\.\.\/escape" must not contain "\.\." segments/);
  });

  it("step 3: deploy -wait runs the web proc with its secret files: content, owner 0:0, mode", async () => {
    // Each file under the other spelling than it was written: config.yaml (written relative) listed
    // absolute, abs.conf (written absolute) listed relative.
    const file = appFile("app.yaml", app, ["/platform/app/config.yaml", `/etc/${app}/key.pem`, "conf/raw.txt", "abs.conf"]);
    const r = await capstan(["deploy", "local", "-f", file, "-image", services.testImage, "-network", "none", "-wait", "-timeout", "90s"]);
    expect(r.code, `${r.stdout}${r.stderr}\n${log.slice(-3000)}`).toBe(0);
    expect(r.stdout).toContain(`podgroup/${proc} created (PORT=8080)`);
    expect(r.stdout).toContain(`${proc}: 1/1 running at version 1`);

    const [container] = await containersOf(proc);
    expect(container?.state).toBe("running");
    const env = (await cluster.inspect(container!)).env;
    expect(env).toContain("PORT=8080");
    // Files may land a moment after start until the PodGroup side of the handshake holds the start.
    await eventually(async () => {
      const stat = await exec(container!, ["stat", "-c", "%n %u %g %a", "/platform/app/config.yaml", `/etc/${app}/key.pem`, "/platform/app/conf/raw.txt"]);
      expect(stat.trim().split("\n")).toEqual([`/platform/app/config.yaml 0 0 400`, `/etc/${app}/key.pem 0 0 440`, "/platform/app/conf/raw.txt 0 0 400"]);
    });
    expect(await exec(container!, ["cat", "/platform/app/config.yaml"])).toBe(secrets.config);
    expect(await exec(container!, ["cat", `/etc/${app}/key.pem`])).toBe(secrets.key);
    expect(await exec(container!, ["cat", "/platform/app/conf/raw.txt"])).toBe(secrets.raw);
    expect(await exec(container!, ["cat", "/platform/app/abs.conf"])).toBe(secrets.abs);

    const again = await capstan(["deploy", "local", "-f", file, "-image", services.testImage, "-network", "none"]);
    expect(again).toMatchObject({ code: 0, stdout: `podgroup/${proc} unchanged (PORT=8080)\n` });
  });

  it("changing a secret changes the file in the running container", async () => {
    const r = await capstan(["secret", "add", "local", proc, "config.yaml", "-c", secrets.changed]);
    expect(r.code, r.stderr).toBe(0);
    const [container] = await containersOf(proc);
    await eventually(async () => expect(await exec(container!, ["cat", "/platform/app/config.yaml"])).toBe(secrets.changed));
    expect((await exec(container!, ["stat", "-c", "%u %g %a", "/platform/app/config.yaml"])).trim()).toBe("0 0 400");
  });

  it("delete removes a record; the log never shows secret content", async () => {
    const del = await capstan(["secret", "delete", "local", proc, "conf/raw.txt"]);
    expect(del).toMatchObject({ code: 0, stdout: `secret ${proc} conf/raw.txt deleted\n` });
    const again = await capstan(["secret", "delete", "local", proc, "conf/raw.txt"]);
    expect(again).toMatchObject({ code: 0, stdout: `secret ${proc} conf/raw.txt did not exist\n` });
    // The deleted secret leaves the running container; the others stay.
    const [container] = await containersOf(proc);
    await eventually(async () => expect(await exec(container!, ["sh", "-c", "test -e /platform/app/conf/raw.txt && echo there || echo gone"])).toBe("gone\n"));
    expect(await exec(container!, ["cat", "/platform/app/abs.conf"])).toBe(secrets.abs);

    const gone = await capstan(["delete", "podgroup", proc, "-context", "local", "-wait", "-timeout", "60s"]);
    expect(gone.code, gone.stderr).toBe(0);
    expect(await containersOf(proc)).toEqual([]);

    up.kill("SIGTERM");
    expect(await exited).toBe(0);
    for (const content of Object.values(secrets)) expect(log).not.toContain(content.trim());
    expect(log).not.toContain(readFileSync(join(dir, "data", "admin-token"), "utf8").trim());
  });
});
