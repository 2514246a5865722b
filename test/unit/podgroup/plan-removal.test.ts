// Removal of a whole group (plan-removal.ts): the "Delete group" row of the operations table in
// docs/podgroup-controller.md, R5 (a node that may hold something must confirm) and R12.
import { describe, expect, it } from "vitest";
import type { PodStatus } from "../../../api/resources/podgroup.ts";
import { previousContainerName } from "../../../controllers/shared/previous.ts";
import { planRemovalBatch, planRemovalFinish } from "../../../controllers/podgroup/plan-removal.ts";
import { container, down, group, reachable, viewOf } from "./plan-fixtures.ts";

const spec = group(0);

describe("planRemovalBatch", () => {
  it("instances highest first, a bounded batch; previous containers all at once (R12)", () => {
    const pods = [0, 1, 2, 3].map((instance) => container({ instance }));
    const previous = container({ instance: 0 }, { name: previousContainerName("web", 0, 0), state: "exited" });
    const batch = planRemovalBatch(viewOf(spec, [...pods, previous]), reachable, 2);
    expect(batch.instances.map((cs) => cs.map((container) => container.id))).toEqual([[pods[3]!.id], [pods[2]!.id]]);
    expect(batch.previous.map((container) => container.id)).toEqual([previous.id]);
  });

  it("R5: containers on unreachable nodes are not in it; an instance with nothing reachable takes no slot", () => {
    const onDown = container({ instance: 3, node: down });
    const pods = [container({ instance: 0 }), container({ instance: 1 }), onDown, container({ instance: 2 }), container({ instance: 2, node: down })];
    const batch = planRemovalBatch(viewOf(spec, pods), reachable, 2);
    expect(batch.instances.map((cs) => cs.map((container) => container.id))).toEqual([[pods[3]!.id], [pods[1]!.id]]);
  });
});

describe("planRemovalFinish", () => {
  const pod = (instanceNo: number, node: string) => ({ instanceNo, node, containers: [{}] }) as unknown as PodStatus;
  const rows: {
    name: string;
    left: ReturnType<typeof container>[];
    lastPods?: PodStatus[];
    nodes?: string[];
    listed?: string[];
    want: ReturnType<typeof planRemovalFinish>;
  }[] = [
    {
      // n2 was never listed since start: it answers, so the sweep's own relist covers it.
      name: "nothing left, every node answers: sweep, then delete the keys",
      left: [],
      nodes: ["n1", "n2"],
      listed: ["n1"],
      lastPods: [pod(0, "n2")],
      want: { kind: "sweep" },
    },
    { name: "containers left on a reachable node (being stopped): look again", left: [container({ instance: 0 })], want: { kind: "wait", waitingFor: [] } },
    { name: "cached containers on an unreachable node: wait for it", left: [container({ instance: 0, node: down })], want: { kind: "wait", waitingFor: [down] } },
    { name: "a down node the last status places a pod on: wait for it", left: [], lastPods: [pod(0, down)], want: { kind: "wait", waitingFor: [down] } },
    { name: "a down node never listed since start: wait for it (what runs there is unknown)", left: [], listed: ["n1"], want: { kind: "wait", waitingFor: [down] } },
    { name: "a down node listed and holding nothing of the group: not waited for", left: [], want: { kind: "sweep" } },
  ];
  it.each(rows)("$name", (row) => {
    const nodes = row.nodes ?? ["n1", down];
    const listed = row.listed ?? nodes;
    const plan = planRemovalFinish({
      left: row.left,
      view: viewOf(spec, row.left),
      lastPods: row.lastPods ?? [],
      nodes,
      reachable,
      listedSinceStart: (node) => listed.includes(node),
    });
    expect(plan).toEqual(row.want);
  });
});
