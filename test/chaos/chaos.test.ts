// The chaos suite's short run inside the default suite (docs/development.md, "Chaos suite"): about
// 45 s of random operations and faults on a private platform (its own engines, etcd cluster,
// orchestrator and secrets processes), every quiet period checked against the engines. The seed is
// CHAOS_SEED or a fixed one, printed; a failure prints the replay command and the operation log.
import { describe, expect, it } from "vitest";
import { formatReport, runChaos } from "./run.ts";

const seed = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : 16;

describe("chaos (short run)", () => {
  it(`random operations and faults leave every engine matching the desired state (seed ${seed})`, async () => {
    const report = await runChaos({ seed, durationMs: 45_000, servicesDir: "/tmp/capstan-svc-chaos-test", quietTimeoutMs: 60_000 });
    const text = formatReport(report);
    console.log(text.split("\n")[0]);
    expect(report.error, text).toBeUndefined();
    expect(report.violations, text).toEqual([]);
    expect(report.checks).toBe(report.rounds);
    expect(report.operations).toBeGreaterThan(0);
  }, 240_000);
});
