// The real `capstan` binary over HTTPS: a `capstan up` process serving with -tls-cert and -tls-key
// (a CA and a server certificate made for this run), and the CLI as a user runs it, with its own
// HOME: `login -url https://... -ca CA`, then the console and orchestrator commands (tokens, apps,
// whoami, nodes, get) verify the server with that CA; without a CA, or with another one, they refuse it with a message
// that says why. Everything listens on and talks to 127.0.0.1 only.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadServices } from "../helpers/services.ts";
import { makePki, type IssuedCert, type Pki } from "../helpers/certs.ts";

const bin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

describe("the CLI and capstan up over HTTPS", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-https-e2e-"));
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const env: Record<string, string | undefined> = {
    ...process.env,
    HOME: home,
    CAPSTAN_SERVER: "",
    CAPSTAN_WEB: "",
    CAPSTAN_TOKEN: "",
    CAPSTAN_CA: "",
    CAPSTAN_CONTEXT: "",
    CAPSTAN_ADMIN_TOKEN: "",
    CAPSTAN_STORE: "",
    CAPSTAN_TLS_CERT: "",
    CAPSTAN_TLS_KEY: "",
    CAPSTAN_AUTH: "",
  };
  let pki: Pki;
  let otherPki: Pki;
  let cert: IssuedCert;
  let child: ChildProcess | undefined;
  let log = "";
  let url = "";

  function capstan(args: string[], input = "", extraEnv: Record<string, string> = {}): Promise<Ran> {
    return new Promise((resolve) => {
      const c = execFile(bin, args, { timeout: 60_000, env: { ...env, ...extraEnv } }, (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
      );
      c.stdin!.end(input);
    });
  }

  beforeAll(async () => {
    [pki, otherPki] = await Promise.all([makePki(), makePki("another-ca")]);
    cert = await pki.issue("server", { dns: ["localhost"], ip: ["127.0.0.1"] });
    // capstan up: the orchestrator, the console and the secrets service, all over HTTPS.
    const args = ["up", "-web", "127.0.0.1:0", "-tls-cert", cert.cert, "-tls-key", cert.key, "-data", dir, "-cluster", loadServices().cluster];
    child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env });
    child.stdout!.on("data", (d: Buffer) => (log += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    const deadline = Date.now() + 30_000;
    while (!url && Date.now() < deadline && child.exitCode === null) {
      const m = /"address":\{"host":"127\.0\.0\.1","port":(\d+)\}[^\n]*"msg":"capstan is up"/.exec(log);
      if (m) url = `https://127.0.0.1:${m[1]}`;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, `capstan up did not come up; log:\n${log}`).not.toBe("");
  });

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
    await pki?.remove();
    await otherPki?.remove();
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("the console serves HTTPS: its log says so", () => {
    expect(log).toMatch(/"scheme":"https","msg":"serving"/);
  });

  it("login -url https://... -ca CA saves the CA; tokens, apps and whoami then work over HTTPS", async () => {
    const admin = readFileSync(join(dir, "admin-token"), "utf8");
    const login = await capstan(["login", "tls", "-url", url, "-ca", pki.ca], admin);
    expect(login.code, login.stderr).toBe(0);
    expect(readFileSync(join(home, ".capstan", "config.yaml"), "utf8")).toContain(`ca: ${pki.ca}`);

    const listed = await capstan(["tokens", "list"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/^ID\s+USER\s+ROLE\s+APPS\s+CREATED\s+EXPIRES\s+ORIGIN\n/);
    expect(listed.stdout).toMatch(/^\S{12}\s+\S+\s+admin\s/m);

    const app = await capstan(["apps", "add", "tls", "shop", "-maintainer", "alice@example.com"]);
    expect(app.code, app.stderr).toBe(0);
    const viewer = await capstan(["tokens", "create", "tls", "-user", "carol@example.com", "-role", "viewer", "-apps", "shop"]);
    expect(viewer.code, viewer.stderr).toBe(0);
    expect(viewer.stderr).toMatch(/for carol@example\.com \(role viewer, apps shop\)/);
    const again = await capstan(["tokens", "list", "tls"]);
    expect(again.stdout).toMatch(/\s+carol@example\.com\s+viewer\s+shop\s/);

    const me = await capstan(["whoami"]);
    expect(me.code, me.stderr).toBe(0);
    expect(me.stdout).toMatch(/^user \S+ \(token [0-9a-f]{12}\), role admin, apps: all\n$/);
    const carol = await capstan(["whoami", "-token", viewer.stdout.trim()]);
    expect(carol.stdout).toMatch(/^user carol@example\.com \(token [0-9a-f]{12}\), role viewer, apps: shop\n$/);

    // The orchestrator's client commands over the same HTTPS address, with the saved token and CA.
    const nodes = await capstan(["nodes"]);
    expect(nodes.code, nodes.stderr).toBe(0);
    expect(nodes.stdout).toMatch(/^NAME\s/);
    // -o json: the server's records; -json, the older spelling, still works and says it is deprecated.
    const nodesJson = await capstan(["nodes", "-o", "json"]);
    expect(nodesJson.code, nodesJson.stderr).toBe(0);
    expect((JSON.parse(nodesJson.stdout) as { name: string }[]).length).toBeGreaterThan(0);
    const old = await capstan(["nodes", "-json"]);
    expect(JSON.parse(old.stdout)).toEqual(JSON.parse(nodesJson.stdout).map(() => expect.objectContaining({ name: expect.any(String) })));
    expect(old.stderr).toContain("capstan nodes: -json is deprecated: use -o json");
    const eventsJson = await capstan(["events", "-o", "json"]);
    expect(eventsJson.code, eventsJson.stderr).toBe(0);
    expect(Array.isArray(JSON.parse(eventsJson.stdout))).toBe(true);
    const groups = await capstan(["get", "podgroups"]);
    expect(groups.code, groups.stderr).toBe(0);
  });

  it("without a CA the server is refused, with a message naming it, the cause and -ca", async () => {
    const admin = readFileSync(join(dir, "admin-token"), "utf8");
    expect((await capstan(["login", "noca", "-url", url], admin)).code).toBe(0);
    const r = await capstan(["tokens", "list", "noca"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `capstan tokens list: cannot verify the console at ${url}: certificate signed by unknown authority (UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate): ` +
        "it is not signed by a CA of the system roots; give the CA that signed it with -ca FILE, CAPSTAN_CA, or capstan login CLUSTER -ca FILE\n",
    );
    expect(r.stderr).not.toContain("fetch failed");
    // CAPSTAN_CA gives it.
    const env = await capstan(["tokens", "list", "noca"], "", { CAPSTAN_CA: pki.ca });
    expect(env.code, env.stderr).toBe(0);
  });

  it("with another CA the server is refused, and the message names that CA's file", async () => {
    const r = await capstan(["tokens", "list", "tls", "-ca", otherPki.ca]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot verify the console at ${url}: certificate signed by unknown authority`);
    expect(r.stderr).toContain(`it is not signed by the CA in ${otherPki.ca} (-ca)`);
    const login = await capstan(["login", "other", "-url", url, "-ca", otherPki.ca, "-token", "cst_000000000000_x"]);
    expect(login.code).toBe(0);
    const whoami = await capstan(["whoami", "-context", "other"]);
    expect(whoami.code).toBe(1);
    expect(whoami.stderr).toContain(`it is not signed by the CA in ${otherPki.ca} (clusters.other.ca in ${join(home, ".capstan", "config.yaml")})`);
  });

  it("a server command given -tls-cert without -tls-key refuses to start (exit 2)", async () => {
    const r = await capstan(["console", "-web", "127.0.0.1:0", "-tls-cert", cert.cert, "-store", `sqlite://${dir}/other.db`, "-admin-token-file", join(dir, "other-token")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("-tls-key is missing: HTTPS needs both -tls-cert and -tls-key");
  });
});
