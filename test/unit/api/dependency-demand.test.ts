// Dependency pods in the API's feasibility check (api/orchestrator/dependency-demand.ts and the
// `dependencies` input of feasibility.ts): a group that lists dependency D needs D's pod on each
// node its instances occupy (min(instances, ready nodes)), one per slot (node, scope), unless a
// pod of that slot is there already; whole-pod fit counts the dependency pods missing on the node.
import { describe, expect, it } from "vitest";
import {
  decodeDependencyDemand,
  decodeDependencySlots,
  dependencyPodsDemand,
  dependencyPodsOnNode,
  usesOf,
  type DependencyFacts,
  type GroupUses,
} from "../../../api/orchestrator/dependency-demand.ts";
import { checkFeasibility, type DependencyDemand, type GroupShape } from "../../../api/orchestrator/feasibility.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";

const MiB = 1 << 20;
const GiB = 1 << 30;

function node(name: string, memoryBytes: number, over: Partial<NodeRecord> = {}): NodeRecord {
  return {
    name,
    address: "127.0.0.1",
    endpoint: `unix:///${name}.sock`,
    labels: {},
    state: "ready",
    cpus: 4,
    memoryBytes,
    reserved: { cpus: 0, memoryBytes: 0 },
    containers: 0,
    containersRunning: 0,
    engineVersion: "27.0",
    updatedAt: new Date(0).toISOString(),
    ...over,
  };
}

/** Stored dependencies by name (their one-pod demand) and the slots holding a pod now. */
function facts(demands: Record<string, number>, pods: Record<string, { node: string; scope: string }[]> = {}, deleting: string[] = []): DependencyFacts {
  return {
    demandOf: (d) => (d in demands && !deleting.includes(d) ? { memoryBytes: demands[d]!, nanoCpus: 0 } : undefined),
    podNodes: (d, scope) => (pods[d] ?? []).filter((p) => p.scope === scope).map((p) => p.node),
  };
}

const uses = (numInstances: number, ...list: [string, string][]): GroupUses => ({ numInstances, uses: list.map(([dependency, scope]) => ({ dependency, scope })) });

describe("usesOf: the slots a group's pods need", () => {
  it("node policy is scope '', namespace policy the group's namespace, each entry on its own, distinct", () => {
    const group = {
      namespace: "shop",
      pod: {
        dependencies: [
          { podName: "log", policy: "node" as const },
          { podName: "cache", policy: "namespace" as const },
          { podName: "log", policy: "node" as const },
        ],
      },
    };
    expect(usesOf(group)).toEqual([
      { dependency: "log", scope: "" },
      { dependency: "cache", scope: "shop" },
    ]);
    expect(usesOf({ namespace: "x", pod: {} })).toEqual([]);
  });
});

describe("dependencyPodsDemand: the pods the stored groups need at least", () => {
  const ready = ["n1", "n2", "n3"];

  it("one pod per node a group's instances occupy: min(instances, ready nodes)", () => {
    const f = facts({ log: 100 * MiB });
    expect(dependencyPodsDemand([uses(1, ["log", ""])], ready, f)).toEqual({ demand: { memoryBytes: 100 * MiB, nanoCpus: 0 }, pods: 1 });
    expect(dependencyPodsDemand([uses(2, ["log", ""])], ready, f).pods).toBe(2);
    expect(dependencyPodsDemand([uses(10, ["log", ""])], ready, f).pods).toBe(3);
    expect(dependencyPodsDemand([uses(0, ["log", ""])], ready, f).pods).toBe(0);
  });

  it("groups sharing a node-level slot share its pods; namespace-level slots are apart per namespace", () => {
    const f = facts({ log: 100 * MiB, cache: 10 * MiB });
    // Two groups on the node-level log: the wider one decides (2), not the sum (3).
    expect(dependencyPodsDemand([uses(2, ["log", ""]), uses(1, ["log", ""])], ready, f).pods).toBe(2);
    // cache per namespace: a and b each need their own.
    const r = dependencyPodsDemand([uses(1, ["cache", "a"]), uses(2, ["cache", "b"])], ready, f);
    expect(r).toEqual({ demand: { memoryBytes: 30 * MiB, nanoCpus: 0 }, pods: 3 });
  });

  it("pods already there count when there are more of them than the groups need (they hold their limits until reclaimed)", () => {
    const f = facts({ log: 100 * MiB }, { log: [{ node: "n1", scope: "" }, { node: "n2", scope: "" }, { node: "gone", scope: "" }] });
    expect(dependencyPodsDemand([uses(1, ["log", ""])], ready, f).pods).toBe(2); // "gone" is no ready node
    expect(dependencyPodsDemand([], ready, f).pods).toBe(0); // only groups that list it bring it in
  });

  it("a dependency not stored, or being deleted, adds nothing", () => {
    expect(dependencyPodsDemand([uses(3, ["nope", ""])], ready, facts({})).pods).toBe(0);
    expect(dependencyPodsDemand([uses(3, ["log", ""])], ready, facts({ log: MiB }, {}, ["log"])).pods).toBe(0);
  });
});

