import { describe, expect, it } from "vitest";
import { formatDuration, parseDuration } from "../../../runtime/duration.ts";
import { envName, parseArgs, usage, UsageError, type OptionDef } from "../../../cli/options.ts";
import { jsonAliasDef, outputFormat, outputOptionDef } from "../../../cli/output-option.ts";

const defs: OptionDef[] = [
  { name: "web", type: "string", help: "listen address", default: ":9000" },
  { name: "update-wait", type: "duration", help: "wait between removal and redeploy", default: "10s" },
  { name: "workers", type: "int", help: "workers", default: 4 },
  { name: "force", type: "bool", help: "force" },
  { name: "file", type: "string", help: "file", short: "f" },
];

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["10s", 10_000],
    ["5m", 300_000],
    ["1h", 3_600_000],
    ["1m30s", 90_000],
    ["1.5s", 1_500],
    ["0", 0],
  ])("%s = %d ms", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["10", "", "s", "10x", "-1s", "10 s"])("refuses %j", (text) => {
    expect(() => parseDuration(text)).toThrow(/invalid duration/);
  });

  it("formats back to the shortest unit", () => {
    expect(formatDuration(300_000)).toBe("5m");
    expect(formatDuration(10_000)).toBe("10s");
    expect(formatDuration(1_500)).toBe("1500ms");
  });
});

describe("parseArgs", () => {
  it("accepts Go-style single dash and GNU double dash, with or without =", () => {
    for (const argv of [["-web", ":1"], ["--web", ":1"], ["-web=:1"], ["--web=:1"]]) {
      expect(parseArgs(argv, defs, {}).options.web).toBe(":1");
    }
  });

  it("applies defaults, then the environment, then the command line", () => {
    expect(parseArgs([], defs, {}).options).toMatchObject({ web: ":9000", "update-wait": 10_000, workers: 4 });
    expect(parseArgs([], defs, { CAPSTAN_WEB: ":7", CAPSTAN_UPDATE_WAIT: "2s" }).options).toMatchObject({ web: ":7", "update-wait": 2000 });
    expect(parseArgs(["-web", ":8"], defs, { CAPSTAN_WEB: ":7" }).options.web).toBe(":8");
  });

  it("parses bools as flags or with an attached value, and short aliases", () => {
    expect(parseArgs(["-force"], defs, {}).options.force).toBe(true);
    expect(parseArgs(["--force=false"], defs, {}).options.force).toBe(false);
    expect(parseArgs(["-f", "x.yaml"], defs, {}).options.file).toBe("x.yaml");
  });

  it("keeps positionals and recognises -h", () => {
    const p = parseArgs(["podgroup", "web", "-h", "--", "-web"], defs, {});
    expect(p.positionals).toEqual(["podgroup", "web", "-web"]);
    expect(p.help).toBe(true);
  });

  it("names the option in every error", () => {
    expect(() => parseArgs(["-nope"], defs, {})).toThrow(new UsageError("unknown option -nope"));
    expect(() => parseArgs(["-web"], defs, {})).toThrow(/-web needs a value/);
    expect(() => parseArgs(["-update-wait", "10"], defs, {})).toThrow(/-update-wait: invalid duration/);
    expect(() => parseArgs(["-workers", "x"], defs, {})).toThrow(/-workers: "x" is not a whole number/);
    expect(() => parseArgs(["-force=maybe"], defs, {})).toThrow(/-force: "maybe" is not true or false/);
    expect(() => parseArgs([], defs, { CAPSTAN_WORKERS: "many" })).toThrow(/CAPSTAN_WORKERS/);
  });

  it("usage lists every option with default and environment variable", () => {
    const text = usage("orchestrator", "Runs the orchestrator.", defs);
    expect(text).toContain("-update-wait DURATION");
    expect(text).toContain("(default 10s) [CAPSTAN_ORCHESTRATOR_UPDATE_WAIT]");
    expect(text).toContain("-file, -f VALUE");
    expect(usage("secrets init", "", [{ name: "shares", type: "int", help: "shares" }, { name: "token", type: "string", help: "t" }])).toMatch(
      /\[CAPSTAN_SECRETS_SHARES\][\s\S]*\[CAPSTAN_TOKEN\]/,
    );
  });

  it("takes a negative number for a positional, not for an unknown option", () => {
    expect(parseArgs(["web", "-1"], defs, {}).positionals).toEqual(["web", "-1"]);
    expect(() => parseArgs(["web", "-x1"], defs, {})).toThrow(new UsageError("unknown option -x1"));
  });
});

