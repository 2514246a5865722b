// -event-ttl on `capstan orchestrator` and `capstan up` (docs/events.md): absent is the pruner's
// default (1 h), a duration is taken, 0 is refused naming the option.
import { describe, expect, it } from "vitest";
import { orchestratorOptionDefs, orchestratorSettings } from "../../../cli/orchestrator-options.ts";
import { parseArgs, usage, UsageError } from "../../../cli/options.ts";

const settings = (argv: string[], env: Record<string, string> = {}) => orchestratorSettings(parseArgs(argv, orchestratorOptionDefs, env).options);

describe("-event-ttl", () => {
  it("is absent unless given (the pruner's default, 1 h, applies), and takes a duration or CAPSTAN_EVENT_TTL", () => {
    expect(settings([]).eventTtlMs).toBeUndefined();
    expect(settings(["-event-ttl", "10m"]).eventTtlMs).toBe(600_000);
    expect(settings([], { CAPSTAN_EVENT_TTL: "2h" }).eventTtlMs).toBe(7_200_000);
  });

  it("refuses 0 and bare numbers, naming the option", () => {
    expect(() => settings(["-event-ttl", "0"])).toThrow(new UsageError("-event-ttl: must be more than 0"));
    expect(() => settings(["-event-ttl", "10"])).toThrow(/-event-ttl: invalid duration "10"/);
  });

  it("is listed in -h", () => {
    expect(usage("orchestrator", "", orchestratorOptionDefs)).toMatch(/-event-ttl DURATION +events not seen again for this long are deleted, 1h when not given .*\[CAPSTAN_ORCHESTRATOR_EVENT_TTL\]/);
  });
});