describe("dependencyPodsOnNode: what one pod needs on a node besides itself", () => {
  it("the pods of its slots that are not on that node yet", () => {
    const f = facts({ log: 100 * MiB, cache: 10 * MiB }, { log: [{ node: "n1", scope: "" }], cache: [{ node: "n1", scope: "other" }] });
    const u = [
      { dependency: "log", scope: "" },
      { dependency: "cache", scope: "shop" },
    ];
    expect(dependencyPodsOnNode(u, "n1", f)).toEqual({ memoryBytes: 10 * MiB, nanoCpus: 0 });
    expect(dependencyPodsOnNode(u, "n2", f)).toEqual({ memoryBytes: 110 * MiB, nanoCpus: 0 });
  });
});

describe("checkFeasibility with dependency pods", () => {
  const g = (numInstances: number, memoryLimit: number): GroupShape => ({ numInstances, pod: { containers: [{ image: "x", memoryLimit }] } });
  const deps = (before: number, after: number, afterPods: number, onNode: (n: string) => number = () => 0): DependencyDemand => ({
    before: { memoryBytes: before, nanoCpus: 0 },
    after: { memoryBytes: after, nanoCpus: 0 },
    afterPods,
    onNode: (n) => ({ memoryBytes: onNode(n), nanoCpus: 0 }),
  });
  const nodes = [node("n1", GiB), node("n2", GiB)];
  const none = { memoryBytes: 0, nanoCpus: 0 };

  it("counts the dependency pods in the totals, and says so", () => {
    // 2 x 600 MiB fits 2 GiB alone; with 2 dependency pods of 500 MiB it does not.
    expect(checkFeasibility({ nodes, others: none, after: g(2, 600 * MiB) })).toEqual({ ok: true });
    const verdict = checkFeasibility({ nodes, others: none, after: g(2, 600 * MiB), dependencies: deps(0, 1000 * MiB, 2) });
    expect(verdict).toEqual({
      ok: false,
      message: "not enough memory: 2 x 600 MiB for this group plus 0 MiB for the others plus 1000 MiB for 2 dependency pods needs 2200 MiB; the 2 ready nodes have 2048 MiB",
    });
  });

  it("a pod must fit whole with the dependency pods missing on its node", () => {
    // 700 MiB + a 400 MiB dependency pod fit no 1 GiB node, unless one already has the dependency pod.
    const missingEverywhere = deps(0, 400 * MiB, 1, () => 400 * MiB);
    const verdict = checkFeasibility({ nodes, others: none, after: g(1, 700 * MiB), dependencies: missingEverywhere });
    expect(verdict).toMatchObject({ ok: false });
    expect(!verdict.ok && verdict.message).toBe("one pod needs 700 MiB and 0 CPUs on one node (with the dependency pods it needs there: at least 1100 MiB and 0 CPUs); no ready node has that much");
    const onN2Already = deps(0, 400 * MiB, 1, (n) => (n === "n2" ? 0 : 400 * MiB));
    expect(checkFeasibility({ nodes, others: none, after: g(1, 700 * MiB), dependencies: onN2Already })).toEqual({ ok: true });
  });

  it("the refusal shows the smallest memory and the smallest CPU the dependency pods add, each on its own", () => {
    // n1 lacks a 900 MiB, 0.1 CPU dependency pod; n2 lacks a 300 MiB, 2 CPU one: neither fits 700 MiB more.
    const onNode = (n: string) => (n === "n1" ? { memoryBytes: 900 * MiB, nanoCpus: 100_000_000 } : { memoryBytes: 300 * MiB, nanoCpus: 2_000_000_000 });
    const dependencies: DependencyDemand = { before: none, after: { memoryBytes: 300 * MiB, nanoCpus: 0 }, afterPods: 1, onNode };
    const verdict = checkFeasibility({ nodes, others: none, after: g(1, 800 * MiB), dependencies });
    expect(!verdict.ok && verdict.message).toBe(
      "one pod needs 800 MiB and 0 CPUs on one node (with the dependency pods it needs there: at least 1100 MiB and 0.1 CPUs); no ready node has that much",
    );
  });

  it("a change that needs more dependency pods is checked even when the group itself does not grow", () => {
    const shape = g(2, 100 * MiB);
    // Same instances and limits, but a dependency added by the spec change: 2 pods of 1 GiB more.
    const verdict = checkFeasibility({ nodes, others: { memoryBytes: 200 * MiB, nanoCpus: 0 }, before: shape, after: shape, dependencies: deps(0, 2 * GiB, 2) });
    expect(verdict.ok).toBe(false);
    // No more dependency pods than before, no growth: accepted without a look (a cluster that lost a node can still scale down).
    expect(checkFeasibility({ nodes: [], others: none, before: g(3, 100 * MiB), after: shape, dependencies: deps(3 * GiB, 2 * GiB, 2) })).toEqual({ ok: true });
    // Scaled to 0: never refused.
    expect(checkFeasibility({ nodes: [], others: none, before: shape, after: g(0, 100 * MiB), dependencies: deps(0, GiB, 1) })).toEqual({ ok: true });
  });
});

