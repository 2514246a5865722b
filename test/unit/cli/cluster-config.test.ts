// Cluster entries in ~/.capstan/config.yaml: `capstan login` writes them with mode 0600 (keeping
// what else the file holds), the cluster commands read them, and the orchestrator precedence of
// apply/get/scale/delete takes them into account without changing what `server:` meant.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { clientOptionDefs, ClientConfigError, clusterFromConfig, configPath, readClientConfig, saveCluster } from "../../../cli/client-config.ts";
import { clientFromOptions } from "../../../cli/client.ts";
import { appOfProc, clusterClients, clusterCommandOptionDefs, positionals } from "../../../cli/cluster-options.ts";
import { run as login } from "../../../cli/commands/login.ts";
import { parseArgs, UsageError } from "../../../cli/options.ts";

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

const entry = { orchestrator: "http://127.0.0.2:9000", secrets: "http://127.0.0.2:9001", console: "http://127.0.0.2:9002", token: "cst_0123456789ab_secret" };

describe("cluster entries", () => {
  it("are saved with mode 0600 in a 0700 folder, made current, and read back", () => {
    const h = home();
    const path = saveCluster("prod", entry, h);
    expect(path).toBe(configPath(h));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(h, ".capstan")).mode & 0o777).toBe(0o700);
    expect(readClientConfig(path)).toEqual({ clusters: { prod: entry }, current: "prod" });
    expect(clusterFromConfig("prod", h)).toEqual(entry);
  });

  it("keep the rest of the file, comments included, and tighten a file that was readable by others", () => {
    const h = home();
    mkdirSync(join(h, ".capstan"));
    writeFileSync(configPath(h), "# my orchestrator\nserver: http://10.0.0.5:9000\n", { mode: 0o644 });
    saveCluster("a", entry, h);
    saveCluster("b", { ...entry, token: "cst_ba9876543210_other" }, h);
    const text = readFileSync(configPath(h), "utf8");
    expect(text).toContain("# my orchestrator");
    expect(statSync(configPath(h)).mode & 0o777).toBe(0o600);
    const config = readClientConfig(configPath(h));
    expect(config.server).toBe("http://10.0.0.5:9000");
    expect(Object.keys(config.clusters)).toEqual(["a", "b"]);
    expect(config.current).toBe("b");
  });

  it("name capstan login when the cluster is not saved, and refuse bad names and bad values", () => {
    const h = home();
    expect(() => clusterFromConfig("prod", h)).toThrow(new ClientConfigError(`no cluster "prod" in ${configPath(h)}: run capstan login prod first`));
    expect(() => clusterFromConfig("../x", h)).toThrow(UsageError);
    mkdirSync(join(h, ".capstan"));
    writeFileSync(configPath(h), "clusters:\n  prod:\n    secrets: 9001\n");
    expect(() => readClientConfig(configPath(h))).toThrow(/clusters\.prod\.secrets must be a URL string/);
  });

  it("orchestrator precedence: -server, -context, server:, the current cluster, the default", () => {
    const h = home();
    const server = (argv: string[], at = h) => clientFromOptions(parseArgs(argv, clientOptionDefs, {}).options, at).server;
    expect(server([])).toBe("http://127.0.0.1:9000");
    saveCluster("prod", entry, h);
    expect(server([])).toBe("http://127.0.0.2:9000");
    saveCluster("stage", { ...entry, orchestrator: "http://127.0.0.3:9000" }, h);
    expect(server([])).toBe("http://127.0.0.3:9000");
    expect(server(["-context", "prod"])).toBe("http://127.0.0.2:9000");
    expect(server(["-server", "127.0.0.4:1", "-context", "prod"])).toBe("http://127.0.0.4:1");
    writeFileSync(configPath(h), `server: http://127.0.0.5:9000\n${readFileSync(configPath(h), "utf8")}`);
    expect(server([])).toBe("http://127.0.0.5:9000");
    expect(server(["-context", "prod"])).toBe("http://127.0.0.2:9000");
  });

  it("clients point at the cluster's three services", () => {
    const h = home();
    saveCluster("prod", entry, h);
    const saved = clusterClients("prod", parseArgs([], clusterCommandOptionDefs, {}).options, h);
    expect(saved.secrets.server).toBe(entry.secrets);
    expect(saved.console.server).toBe(entry.console);
    expect(saved.orchestrator.server).toBe(entry.orchestrator);
  });
});

describe("capstan login", () => {
  it("saves the URLs and the token; -url sets all three; omitted URLs keep their saved value", async () => {
    const h = home();
    vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    expect(await login(["local", "-url", "127.0.0.1:7000", "-token", "cst_0123456789ab_x"], h)).toBe(0);
    expect(clusterFromConfig("local", h)).toEqual({
      orchestrator: "http://127.0.0.1:7000",
      secrets: "http://127.0.0.1:7000",
      console: "http://127.0.0.1:7000",
      token: "cst_0123456789ab_x",
    });
    expect(await login(["local", "-secrets", "http://127.0.0.1:7001", "-token", "cst_0123456789ab_y"], h)).toBe(0);
    expect(clusterFromConfig("local", h)).toMatchObject({ orchestrator: "http://127.0.0.1:7000", secrets: "http://127.0.0.1:7001", token: "cst_0123456789ab_y" });
    expect(statSync(configPath(h)).mode & 0o777).toBe(0o600);
  });

  it("refuses a missing cluster name, a bad URL and a token with spaces", async () => {
    await expect(login([], home())).rejects.toThrow(new UsageError("CLUSTER is required, e.g. capstan login prod"));
    await expect(login(["p", "-url", "ftp://x", "-token", "t"], home())).rejects.toThrow(/-url: "ftp:\/\/x" must be an http/);
    await expect(login(["p", "-token", "a b"], home())).rejects.toThrow(/white space/);
  });
});

describe("proc names and positionals", () => {
  it("take the app from <app>.<type>.<proc_name>", () => {
    expect(appOfProc("hello.web.web")).toBe("hello");
    expect(() => appOfProc("hello")).toThrow(new UsageError('proc "hello" must be <app>.<type>.<proc_name>, e.g. hello.web.web'));
    expect(() => appOfProc("hello..web")).toThrow(UsageError);
  });

  it("say which positional is missing or extra", () => {
    expect(() => positionals(["a"], ["CLUSTER", "PROC", "PATH"], "ex")).toThrow(new UsageError("PROC and PATH are required, e.g. ex"));
    expect(() => positionals([], ["CLUSTER"], "ex")).toThrow(new UsageError("CLUSTER is required, e.g. ex"));
    expect(() => positionals(["a", "b"], ["CLUSTER"], "ex")).toThrow(new UsageError('unexpected argument "b"'));
  });
});
