// Drift moves (plan-drift.ts, R6, R9; docs/nodes-and-drift.md), on a fake clock.
import { describe, expect, it } from "vitest";
import type { PodStatus } from "../../../api/resources/podgroup.ts";
import type { DriftTask } from "../../../api/resources/task.ts";
import { dueMoves, planDriftStarts, planMoves } from "../../../controllers/podgroup/plan-drift.ts";
import type { DriftMove, InstanceRecord } from "../../../controllers/podgroup/stored.ts";
import { FakeClock } from "../../../runtime/clock.ts";
import { container, down, group, internalOf, viewOf } from "./plan-fixtures.ts";

const clock = new FakeClock(50_000);
const now = clock.now();
const task = (over: Partial<DriftTask> = {}): DriftTask => ({ id: "t1", kind: "drift", from: "n1", force: false, reason: "request", createdAt: "", ...over });
const move = (over: Partial<DriftMove> = {}): DriftMove => ({ task: "t1", from: "n1", drift: 1, ...over });
const rec = (over: Partial<InstanceRecord> = {}): InstanceRecord => ({ restarts: 0, failures: 0, ...over });

describe("planDriftStarts (R6: recorded before anything is removed)", () => {
  const spec = group(3);
  const rows: { name: string; tasks: DriftTask[]; rollout?: number; moving?: number[]; unseen?: [number, PodStatus][]; want: [number, DriftMove][] }[] = [
    { name: "no task: nothing", tasks: [], want: [] },
    { name: "every instance on `from` moves, drift + 1", tasks: [task()], want: [[1, move()], [3, move()]] },
    { name: "`to` is carried", tasks: [task({ to: "n3" })], want: [[1, move({ to: "n3" })], [3, move({ to: "n3" })]] },
    { name: "a task naming one instance", tasks: [task({ podGroup: "web", instance: 3 })], want: [[3, move()]] },
    { name: "a task of another group", tasks: [task({ podGroup: "db" })], want: [] },
    { name: "the rollout step's instance is not moved", tasks: [task()], rollout: 1, want: [[3, move()]] },
    { name: "an instance already moving is not moved again", tasks: [task()], moving: [1], want: [[3, move()]] },
    {
      name: "a pod only the last status knows (node unreachable since start) moves, above its drift count",
      tasks: [task({ from: down })],
      unseen: [[2, { instanceNo: 2, node: down, driftCount: 4 } as PodStatus]],
      want: [[2, move({ from: down, drift: 5 })]],
    },
  ];
  it.each(rows)("$name", (row) => {
    const pods = [container({ instance: 1, node: "n1" }), container({ instance: 2, node: "n2" }), container({ instance: 3, node: "n1" })].filter(
      (container) => !row.unseen?.some(([i]) => i === Number(container.labels["io.capstan.instance"])),
    );
    const internal = internalOf({
      ...(row.rollout !== undefined && { rollout: { instance: row.rollout, toVersion: 1, phase: "removing", at: now } }),
      instances: Object.fromEntries((row.moving ?? []).map((i) => [String(i), rec({ move: move() })])),
    });
    const starts = planDriftStarts(spec, viewOf(spec, pods), internal, row.tasks, new Map(row.unseen ?? []));
    expect([...starts]).toEqual(row.want);
  });

  it("the new drift count is above every copy (an extra on another node included)", () => {
    const pods = [container({ instance: 1, node: "n1", drift: 1 }), container({ instance: 1, node: down, drift: 3 })];
    const starts = planDriftStarts(spec, viewOf(spec, pods), internalOf({ instances: { "1": rec({ drift: 2 }) } }), [task()], new Map());
    expect(starts.get(1)?.drift).toBe(4);
  });

  it("a stateful group moves only for a forced task", () => {
    const stateful = group(1, 1, {}, { stateful: true });
    const pods = [container({ instance: 1, node: "n1" })];
    expect(planDriftStarts(stateful, viewOf(stateful, pods), internalOf(), [task()], new Map()).size).toBe(0);
    expect(planDriftStarts(stateful, viewOf(stateful, pods), internalOf(), [task({ force: true })], new Map()).size).toBe(1);
  });
});

describe("planMoves: recorded moves against what is observed", () => {
  const spec = group(2);
  const rows: { name: string; pods: ReturnType<typeof container>[]; instance?: number; record: InstanceRecord; tasks: DriftTask[]; moving: boolean; want?: InstanceRecord; cancelled?: boolean }[] = [
    { name: "pod still on `from`: still to carry out", pods: [container({ instance: 1, node: "n1" })], record: rec({ move: move() }), tasks: [task()], moving: true },
    { name: "pod gone, task pending (crash after the removal): still to carry out (never back onto `from`)", pods: [], record: rec({ move: move() }), tasks: [task()], moving: true },
    { name: "the new pod exists: done, its drift kept", pods: [container({ instance: 1, node: "n2", drift: 1 })], record: rec({ move: move() }), tasks: [task()], moving: false, want: rec({ drift: 1 }) },
    { name: "already off `from` (a spec update's step replaced it): cleared", pods: [container({ instance: 1, node: "n2" })], record: rec({ move: move() }), tasks: [task()], moving: false, want: rec() },
    {
      name: "task deleted, pod still on `from`: cancelled, its failures dropped",
      pods: [container({ instance: 1, node: "n1" })],
      record: rec({ move: move(), lastError: "drift: no node fits", nextDeployAt: now + 5 }),
      tasks: [],
      moving: false,
      want: rec(),
      cancelled: true,
    },
    { name: "task deleted, pod gone: cancelled, redeployed with the move's drift count", pods: [], record: rec({ move: move({ drift: 3 }) }), tasks: [], moving: false, want: rec({ drift: 3 }), cancelled: true },
    { name: "instance scaled away: cleared", pods: [], instance: 6, record: rec({ move: move() }), tasks: [task()], moving: false, want: rec() },
  ];
  it.each(rows)("$name", (row) => {
    const instance = row.instance ?? 1;
    const plan = planMoves(spec, viewOf(spec, row.pods), internalOf({ instances: { [String(instance)]: row.record } }), row.tasks);
    expect(plan.moving.has(instance)).toBe(row.moving);
    if (row.want) expect(plan.records.get(instance)).toEqual(row.want);
    expect(plan.cancelled.length > 0).toBe(row.cancelled === true);
  });
});

describe("dueMoves (R9)", () => {
  it("a move in back-off waits for it; the others are due, lowest first", () => {
    const moving = new Map([
      [2, move()],
      [0, move()],
      [1, move()],
    ]);
    const internal = internalOf({ instances: { "1": rec({ nextDeployAt: now + 3_000 }), "2": rec({ nextDeployAt: now }) } });
    expect(dueMoves(moving, internal, now)).toEqual({ due: [0, 2], wakeAt: [now + 3_000] });
    clock.advance(3_000);
    expect(dueMoves(moving, internal, clock.now()).due).toEqual([0, 1, 2]);
  });
});
