// The token and the CA of the client commands: where each comes from (-token / CAPSTAN_TOKEN, the
// cluster the command talks to; -ca / CAPSTAN_CA, the cluster's `ca:`, the top-level `ca:`, the
// system roots), `capstan login -ca`, and that every client sends the token with every request.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ClientConfigError, clientOptionDefs, clusterFromConfig, configPath, readClientConfig, saveCluster, targetFromOptions } from "../../../cli/client-config.ts";
import { clientFromOptions } from "../../../cli/client.ts";
import { clusterClients, clusterCommandOptionDefs } from "../../../cli/cluster-options.ts";
import { run as login } from "../../../cli/commands/login.ts";
import { parseArgs, UsageError } from "../../../cli/options.ts";
import { makePki, type Pki } from "../../helpers/certs.ts";

const homes: string[] = [];
function home(): string {
  const h = mkdtempSync(join(tmpdir(), "capstan-home-"));
  homes.push(h);
  return h;
}
afterEach(() => {
  homes.splice(0).forEach((h) => rmSync(h, { recursive: true, force: true }));
  vi.restoreAllMocks();
});

let pki: Pki;
beforeAll(async () => {
  pki = await makePki();
}, 60_000);
afterAll(() => pki?.remove());

const prod = { orchestrator: "http://127.0.0.2:9000", secrets: "http://127.0.0.2:9001", console: "http://127.0.0.2:9002", token: "cst_000000000002_prod" };
const stage = { orchestrator: "http://127.0.0.3:9000", secrets: "http://127.0.0.3:9001", console: "http://127.0.0.3:9002", token: "cst_000000000003_stage" };

function target(argv: string[], h: string, env: Record<string, string> = {}) {
  return targetFromOptions(parseArgs(argv, clientOptionDefs, env).options, h);
}

describe("the token of an orchestrator command", () => {
  it("is -token, else CAPSTAN_TOKEN, else the -context cluster's, else the current cluster's when the URL is its", () => {
    const h = home();
    expect(target([], h)).toEqual({ server: "http://127.0.0.1:9000" });
    saveCluster("stage", stage, h);
    saveCluster("prod", prod, h);
    expect(target([], h)).toMatchObject({ server: prod.orchestrator, token: prod.token, cluster: "prod" });
    expect(target(["-context", "stage"], h)).toMatchObject({ server: stage.orchestrator, token: stage.token, cluster: "stage" });
    expect(target([], h, { CAPSTAN_TOKEN: "cst_env" })).toMatchObject({ server: prod.orchestrator, token: "cst_env" });
    expect(target(["-token", "cst_flag"], h, { CAPSTAN_TOKEN: "cst_env" })).toMatchObject({ token: "cst_flag" });
    expect(target(["-context", "stage", "-token", "cst_flag"], h)).toMatchObject({ server: stage.orchestrator, token: "cst_flag" });
    // -server with -context: the context's credentials go to the given URL (kubectl's --context).
    expect(target(["-context", "stage", "-server", "127.0.0.9:1"], h)).toMatchObject({ server: "http://127.0.0.9:1", token: stage.token });
  });

  it("with -server, CAPSTAN_SERVER or server:, is the token of the saved cluster with that URL, and never goes elsewhere", () => {
    const h = home();
    saveCluster("stage", stage, h);
    saveCluster("prod", prod, h);
    expect(target(["-server", stage.orchestrator], h)).toMatchObject({ token: stage.token, cluster: "stage" });
    expect(target([], h, { CAPSTAN_SERVER: stage.orchestrator })).toMatchObject({ token: stage.token });
    const elsewhere = target(["-server", "http://127.0.0.9:9000"], h);
    expect(elsewhere).toEqual({ server: "http://127.0.0.9:9000" });
    writeFileSync(configPath(h), `server: ${stage.orchestrator}\n${readFileSync(configPath(h), "utf8")}`);
    expect(target([], h)).toMatchObject({ server: stage.orchestrator, token: stage.token });
    writeFileSync(configPath(h), readFileSync(configPath(h), "utf8").replace(`server: ${stage.orchestrator}`, "server: http://127.0.0.8:9000"));
    expect(target([], h)).toEqual({ server: "http://127.0.0.8:9000" });
  });

  it("of two saved clusters with the same URL, is the current one's, and none when neither is current", () => {
    const h = home();
    saveCluster("admin", { ...prod, token: "cst_admin" }, h);
    saveCluster("bob", { ...prod, token: "cst_bob" }, h);
    expect(target(["-server", prod.orchestrator], h)).toMatchObject({ token: "cst_bob" });
    saveCluster("other", stage, h);
    expect(target(["-server", prod.orchestrator], h)).toEqual({ server: prod.orchestrator });
  });

  it("reaches the client: clientFromOptions sends it", async () => {
    const h = home();
    const seen = await recorder();
    try {
      saveCluster("local", { ...prod, orchestrator: seen.url, token: "cst_0123456789ab_local" }, h);
      await clientFromOptions(parseArgs([], clientOptionDefs, {}).options, h).listNodes();
      expect(seen.headers.at(-1)?.["access-token"]).toBe("cst_0123456789ab_local");
    } finally {
      await seen.close();
    }
  });
});

