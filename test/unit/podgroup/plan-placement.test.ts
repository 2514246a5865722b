// Placement of new pods (plan-placement.ts): the "Deploy, none exists" row of the operations table,
// stateful pods, the drift rules (R6: never back onto `from`) and R5 (reachable nodes only).
import { describe, expect, it } from "vitest";
import type { NodeResources, Reservation } from "../../../adapters/cluster/index.ts";
import type { DriftTask } from "../../../api/resources/task.ts";
import { invalidFilters, planPlacement, type PlacementInput } from "../../../controllers/podgroup/plan-placement.ts";
import type { DriftMove, Internal, StoredPodGroup } from "../../../controllers/podgroup/stored.ts";
import { container, group, internalOf, viewOf } from "./plan-fixtures.ts";

const gib = 2 ** 30;
function node(name: string, over: Partial<NodeResources> = {}): NodeResources {
  return {
    name,
    endpoint: "",
    address: "",
    state: "ready",
    labels: {},
    cpus: 4,
    memoryBytes: 8 * gib,
    containers: 0,
    containersRunning: 0,
    engineVersion: "",
    ...over,
  };
}
const nodes = [node("n1", { labels: { zone: "a" } }), node("n2", { labels: { zone: "b" } }), node("n3", { labels: { zone: "b" } })];

interface Case {
  spec?: StoredPodGroup;
  instances?: number[];
  moves?: [number, DriftMove][];
  pods?: ReturnType<typeof container>[];
  internal?: Internal;
  drifts?: DriftTask[];
  nodes?: NodeResources[];
  reservations?: Reservation[];
  unreachable?: string[];
}

function place(given: Case) {
  const spec = given.spec ?? group(3);
  const input: PlacementInput = {
    spec,
    instances: given.instances ?? [0],
    ...(given.moves && { moves: new Map(given.moves) }),
    view: viewOf(spec, given.pods ?? []),
    internal: given.internal ?? internalOf(),
    drifts: given.drifts ?? [],
    nodes: (given.nodes ?? nodes).map((node) => (given.unreachable?.includes(node.name) ? { ...node, state: "unreachable" as const } : node)),
    reservations: given.reservations ?? [],
    reachable: (name) => !given.unreachable?.includes(name),
  };
  return planPlacement(input);
}

const drift = (over: Partial<DriftTask> = {}): DriftTask => ({ id: "t", kind: "drift", from: "n1", force: false, reason: "request", createdAt: "", ...over });
const mem = (gigabytes: number) => ({ memoryLimit: gigabytes * gib });

describe("planPlacement", () => {
  const rows: { name: string; given: Case; placed?: [number, string][]; failed?: [number, RegExp][]; waiting?: [number, string][] }[] = [
    { name: "spread: the node with fewest of the group's pods", given: { pods: [container({ instance: 1, node: "n1" }), container({ instance: 2, node: "n2" })] }, placed: [[0, "n3"]] },
    { name: "spread across a batch: each pick counts", given: { instances: [0, 1, 2] }, placed: [[0, "n1"], [1, "n2"], [2, "n3"]] },
    { name: "filters: label", given: { spec: group(1, 1, {}, { filters: ["label:zone==a"] }) }, placed: [[0, "n1"]] },
    { name: "filters: node !=", given: { spec: group(1, 1, {}, { filters: ["node!=n1"] }) }, placed: [[0, "n2"]] },
    {
      name: "free memory: a node whose running pods reserve it all is skipped",
      given: { spec: group(1, 1, {}, { containers: [{ image: "img", ...mem(6) }] }), reservations: [{ node: "n1", memoryBytes: 4 * gib, nanoCpus: 0 }] },
      placed: [[0, "n2"]],
    },
    {
      name: "capacity is taken as the batch is placed",
      given: { spec: group(2, 1, {}, { containers: [{ image: "img", ...mem(6) }] }), instances: [0, 1], nodes: [node("n1"), node("n2", { memoryBytes: 4 * gib })] },
      placed: [[0, "n1"]],
      failed: [[1, /^no node fits: needs 6442450944 bytes of memory and 0 CPUs$/]],
    },
    { name: "R5: an unreachable node gets nothing", given: { unreachable: ["n1", "n2"] }, placed: [[0, "n3"]] },
    {
      name: "no node fits: a failed deploy, naming the filters",
      given: { spec: group(1, 1, {}, { filters: ["label:zone==c"] }) },
      failed: [[0, /^no node fits: needs 0 bytes of memory and 0 CPUs on a node matching label:zone==c$/]],
    },
    { name: "invalid filters: every instance fails", given: { spec: group(2, 1, {}, { filters: ["nonsense"] }), instances: [0, 1] }, failed: [[0, /^placement filters: /], [1, /^placement filters: /]] },
    {
      name: "stateful: back to its recorded node",
      given: { spec: group(1, 1, {}, { stateful: true }), internal: internalOf({ instances: { "0": { restarts: 0, failures: 0, node: "n3" } } }) },
      placed: [[0, "n3"]],
    },
    {
      name: "stateful, its node unreachable: waits (not a failure)",
      given: { spec: group(1, 1, {}, { stateful: true }), internal: internalOf({ instances: { "0": { restarts: 0, failures: 0, node: "n3" } } }), unreachable: ["n3"] },
      waiting: [[0, "stateful: waiting for its node n3, which is unreachable"]],
    },
    { name: "cordon: a pending drift task's `from` gets no new pod", given: { drifts: [drift({ from: "n1" })] }, placed: [[0, "n2"]] },
    {
      name: "cordon overrides a stateful pod's node (forced drift)",
      given: { spec: group(1, 1, {}, { stateful: true }), drifts: [drift({ from: "n3", force: true })], internal: internalOf({ instances: { "0": { restarts: 0, failures: 0, node: "n3" } } }) },
      placed: [[0, "n1"]],
    },
    { name: "R6: a moving instance never goes back onto `from`", given: { moves: [[0, { task: "gone", from: "n1", drift: 1 }]] }, placed: [[0, "n2"]] },
    { name: "R6: a move with `to` goes there", given: { moves: [[0, { task: "gone", from: "n1", to: "n3", drift: 1 }]] }, placed: [[0, "n3"]] },
    {
      name: "R6: a move that fits nowhere but `from` fails as a drift",
      given: { moves: [[0, { task: "gone", from: "n1", drift: 1 }]], nodes: [node("n1")] },
      failed: [[0, /^drift: no node fits: .* on a node matching node!=n1$/]],
    },
    {
      name: "pods on their way off a node do not count for the spread",
      given: {
        instances: [2],
        pods: [container({ instance: 0, node: "n2" }), container({ instance: 1, node: "n3" })],
        internal: internalOf({ instances: { "0": { restarts: 0, failures: 0, move: { task: "t", from: "n2", drift: 1 } } } }),
        nodes: [node("n2"), node("n3")],
      },
      placed: [[2, "n2"]],
    },
  ];
  it.each(rows)("$name", (row) => {
    const plan = place(row.given);
    expect([...plan.placed]).toEqual(row.placed ?? []);
    expect([...plan.failed].map(([i]) => i)).toEqual((row.failed ?? []).map(([i]) => i));
    for (const [i, pattern] of row.failed ?? []) expect(plan.failed.get(i)).toMatch(pattern);
    expect([...plan.waiting]).toEqual(row.waiting ?? []);
  });

  it("invalidFilters says why, or nothing", () => {
    expect(invalidFilters(group(1))).toBeUndefined();
    expect(invalidFilters(group(1, 1, {}, { filters: ["nonsense"] }))).toMatch(/^placement filters: /);
  });
});
