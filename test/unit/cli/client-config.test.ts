import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ClientConfigError, clientOptionDefs, configPath, normaliseServer, serverFromConfig, waitOptionDefs } from "../../../cli/client-config.ts";
import { clientFromOptions } from "../../../cli/client.ts";
import { parseArgs, UsageError } from "../../../cli/options.ts";

const defs = [...waitOptionDefs, ...clientOptionDefs];

describe("client options", () => {
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const emptyHome = mkdtempSync(join(tmpdir(), "capstan-home-"));
  afterAll(() => [home, emptyHome].forEach((d) => rmSync(d, { recursive: true, force: true })));
  mkdirSync(join(home, ".capstan"));
  writeFileSync(configPath(home), "# where my orchestrator is\nserver: 10.0.0.5:9000\n");

  it("defaults: no wait, 5 minutes of it when asked, 10 s per request", () => {
    expect(parseArgs([], defs, {}).options).toEqual({ wait: undefined, timeout: 300_000, "request-timeout": 10_000 });
    expect(parseArgs(["--wait", "--timeout", "30s"], defs, {}).options).toMatchObject({ wait: true, timeout: 30_000 });
  });

  it("takes the server from -server, then CAPSTAN_SERVER, then ~/.capstan/config.yaml, then the default", () => {
    const server = (argv: string[], env: Record<string, string>, h: string) => clientFromOptions(parseArgs(argv, defs, env).options, h).server;
    expect(server(["-server", "http://127.0.0.2:9"], { CAPSTAN_SERVER: "http://127.0.0.3:9" }, home)).toBe("http://127.0.0.2:9");
    expect(server([], { CAPSTAN_SERVER: "http://127.0.0.3:9" }, home)).toBe("http://127.0.0.3:9");
    expect(server([], {}, home)).toBe("http://10.0.0.5:9000");
    expect(server([], {}, emptyHome)).toBe("http://127.0.0.1:9000");
  });

  it("accepts host:port without a scheme and refuses what is not an http URL", () => {
    expect(normaliseServer("127.0.0.1:9000", "-server")).toBe("http://127.0.0.1:9000");
    expect(normaliseServer("https://orch.example/", "-server")).toBe("https://orch.example");
    expect(() => normaliseServer("ftp://x", "-server")).toThrow(UsageError);
    expect(() => normaliseServer("http://[bad", "-server")).toThrow(/-server: "http:\/\/\[bad" is not a URL/);
  });

  it("names the file and line of a broken config file", () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-conf-"));
    try {
      const path = join(dir, "config.yaml");
      writeFileSync(path, "server: http://a:1\nserver: http://b:2\n");
      expect(() => serverFromConfig(path)).toThrow(new ClientConfigError(`${path}:2:1: Map keys must be unique`));
      writeFileSync(path, "server: 9000\n");
      expect(() => serverFromConfig(path)).toThrow(/server must be a URL string/);
      writeFileSync(path, "# empty\n");
      expect(serverFromConfig(path)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