describe("environment variables per command", () => {
  const serverDefs: OptionDef[] = [
    { name: "web", type: "string", help: "listen address", default: "127.0.0.1:9002" },
    { name: "store", type: "string", help: "store" },
    { name: "token", type: "string", help: "token" },
  ];
  const quiet = { warn: () => {} };

  it("reads CAPSTAN_<COMMAND>_<OPTION>, so CAPSTAN_WEB meant for one server never moves another", () => {
    const env = { CAPSTAN_WEB: "127.0.0.1:9000", CAPSTAN_UP_WEB: "127.0.0.1:9100" };
    expect(parseArgs([], serverDefs, env, { command: "console", ...quiet }).options.web).toBe("127.0.0.1:9002");
    expect(parseArgs([], serverDefs, env, { command: "up", ...quiet }).options.web).toBe("127.0.0.1:9100");
    expect(parseArgs([], serverDefs, { CAPSTAN_CONSOLE_WEB: ":9" }, { command: "console" }).options.web).toBe(":9");
    expect(envName("web", "console")).toBe("CAPSTAN_CONSOLE_WEB");
    expect(envName("allowed-host-paths", "secrets init")).toBe("CAPSTAN_SECRETS_ALLOWED_HOST_PATHS");
  });

  it("reads the shared ones (store, engines, server, token, CA) as CAPSTAN_<OPTION> in every command", () => {
    const env = { CAPSTAN_STORE: "etcd://127.0.0.1:2379", CAPSTAN_TOKEN: "t" };
    for (const command of ["console", "up", "secrets"]) {
      expect(parseArgs([], serverDefs, env, { command, ...quiet }).options).toMatchObject({ store: "etcd://127.0.0.1:2379", token: "t" });
    }
    for (const o of ["store", "store-password-file", "cluster", "docker-tls-ca", "server", "context", "token", "ca", "request-timeout", "root-token"]) {
      expect(envName(o, "console")).toBe(`CAPSTAN_${o.toUpperCase().replace(/-/g, "_")}`);
    }
  });

  it("says once that a variable of the old form is not read, naming the one that is", () => {
    const lines: string[] = [];
    parseArgs([], serverDefs, { CAPSTAN_WEB: "127.0.0.1:9000" }, { command: "console", warn: (l) => lines.push(l) });
    expect(lines).toEqual(['capstan console: CAPSTAN_WEB is not read: -web reads CAPSTAN_CONSOLE_WEB (docs/cli.md, "Environment variables")']);
    // Not when the option was given, its own variable is set, or the variable is empty.
    for (const [argv, env] of [
      [["-web", ":1"], { CAPSTAN_WEB: ":2" }],
      [[], { CAPSTAN_WEB: ":2", CAPSTAN_CONSOLE_WEB: ":3" }],
      [[], { CAPSTAN_WEB: "" }],
    ] as const) {
      const more: string[] = [];
      parseArgs([...argv], serverDefs, env, { command: "console", warn: (l) => more.push(l) });
      expect(more).toEqual([]);
    }
  });

  it("without a command (code outside the CLI), reads CAPSTAN_<OPTION>", () => {
    expect(parseArgs([], serverDefs, { CAPSTAN_WEB: ":5" }).options.web).toBe(":5");
    expect(envName("web", undefined)).toBe("CAPSTAN_WEB");
  });
});

describe("-o table|json", () => {
  const defs: OptionDef[] = [outputOptionDef(["table", "json"], "the records"), jsonAliasDef];

  it("chooses the format, refusing others by name", () => {
    expect(outputFormat(parseArgs([], defs, {}).options, ["table", "json"])).toBe("table");
    expect(outputFormat(parseArgs(["-o", "json"], defs, {}).options, ["table", "json"])).toBe("json");
    expect(outputFormat(parseArgs(["--output=json"], defs, {}).options, ["table", "json"])).toBe("json");
    expect(() => outputFormat(parseArgs(["-o", "yaml"], defs, {}).options, ["table", "json"])).toThrow(new UsageError('-output: "yaml" is not table or json'));
  });

  it("keeps -json as a deprecated alias: it works, -h marks it, and using it says what to write", () => {
    const lines: string[] = [];
    expect(outputFormat(parseArgs(["-json"], defs, {}, { command: "nodes", warn: (l) => lines.push(l) }).options, ["table", "json"])).toBe("json");
    expect(lines).toEqual(["capstan nodes: -json is deprecated: use -o json"]);
    expect(usage("nodes", "", defs)).toMatch(/-json +the same as -o json \(deprecated: use -o json\) \[CAPSTAN_NODES_JSON\]/);
  });
});
