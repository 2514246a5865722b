// The pure parts of `capstan nodes` and `capstan drift -wait`: the table and what is left to move.
import { describe, expect, it } from "vitest";
import type { NodeRecord } from "../../../api/resources/node.ts";
import type { PodGroupWithSpec, PodStatus } from "../../../api/resources/podgroup.ts";
import { driftLeft } from "../../../cli/commands/drift.ts";
import { bytes, renderNodes } from "../../../cli/commands/nodes.ts";
import { stored } from "../podgroup/fixtures.ts";

const node = (over: Partial<NodeRecord>): NodeRecord => ({
  name: "n1",
  address: "127.0.0.1",
  endpoint: "unix:///n1.sock",
  labels: {},
  state: "ready",
  cpus: 2,
  memoryBytes: 4 * 1024 ** 3,
  reserved: { cpus: 0.5, memoryBytes: 64 * 1024 ** 2 },
  containers: 3,
  containersRunning: 2,
  engineVersion: "20.10",
  updatedAt: "2026-01-01T00:00:00.000Z",
  ...over,
});

describe("capstan nodes", () => {
  it("prints NAME STATE ADDRESS CPUS MEMORY RESERVED CONTAINERS, an unreachable node with since when and why", () => {
    const text = renderNodes([node({}), node({ name: "n2", state: "unreachable", unreachableSince: "2026-01-01T00:01:00.000Z", error: "connect ENOENT" })]);
    const lines = text.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME +STATE +ADDRESS +CPUS +MEMORY +RESERVED +CONTAINERS$/);
    expect(lines[1]).toMatch(/^n1 +ready +127\.0\.0\.1 +2 +4GiB +0\.5 CPU, 64MiB +2\/3$/);
    expect(lines[2]).toContain("unreachable since 2026-01-01T00:01:00.000Z (connect ENOENT)");
    expect(renderNodes([])).toBe("no nodes\n");
  });

  it("prints sizes in binary units", () => {
    expect([0, 1023, 1536, 64 * 1024 ** 2, 1.5 * 1024 ** 3].map(bytes)).toEqual(["0B", "1023B", "1.5KiB", "64MiB", "1.5GiB"]);
  });
});

describe("capstan drift -wait", () => {
  const pod = (instanceNo: number, n: string, state: PodStatus["state"] = "running"): PodStatus => ({
    instanceNo,
    state,
    lastError: "",
    restartCount: 0,
    driftCount: 0,
    version: 1,
    node: n,
    containers: [],
  });
  const group = (name: string, pods: PodStatus[], stateful = false): PodGroupWithSpec => ({
    spec: stored({ name, numInstances: 2 }, { stateful }),
    state: "running",
    lastError: "",
    updatedAt: "",
    observedVersion: 1,
    pods,
  });
  const groups = [group("a", [pod(1, "n1"), pod(2, "n2", "drifting")]), group("b", [pod(1, "n1"), pod(2, "n1")], true), group("c", [pod(1, "n2"), pod(3, "n1", "removed")])];

  it("counts covered pods still on `from` or drifting; stateful groups only with force; removed ones never", () => {
    expect(driftLeft(groups, { from: "n1", force: false })).toEqual(["a/1", "a/2"]);
    expect(driftLeft(groups, { from: "n1", force: true })).toEqual(["a/1", "a/2", "b/1", "b/2"]);
    expect(driftLeft(groups, { from: "n1", pg: "b", instance: 2, force: true })).toEqual(["b/2"]);
    expect(driftLeft(groups, { from: "n1", pg: "c", force: false })).toEqual([]);
  });
});
