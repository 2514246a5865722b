// The node monitor's reachability rules (review finding 6), as the pure record functions decide
// them: a stale stored record does not pass its outage start on, and a node whose engine answers
// but whose containers could not be listed stays ready.
import { describe, expect, it } from "vitest";
import type { NodeResources } from "../../../adapters/cluster/index.ts";
import { listingFailedRecord, nodeRecord, unreachableRecord } from "../../../controllers/node/record.ts";

const resources: NodeResources = {
  name: "n1",
  address: "127.0.0.1",
  endpoint: "unix:///n1.sock",
  labels: { zone: "a" },
  state: "ready",
  cpus: 4,
  memoryBytes: 8 << 30,
  containers: 3,
  containersRunning: 2,
  engineVersion: "24.0",
} as NodeResources;
const down = { ...resources, state: "unreachable" as const };
const minute = 60_000;

describe("unreachableRecord with a maximum age of the previous record", () => {
  const hoursAgo = new Date("2026-11-23T01:00:00.000Z");
  const outage = { ...unreachableRecord(down, "gone", undefined, hoursAgo), autoDriftTask: "node-timeout-n1-1" };

  it("starts a new outage when the previous record is older than the maximum age", () => {
    const now = new Date(hoursAgo.getTime() + 3 * 60 * minute);
    const r = unreachableRecord(down, "gone again", outage, now, 80_000);
    expect(r.unreachableSince).toBe(now.toISOString());
    expect(r.autoDriftTask).toBeUndefined();
  });

  it("carries the outage over from a record written within the maximum age", () => {
    const now = new Date(hoursAgo.getTime() + minute);
    const r = unreachableRecord(down, "still gone", outage, now, 80_000);
    expect(r).toMatchObject({ unreachableSince: hoursAgo.toISOString(), autoDriftTask: "node-timeout-n1-1" });
  });
});

describe("listingFailedRecord", () => {
  it("stays ready with the error and the last known reservation", () => {
    const t0 = new Date("2026-11-23T03:00:00.000Z");
    const t1 = new Date("2026-11-23T03:00:10.000Z");
    const previous = nodeRecord(resources, { memoryBytes: 64 << 20, nanoCpus: 500_000_000 }, t0);
    const r = listingFailedRecord(resources, "listing containers failed: timed out", previous, t1);
    expect(r).toEqual({ ...previous, error: "listing containers failed: timed out", updatedAt: t1.toISOString() });
    expect(r.state).toBe("ready");
    expect(r.unreachableSince).toBeUndefined();
  });

  it("reserves nothing when no ready record is known", () => {
    const r = listingFailedRecord(resources, "listing containers failed: timed out", unreachableRecord(down, "x", undefined, new Date(0)), new Date(1));
    expect(r).toMatchObject({ state: "ready", reserved: { cpus: 0, memoryBytes: 0 } });
  });
});
