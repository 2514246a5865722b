// Feasibility arithmetic (api/orchestrator/feasibility.ts): demand from limits, totals against the
// ready nodes' capacity, whole-pod fit on one node (with filters), and which changes are checked.
import { describe, expect, it } from "vitest";
import { parsePlacementFilters } from "../../../adapters/cluster/index.ts";
import { checkFeasibility, groupDemand, grows, podDemand, type GroupShape } from "../../../api/orchestrator/feasibility.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";

const MiB = 1 << 20;
const GiB = 1 << 30;

function node(name: string, cpus: number, memoryBytes: number, over: Partial<NodeRecord> = {}): NodeRecord {
  return {
    name,
    address: "127.0.0.1",
    endpoint: `unix:///${name}.sock`,
    labels: {},
    state: "ready",
    cpus,
    memoryBytes,
    reserved: { cpus: 0, memoryBytes: 0 },
    containers: 0,
    containersRunning: 0,
    engineVersion: "27.0",
    updatedAt: new Date(0).toISOString(),
    ...over,
  };
}

function group(numInstances: number, ...containers: { cpuLimit?: number; memoryLimit?: number }[]): GroupShape {
  return { numInstances, pod: { containers: containers.map((c) => ({ image: "x", ...c })) } };
}

const none = { memoryBytes: 0, nanoCpus: 0 };

describe("demand", () => {
  it("sums container limits per pod, in integer units", () => {
    expect(podDemand(group(1, { cpuLimit: 0.1, memoryLimit: 64 * MiB }, { cpuLimit: 0.2 }, {}).pod)).toEqual({
      memoryBytes: 64 * MiB,
      nanoCpus: 300_000_000,
    });
  });

  it("multiplies by instances; a group being deleted reserves nothing", () => {
    const g = group(3, { cpuLimit: 0.5, memoryLimit: 100 });
    expect(groupDemand(g)).toEqual({ memoryBytes: 300, nanoCpus: 1_500_000_000 });
    expect(groupDemand({ ...g, deleting: true })).toEqual(none);
  });
});

describe("grows", () => {
  const small = group(2, { memoryLimit: 100 });
  it.each([
    ["a create with instances", undefined, small, true],
    ["a create with none", undefined, group(0, { memoryLimit: 100 }), false],
    ["more instances", small, group(3, { memoryLimit: 100 }), true],
    ["fewer instances", small, group(1, { memoryLimit: 100 }), false],
    ["to zero", small, group(0, { memoryLimit: 1e12 }), false],
    ["a bigger pod", small, group(2, { memoryLimit: 101 }), true],
    ["more CPU, less memory", small, group(2, { memoryLimit: 50, cpuLimit: 0.1 }), true],
    ["the same size", small, group(2, { memoryLimit: 60 }, { memoryLimit: 40 }), false],
  ])("%s: %s", (_what, before, after, expected) => {
    expect(grows(before, after)).toBe(expected);
  });
});

