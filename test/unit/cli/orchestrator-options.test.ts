import { describe, expect, it } from "vitest";
import { orchestratorOptionDefs, orchestratorSettings } from "../../../cli/orchestrator-options.ts";
import { parseArgs, usage, UsageError } from "../../../cli/options.ts";

// The elector's own defaults (runtime/leaderelection.ts): 15 s lease, 10 s renew deadline, 2 s retry.
const defaultLease = { ttlSeconds: 15, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
const settings = (argv: string[], env: Record<string, string> = {}) => orchestratorSettings(parseArgs(argv, orchestratorOptionDefs, env).options);

describe("orchestrator options", () => {
  it("default to docs/cli.md's: update wait 10 s, refresh 30 s, 8 workers, dependency GC 5 min, node timeout 60 s", () => {
    expect(settings([])).toEqual({ updateWaitMs: 10_000, refreshIntervalMs: 30_000, workers: 8, dependsGcMs: 300_000, nodeTimeoutMs: 60_000, lease: defaultLease });
  });

  it("take the command line over the environment", () => {
    expect(settings(["-update-wait", "1s", "--refresh-interval=2s"], { CAPSTAN_UPDATE_WAIT: "3s", CAPSTAN_WORKERS: "2" })).toEqual({
      updateWaitMs: 1_000,
      refreshIntervalMs: 2_000,
      workers: 2,
      dependsGcMs: 300_000,
      nodeTimeoutMs: 60_000,
      lease: defaultLease,
    });
    expect(settings(["-depends-gc", "3s"]).dependsGcMs).toBe(3_000);
    expect(settings(["-node-timeout", "3s"]).nodeTimeoutMs).toBe(3_000);
  });

  it("refuse values that cannot work, naming the option", () => {
    expect(() => settings(["-workers", "0"])).toThrow(new UsageError("-workers: 0 must be at least 1"));
    expect(() => settings(["-refresh-interval", "0"])).toThrow(new UsageError("-refresh-interval: must be more than 0"));
    expect(() => settings(["-node-timeout", "0s"])).toThrow(new UsageError("-node-timeout: must be more than 0"));
    expect(() => settings(["-update-wait", "10"])).toThrow(/-update-wait: invalid duration "10"/);
    expect(() => settings(["-workers", "many"])).toThrow(/-workers: "many" is not a whole number/);
  });

  it("list -depends-gc and -workers in -h with their defaults and variables", () => {
    const text = usage("orchestrator", "", orchestratorOptionDefs);
    expect(text).toMatch(/-depends-gc DURATION +reclaim a dependency pod .*\(default 5m\) \[CAPSTAN_ORCHESTRATOR_DEPENDS_GC\]/);
    expect(text).toMatch(/-workers N +.*\(default 8\) \[CAPSTAN_ORCHESTRATOR_WORKERS\]/);
  });

  it("derive the election's timings from -lease-duration, keeping lease > renew deadline > 1.2 x retry", () => {
    expect(settings(["-lease-duration", "3s"]).lease).toEqual({ ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 400 });
    expect(settings([], { CAPSTAN_LEASE_DURATION: "1m" }).lease).toEqual({ ttlSeconds: 60, renewDeadlineMs: 40_000, retryPeriodMs: 2_000 });
    for (const s of ["2s", "3s", "7s", "15s", "1h"]) {
      const { ttlSeconds, renewDeadlineMs, retryPeriodMs } = settings(["-lease-duration", s]).lease!;
      expect(renewDeadlineMs).toBeLessThan(ttlSeconds * 1000);
      expect(renewDeadlineMs).toBeGreaterThan(1.2 * retryPeriodMs);
    }
    expect(() => settings(["-lease-duration", "1s"])).toThrow(new UsageError("-lease-duration: must be whole seconds, at least 2s"));
    expect(() => settings(["-lease-duration", "2500ms"])).toThrow(new UsageError("-lease-duration: must be whole seconds, at least 2s"));
    expect(() => settings(["-lease-duration", "2h"])).toThrow(new UsageError("-lease-duration: must be at most 1h"));
  });
});
