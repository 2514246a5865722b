// The pure parts of drift: which pod classify() keeps once an instance has drifted, which tasks
// and instances a drift task covers, when a task still waits, how tasks decode, and the status of
// a moving instance.
import { describe, expect, it } from "vitest";
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import type { DriftTask } from "../../../api/resources/task.ts";
import { coversInstance, groupPending, newMoves, tasksForGroup } from "../../../controllers/podgroup/drift.ts";
import { containerLabels, containerName } from "../../../controllers/podgroup/naming.ts";
import { classify } from "../../../controllers/podgroup/observe.ts";
import { buildStatus } from "../../../controllers/podgroup/status.ts";
import { decodeTask, readInternal, type Internal } from "../../../controllers/podgroup/stored.ts";
import { cached, stored } from "../podgroup/fixtures.ts";

/** A container of web's instance `instance` at `drift` on `node`. */
function pod(instance: number, drift: number, node: string, over: Partial<CachedContainer> = {}): CachedContainer {
  const ref = { group: "web", instance, version: 1, drift, index: 0 };
  return cached({ instance, node }, { name: containerName(ref), labels: containerLabels({ ...ref, namespace: "ns" }), ...over });
}

const reachable = (n: string) => n !== "down";
const view = (cs: CachedContainer[]) => classify(cs, { group: "web", version: 1, podSize: 1, reachable });
const task = (t: Partial<DriftTask> = {}): DriftTask => ({ id: "t1", kind: "drift", from: "n1", force: false, reason: "request", createdAt: "", ...t });

describe("classify after a drift", () => {
  it("keeps the higher drift count, even not yet running and older copies running; the copy left behind is an extra", () => {
    const old = pod(0, 0, "n1");
    const moved = pod(0, 1, "n2", { state: "created" });
    const v = view([old, moved]).instances.get(0)!;
    expect(v.kept!.node).toBe("n2");
    expect(v.extras.map((o) => o.c.id)).toEqual([old.id]);
  });

  it("still prefers a reachable node first: a drifted pod on a node that is down does not win", () => {
    const v = view([pod(0, 2, "down"), pod(0, 1, "n1")]).instances.get(0)!;
    expect(v.kept).toMatchObject({ node: "n1", drift: 1 });
  });
});

describe("which tasks and instances a drift covers", () => {
  it("all groups or the named one; stateful groups only with force", () => {
    const plain = stored();
    const stateful = stored({}, { stateful: true });
    const tasks = [task({ id: "all" }), task({ id: "other", podGroup: "api" }), task({ id: "forced", force: true })];
    expect(tasksForGroup(plain, tasks).map((t) => t.id)).toEqual(["all", "forced"]);
    expect(tasksForGroup(stateful, tasks).map((t) => t.id)).toEqual(["forced"]);
    expect(tasksForGroup(stored({}, { containers: [{ image: "i", volumes: ["/data"] }] }), tasks).map((t) => t.id)).toEqual(["forced"]);
  });

  it("instances 1..numInstances, or just pg_instance", () => {
    expect(coversInstance(task(), 2, 2)).toBe(true);
    expect(coversInstance(task(), 3, 2)).toBe(false);
    expect(coversInstance(task(), 0, 2)).toBe(false);
    expect(coversInstance(task({ podGroup: "web", instance: 2 }), 1, 2)).toBe(false);
    expect(coversInstance(task({ podGroup: "web", instance: 2 }), 2, 2)).toBe(true);
  });

  it("new moves: kept pods on `from`, with a drift count above every copy of the instance; skipped and already moving ones excluded", () => {
    const v = view([pod(1, 0, "n1"), pod(1, 3, "down"), pod(2, 0, "n2"), pod(3, 0, "n1"), pod(4, 0, "n1")]);
    const internal: Internal = { instances: { "4": { restarts: 0, failures: 0, move: { task: "t0", from: "n1", drift: 1 } } } };
    const moves = newMoves(stored({ numInstances: 4 }), v, internal, [task()], (i) => i === 3);
    expect([...moves.entries()].map(([i, m]) => [i, m.drift, m.task.id])).toEqual([[1, 4, "t1"]]);
  });
});

