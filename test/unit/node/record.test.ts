// Node records from engine facts and reservations (controllers/node/record.ts).
import { describe, expect, it } from "vitest";
import type { NodeResources } from "../../../adapters/cluster/index.ts";
import { nodeRecord, sameRecord, unreachableRecord } from "../../../controllers/node/record.ts";

const resources: NodeResources = {
  name: "n1",
  endpoint: "unix:///run/n1.sock",
  address: "127.0.0.1",
  state: "ready",
  labels: { zone: "a" },
  cpus: 4,
  memoryBytes: 8 << 30,
  containers: 5,
  containersRunning: 3,
  engineVersion: "27.1.0",
};
const t0 = new Date("2026-01-01T00:00:00Z");
const t1 = new Date("2026-01-01T00:01:00Z");

describe("nodeRecord", () => {
  it("copies the engine's facts and converts reserved nano-CPUs to CPUs", () => {
    expect(nodeRecord(resources, { memoryBytes: 64 << 20, nanoCpus: 1_500_000_000 }, t0)).toEqual({
      name: "n1",
      address: "127.0.0.1",
      endpoint: "unix:///run/n1.sock",
      labels: { zone: "a" },
      state: "ready",
      cpus: 4,
      memoryBytes: 8 << 30,
      reserved: { cpus: 1.5, memoryBytes: 64 << 20 },
      containers: 5,
      containersRunning: 3,
      engineVersion: "27.1.0",
      updatedAt: "2026-01-01T00:00:00.000Z",
    });
  });
});

describe("unreachableRecord", () => {
  it("keeps the last known capacity and says why", () => {
    const previous = nodeRecord(resources, { memoryBytes: 1, nanoCpus: 0 }, t0);
    const down = { ...resources, state: "unreachable" as const, cpus: 0, memoryBytes: 0, labels: {}, error: "connect ENOENT" };
    expect(unreachableRecord(down, "connect ENOENT", previous, t1)).toEqual({
      ...previous,
      state: "unreachable",
      error: "connect ENOENT",
      unreachableSince: t1.toISOString(),
      updatedAt: t1.toISOString(),
    });
  });

  it("keeps the outage's start and auto-drift task while it lasts; a new outage starts afresh", () => {
    const down = { ...resources, state: "unreachable" as const, cpus: 0, memoryBytes: 0, labels: {} };
    const first = { ...unreachableRecord(down, "gone", nodeRecord(resources, { memoryBytes: 0, nanoCpus: 0 }, t0), t0), autoDriftTask: "node-timeout-n1-1" };
    const later = unreachableRecord(down, "still gone", first, t1);
    expect(later).toMatchObject({ unreachableSince: t0.toISOString(), autoDriftTask: "node-timeout-n1-1", updatedAt: t1.toISOString() });
    const back = nodeRecord(resources, { memoryBytes: 0, nanoCpus: 0 }, t1);
    expect(back.unreachableSince).toBeUndefined();
    const again = unreachableRecord(down, "gone again", back, t1);
    expect(again.unreachableSince).toBe(t1.toISOString());
    expect(again.autoDriftTask).toBeUndefined();
  });

  it("without a previous record, records what the engine call returned", () => {
    const down = { ...resources, state: "unreachable" as const, cpus: 0, memoryBytes: 0, labels: {} };
    expect(unreachableRecord(down, "timed out", undefined, t1)).toMatchObject({ state: "unreachable", error: "timed out", cpus: 0, memoryBytes: 0 });
  });
});

describe("sameRecord", () => {
  const a = nodeRecord(resources, { memoryBytes: 0, nanoCpus: 0 }, t0);
  it("ignores updatedAt and key order", () => {
    const reordered = Object.fromEntries(Object.entries({ ...a, updatedAt: t1.toISOString() }).reverse()) as unknown as typeof a;
    expect(sameRecord(a, reordered)).toBe(true);
  });
  it("sees any other change", () => {
    expect(sameRecord(a, { ...a, reserved: { cpus: 0, memoryBytes: 1 } })).toBe(false);
    expect(sameRecord(a, { ...a, state: "unreachable" })).toBe(false);
    expect(sameRecord(a, { ...a, labels: { zone: "b" } })).toBe(false);
    expect(sameRecord(a, { ...a, error: "x" })).toBe(false);
  });
});
