import { describe, expect, it } from "vitest";
import { formatDuration, parseDuration } from "../../../cli/duration.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../../../cli/options.ts";

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
    expect(text).toContain("(default 10s) [CAPSTAN_UPDATE_WAIT]");
    expect(text).toContain("-file, -f VALUE");
  });
});
