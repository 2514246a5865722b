// status.ts: the status a pass writes. One row per pod state of docs/dependencies.md (unknown for
// an unreachable node, D4; upgrading for the rollout's slot, D3; pending while images are pulled,
// D7; failed / missing) and the dependency's states.
import { describe, expect, it } from "vitest";
import { buildStatus, type StatusInput } from "../../../controllers/dependency/status.ts";
import type { SlotRecord } from "../../../controllers/dependency/stored.ts";
import { container, gcMs, spec, t0, view } from "./fixtures.ts";

const record = (refCount: number): SlotRecord => ({ refCount, verifyTime: t0 - 10, deployStartedAt: t0 - 20 });

function input(over: Partial<StatusInput> = {}): StatusInput {
  return {
    spec: spec(),
    view: view([]),
    records: new Map([["n1|", record(1)]]),
    internal: { slots: {} },
    notes: [],
    pulling: new Map(),
    reachable: () => true,
    address: () => "10.0.0.1",
    now: t0,
    writtenAt: t0 + 5,
    gcMs,
    ...over,
  };
}

describe("buildStatus", () => {
  const rows: { row: string; over: Partial<StatusInput>; pod: string; state: string; error: string }[] = [
    { row: "running pod", over: { view: view([container({})]) }, pod: "running", state: "running", error: "" },
    { row: "D4: node unreachable: unknown", over: { view: view([container({})]), reachable: () => false }, pod: "unknown", state: "degraded", error: "node n1 is unreachable: state unknown" },
    { row: "D3: the rollout's slot: upgrading", over: { internal: { slots: {}, rollout: { slot: "n1|", toVersion: 1, phase: "removed" as const, at: t0 } } }, pod: "upgrading", state: "updating", error: "" },
    { row: "no pod, no error: missing", over: {}, pod: "missing", state: "degraded", error: "" },
    { row: "no pod after a failed deploy: failed", over: { internal: { slots: { "n1|": { restarts: 0, failures: 1, lastError: "boom" } } } }, pod: "failed", state: "degraded", error: "boom" },
    { row: "D7: no pod while its images are pulled: pending, the progress as lastError", over: { pulling: new Map([["n1|", "pulling img: 40 %"]]) }, pod: "pending", state: "pending", error: "pulling img: 40 %" },
    { row: "a pod at another version: updating", over: { view: view([container({ version: 0 })]) }, pod: "running", state: "updating", error: "" },
  ];
  it.each(rows)("$row", ({ over, pod, state, error }) => {
    const status = buildStatus(input(over));
    expect(status.pods.map((p) => [p.state, p.lastError])).toEqual([[pod, error]]);
    expect(status.state).toBe(state);
  });

  it("records, times and containers; reclaimAt only while unreferenced", () => {
    const running = container({});
    const status = buildStatus(input({ view: view([running]), records: new Map([["n1|", record(0)]]) }));
    expect(status.updatedAt).toBe(new Date(t0 + 5).toISOString());
    expect(status.pods[0]).toMatchObject({
      node: "n1", namespace: "", refCount: 0, verifyTime: new Date(t0 - 10).toISOString(), deployStartedAt: new Date(t0 - 20).toISOString(),
      reclaimAt: new Date(t0 - 10 + gcMs).toISOString(), version: 1, restartCount: 0,
    });
    expect(status.pods[0]!.containers.map((c) => [c.id, c.nodeIp])).toEqual([[running.id, "10.0.0.1"]]);
    expect(buildStatus(input({ view: view([running]) })).pods[0]!.reclaimAt).toBeUndefined();
  });

  it("no pods: idle; a note of the pass is the lastError", () => {
    expect(buildStatus(input({ records: new Map() })).state).toBe("idle");
    expect(buildStatus(input({ notes: ["waiting for node n2"] })).lastError).toBe("waiting for node n2");
    expect(buildStatus(input({ internal: { slots: { "n1|": { restarts: 0, failures: 1, lastError: "boom" } } } })).lastError).toBe("pod on n1: boom");
  });

  it("removing: every slot with containers is listed, records or not, without reclaimAt", () => {
    const status = buildStatus(input({ spec: spec(1, 1, { deleting: { force: false } }), view: view([container({ slot: "n2|x" })]), records: new Map() }));
    expect(status.state).toBe("removing");
    expect(status.pods.map((p) => [p.node, p.namespace, p.refCount, p.verifyTime, p.reclaimAt])).toEqual([["n2", "x", 0, new Date(t0).toISOString(), undefined]]);
  });

  it("internal keeps the step and the restart records that say something, nothing else", () => {
    expect(buildStatus(input()).internal).toBeUndefined();
    const slots = { "n1|": { restarts: 1, failures: 0 }, "n9|": { restarts: 4, failures: 0 } };
    expect(buildStatus(input({ internal: { slots } })).internal).toEqual({ slots: { "n1|": { restarts: 1, failures: 0 } } });
  });
});