describe("checkFeasibility", () => {
  const two = [node("a", 2, 4 * GiB), node("b", 2, 4 * GiB)];

  it("accepts what fits the ready nodes in total", () => {
    expect(checkFeasibility({ nodes: two, others: none, after: group(8, { memoryLimit: GiB, cpuLimit: 0.5 }) })).toEqual({ ok: true });
  });

  it("refuses memory beyond the total, counting the other groups, and says the numbers", () => {
    const verdict = checkFeasibility({
      nodes: two,
      others: { memoryBytes: 2 * GiB, nanoCpus: 0 },
      after: group(7, { memoryLimit: GiB }),
    });
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) {
      expect(verdict.message).toBe(
        "not enough memory: 7 x 1024 MiB for this group plus 2048 MiB for the others needs 9216 MiB; the 2 ready nodes have 8192 MiB",
      );
    }
  });

  it("refuses CPU beyond the total", () => {
    const verdict = checkFeasibility({ nodes: two, others: { memoryBytes: 0, nanoCpus: 1e9 }, after: group(7, { cpuLimit: 0.5 }) });
    expect(verdict).toEqual({
      ok: false,
      message: "not enough CPU: 7 x 0.5 CPUs for this group plus 1 CPUs for the others needs 4.5 CPUs; the 2 ready nodes have 4 CPUs",
    });
  });

  it("refuses a pod that fits the total but no single node", () => {
    const verdict = checkFeasibility({ nodes: two, others: none, after: group(1, { memoryLimit: 3 * GiB }, { memoryLimit: 2 * GiB }) });
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.message).toMatch(/^one pod needs 5120 MiB and 0 CPUs on one node; no ready node has that much/);
  });

  it("counts only ready nodes", () => {
    const nodes = [node("a", 2, GiB), node("b", 64, 64 * GiB, { state: "unreachable" })];
    expect(checkFeasibility({ nodes, others: none, after: group(2, { memoryLimit: GiB }) }).ok).toBe(false);
    expect(checkFeasibility({ nodes, others: none, after: group(1, { memoryLimit: GiB }) }).ok).toBe(true);
  });

  it("refuses growth without any ready node, even for pods without limits", () => {
    const verdict = checkFeasibility({ nodes: [node("a", 2, GiB, { state: "unreachable" })], others: none, after: group(1, {}) });
    expect(verdict).toEqual({ ok: false, message: "no ready nodes: the node monitor has recorded no reachable Docker engine" });
    expect(checkFeasibility({ nodes: [], others: none, after: group(1, {}) }).ok).toBe(false);
  });

  it("never refuses a change that asks for no more", () => {
    const before = group(4, { memoryLimit: 2 * GiB });
    // The cluster lost most of its capacity: scaling down and shrinking must still be accepted.
    const nodes = [node("a", 1, GiB)];
    expect(checkFeasibility({ nodes, others: none, before, after: group(3, { memoryLimit: 2 * GiB }) }).ok).toBe(true);
    expect(checkFeasibility({ nodes: [], others: none, before, after: group(0, { memoryLimit: 2 * GiB }) }).ok).toBe(true);
    expect(checkFeasibility({ nodes, others: none, before, after: group(4, { memoryLimit: GiB }) }).ok).toBe(true);
    // Creating a group of zero instances needs no node at all.
    expect(checkFeasibility({ nodes: [], others: none, after: group(0, { memoryLimit: 1e15 }) }).ok).toBe(true);
  });

  it("checks a change as the whole group after it, not only the difference", () => {
    const before = group(2, { memoryLimit: 3 * GiB });
    const after = group(3, { memoryLimit: 3 * GiB });
    // 9 GiB after the change against 8 GiB: refused, although the increase alone (3 GiB) would fit.
    expect(checkFeasibility({ nodes: two, others: none, before, after }).ok).toBe(false);
    expect(checkFeasibility({ nodes: two, others: none, before, after: group(2, { memoryLimit: 4 * GiB }) }).ok).toBe(true);
  });

  it("needs a ready node that matches the pod's filters", () => {
    const labelled = [node("a", 2, 4 * GiB, { labels: { disk: "ssd" } }), node("b", 2, 4 * GiB)];
    const g = group(1, { memoryLimit: GiB });
    expect(checkFeasibility({ nodes: labelled, others: none, after: g, filters: parsePlacementFilters(["label:disk==ssd"]) }).ok).toBe(true);
    const verdict = checkFeasibility({ nodes: labelled, others: none, after: g, filters: parsePlacementFilters(["node==c"]) });
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.message).toContain("no ready node that matches the pod's filters");
  });

  it("is exact for fractional CPUs summed many times", () => {
    // 10 x 0.1 CPU = exactly 1 CPU in nano units, where floating point would give 0.9999999999999999.
    const nodes = [node("a", 1, GiB)];
    expect(checkFeasibility({ nodes, others: none, after: group(10, { cpuLimit: 0.1 }) }).ok).toBe(true);
    expect(checkFeasibility({ nodes, others: none, after: group(11, { cpuLimit: 0.1 }) }).ok).toBe(false);
  });
});