describe("the caches' decoding", () => {
  it("a dependency record: its one-pod demand and whether it is being deleted", () => {
    const kv = (value: unknown) => ({ key: `${keys.depends}log`, value: JSON.stringify(value), modRevision: 1, createRevision: 1, version: 1 });
    expect(decodeDependencyDemand(kv({ name: "log", containers: [{ image: "x", memoryLimit: MiB, cpuLimit: 0.5 }, { image: "y" }] }))).toEqual({
      name: "log",
      demand: { memoryBytes: MiB, nanoCpus: 500_000_000 },
      deleting: false,
    });
    expect(decodeDependencyDemand(kv({ name: "log", containers: [], deleting: { force: false } })).deleting).toBe(true);
    expect(() => decodeDependencyDemand(kv({ name: "other", containers: [] }))).toThrow(TypeError);
  });

  it("a dependency status: the nodes that hold a pod, by scope", () => {
    const kv = (value: unknown) => ({ key: `${keys.dependStatus}log`, value: JSON.stringify(value), modRevision: 1, createRevision: 1, version: 1 });
    expect(decodeDependencySlots(kv({ pods: [{ node: "n1", namespace: "" }, { node: "n2", namespace: "shop" }, { node: "n3", namespace: "shop" }, { bad: 1 }] }))).toEqual({
      name: "log",
      nodesByScope: new Map([
        ["", ["n1"]],
        ["shop", ["n2", "n3"]],
      ]),
    });
    expect(decodeDependencySlots(kv({})).nodesByScope.size).toBe(0);
  });
});