describe("the CA of a client command", () => {
  it("is -ca, else CAPSTAN_CA, else the cluster's ca:, else the top-level ca:, else none (the system roots)", () => {
    const h = home();
    const dir = mkdtempSync(join(h, "cas-"));
    const files = ["flag", "env", "cluster", "top"].map((n) => {
      const f = join(dir, `${n}.pem`);
      writeFileSync(f, readFileSync(pki.ca));
      return f;
    });
    const [flag, env, cluster, top] = files as [string, string, string, string];
    saveCluster("prod", { ...prod, ca: cluster }, h);
    saveCluster("stage", stage, h);
    expect(target([], h).ca).toBeUndefined();
    expect(target(["-context", "prod"], h).ca?.source).toBe(`${cluster} (clusters.prod.ca in ${configPath(h)})`);
    writeFileSync(configPath(h), `ca: ${top}\n${readFileSync(configPath(h), "utf8")}`);
    expect(target([], h).ca?.source).toBe(`${top} (ca in ${configPath(h)})`);
    expect(target(["-context", "prod"], h).ca?.source).toContain(cluster);
    expect(target(["-context", "prod"], h, { CAPSTAN_CA: env }).ca?.source).toBe(`${env} (-ca)`);
    expect(target(["-context", "prod", "-ca", flag], h, { CAPSTAN_CA: env }).ca?.source).toBe(`${flag} (-ca)`);
    expect(target(["-ca", flag], h).ca?.pem).toBe(readFileSync(pki.ca, "utf8"));
    const clients = clusterClients("prod", parseArgs([], clusterCommandOptionDefs, {}).options, h);
    expect(clients.console.server).toBe(prod.console);
  });

  it("reads relative ca: paths from the config folder and ~/ from the home folder", () => {
    const h = home();
    mkdirSync(join(h, ".capstan"));
    writeFileSync(configPath(h), "ca: ca.pem\nclusters:\n  prod: {orchestrator: http://127.0.0.2:9000, ca: ~/certs/prod.pem}\n");
    const config = readClientConfig(configPath(h));
    expect(config.ca).toBe(join(h, ".capstan", "ca.pem"));
    expect(config.clusters.prod?.ca).toBe(join(h, "certs", "prod.pem"));
    writeFileSync(configPath(h), "ca: 5\n");
    expect(() => readClientConfig(configPath(h))).toThrow(/ca must be the path of a CA certificate file/);
  });

  it("errors name the option or the config key, and the path", () => {
    const h = home();
    const missing = join(h, "nope.pem");
    expect(() => target(["-ca", missing], h)).toThrow(new UsageError(`-ca ${missing}: cannot read the CA file (ENOENT)`));
    const notPem = join(h, "x.pem");
    writeFileSync(notPem, "hello\n");
    expect(() => target(["-ca", notPem], h)).toThrow(new UsageError(`-ca ${notPem}: not a PEM CA certificate (no "-----BEGIN CERTIFICATE-----" block)`));
    const broken = join(h, "broken.pem");
    writeFileSync(broken, "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n");
    expect(() => target(["-ca", broken], h)).toThrow(/^-ca .*broken\.pem: not a usable CA certificate/);
    saveCluster("prod", { ...prod, ca: missing }, h);
    const err = (() => {
      try {
        target([], h);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ClientConfigError);
    expect((err as Error).message).toBe(`${configPath(h)}: clusters.prod.ca ${missing}: cannot read the CA file (ENOENT)`);
  });
});

describe("capstan login -ca", () => {
  it("saves the CA's absolute path, keeps it when not given, forgets it with -ca ''", async () => {
    const h = home();
    vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const cwd = process.cwd();
    process.chdir(pki.dir);
    try {
      expect(await login(["local", "-url", "https://127.0.0.1:7000", "-token", "cst_0123456789ab_x", "-ca", "ca.pem"], h)).toBe(0);
    } finally {
      process.chdir(cwd);
    }
    expect(clusterFromConfig("local", h)).toEqual({
      orchestrator: "https://127.0.0.1:7000",
      secrets: "https://127.0.0.1:7000",
      console: "https://127.0.0.1:7000",
      token: "cst_0123456789ab_x",
      ca: pki.ca,
    });
    expect(readFileSync(configPath(h), "utf8")).toContain(`ca: ${pki.ca}`);
    expect(await login(["local", "-token", "cst_0123456789ab_y"], h)).toBe(0);
    expect(clusterFromConfig("local", h)).toMatchObject({ token: "cst_0123456789ab_y", ca: pki.ca });
    expect(await login(["local", "-token", "cst_0123456789ab_y", "-ca", ""], h)).toBe(0);
    expect(clusterFromConfig("local", h).ca).toBeUndefined();
  });

  it("refuses a CA file it cannot read before saving anything", async () => {
    const h = home();
    await expect(login(["local", "-token", "t", "-ca", join(h, "nope.pem")], h)).rejects.toThrow(/^-ca .*nope\.pem: cannot read the CA file \(ENOENT\)$/);
    expect(readClientConfig(configPath(h)).clusters).toEqual({});
  });
});

describe("the clients of a cluster", () => {
  it("send the token to all three services, the orchestrator included", async () => {
    const h = home();
    const seen = await recorder();
    try {
      saveCluster("local", { orchestrator: seen.url, secrets: seen.url, console: seen.url, token: "cst_0123456789ab_saved" }, h);
      const clients = clusterClients("local", parseArgs([], clusterCommandOptionDefs, {}).options, h);
      await clients.orchestrator.listNodes();
      await clients.console.listApps();
      await clients.secrets.list("shop");
      expect(seen.headers.map((x) => x["access-token"])).toEqual(["cst_0123456789ab_saved", "cst_0123456789ab_saved", "cst_0123456789ab_saved"]);
      const overridden = clusterClients("local", parseArgs([], clusterCommandOptionDefs, { CAPSTAN_TOKEN: "cst_0123456789ab_env" }).options, h);
      await overridden.orchestrator.listNodes();
      expect(seen.headers.at(-1)?.["access-token"]).toBe("cst_0123456789ab_env");
    } finally {
      await seen.close();
    }
  });
});

/** An HTTP server on 127.0.0.1 that answers `[]` and keeps every request's headers. */
async function recorder(): Promise<{ url: string; headers: IncomingHttpHeaders[]; close: () => Promise<void> }> {
  const headers: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    headers.push(req.headers);
    res.writeHead(200, { "content-type": "application/json" }).end("[]");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    headers,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