describe("groupPending", () => {
  const spec = stored();
  it("waits while a covered instance's kept pod is on `from`, or a move off it is recorded", () => {
    expect(groupPending(spec, view([pod(1, 0, "n1")]), undefined, task())).toBe(true);
    expect(groupPending(spec, view([pod(1, 1, "n2"), pod(1, 0, "down")]), undefined, task({ from: "down" }))).toBe(false);
    const moving: Internal = { instances: { "1": { restarts: 0, failures: 0, move: { task: "t1", from: "n1", drift: 1 } } } };
    expect(groupPending(spec, view([]), moving, task())).toBe(true);
  });

  it("does not wait for what the task leaves alone: other instances, stateful groups without force, deleted groups", () => {
    expect(groupPending(spec, view([pod(1, 0, "n1")]), undefined, task({ podGroup: "web", instance: 2 }))).toBe(false);
    expect(groupPending(stored({}, { stateful: true }), view([pod(1, 0, "n1")]), undefined, task())).toBe(false);
    expect(groupPending(stored({ deleting: true }), view([pod(1, 0, "n1")]), undefined, task())).toBe(false);
  });
});

describe("stored forms", () => {
  const kv = (value: string) => ({ key: "/p/tasks/drift-1", value, modRevision: 3 });
  it("decodes drift tasks, with the id from the key; malformed ones decode as nothing", () => {
    expect(decodeTask(kv('{"kind":"drift","from":"n1","to":"n2","podGroup":"web","instance":1,"instanceBase":1,"force":true,"reason":"node-timeout"}')).task).toEqual({
      id: "drift-1",
      kind: "drift",
      from: "n1",
      to: "n2",
      podGroup: "web",
      instance: 1,
      force: true,
      reason: "node-timeout",
      createdAt: "",
    });
    // A task of the 0-based numbering (no instanceBase): its instance is one more now.
    expect(decodeTask(kv('{"kind":"drift","from":"n1","podGroup":"web","instance":0}')).task).toMatchObject({ instance: 1 });
    expect(decodeTask(kv('{"kind":"drift","from":""}')).task).toBeUndefined();
    expect(decodeTask(kv('{"kind":"drift","from":"n1","instance":1}')).task).toBeUndefined(); // instance needs podGroup
    expect(decodeTask(kv('{"kind":"drift","from":"n1","instance":-1,"podGroup":"web"}')).task).toBeUndefined();
  });

  it("reads a recorded move and drift count back from status.internal; drops a malformed move", () => {
    const internal = readInternal({
      state: "running",
      lastError: "",
      updatedAt: "",
      observedVersion: 1,
      pods: [],
      internal: { instances: { "0": { restarts: 0, failures: 0, drift: 2, move: { task: "t", from: "n1", drift: 3 } }, "1": { restarts: 0, failures: 0, move: { from: 1 } } } },
    });
    expect(internal.instances["0"]).toMatchObject({ drift: 2, move: { task: "t", from: "n1", drift: 3 } });
    expect(internal.instances["1"]!.move).toBeUndefined();
  });
});

describe("status of a moving instance", () => {
  it("is drifting while the move is recorded, and counts the drift afterwards", () => {
    const spec = stored({ numInstances: 1 });
    const base = { spec, removing: false, previous: undefined, reachable, nodeAddress: () => "127.0.0.1", notes: [], now: 0 };
    const moving: Internal = { instances: { "1": { restarts: 0, failures: 0, move: { task: "t", from: "n1", drift: 1 } } } };
    const during = buildStatus({ ...base, view: view([pod(1, 0, "n1")]), internal: moving });
    expect(during.pods[0]).toMatchObject({ state: "drifting", node: "n1", driftCount: 0 });
    expect(during.state).toBe("degraded");
    const after = buildStatus({ ...base, view: view([pod(1, 1, "n2")]), internal: { instances: { "1": { restarts: 0, failures: 0, drift: 1 } } } });
    expect(after.pods[0]).toMatchObject({ state: "running", node: "n2", driftCount: 1 });
    expect(after.state).toBe("running");
  });
});
