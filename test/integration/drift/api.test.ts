// The nodes API over real HTTP, served by the orchestrator's own assembly on a private etcd with
// both real engines: GET /api/nodes as the node monitor records them (reserved follows a deployed
// group's limits), and every refusal of PATCH cmd=drift, each answered 400/404 naming the
// parameter with no task written; an accepted request writes exactly one task.
import { describe, expect, it } from "vitest";
import type { DriftTask } from "../../../api/resources/task.ts";
import { useDriftHarness } from "./harness.ts";

const h = useDriftHarness();
const MiB = 1 << 20;

describe("GET /api/nodes", () => {
  it("lists both engines with their capacity and state, and reserved counts a deployed group's limits", async () => {
    const before = await h.nodes();
    expect(before.map((n) => n.name)).toEqual(["n1", "n2"]);
    for (const n of before) {
      expect(n).toMatchObject({ state: "ready", address: "127.0.0.1" });
      expect(n.cpus).toBeGreaterThan(0);
      expect(n.memoryBytes).toBeGreaterThan(0);
      expect(typeof n.containers).toBe("number");
      expect(n.reserved).toEqual({ cpus: expect.any(Number), memoryBytes: expect.any(Number) });
      expect(Date.parse(n.updatedAt)).not.toBeNaN();
      expect(n.unreachableSince).toBeUndefined();
    }
    const name = h.name("limits");
    await h.create(name, 1, {}, { memoryLimit: 64 * MiB, cpuLimit: 0.25 });
    const [pod] = await h.running(name, 1);
    const node = pod!.c.node;
    // Other tests may run Capstan containers on the same engines: ours must be counted at least.
    const seen = await h.until(`reserved on ${node} counts the group`, async () => {
      const n = (await h.nodes()).find((x) => x.name === node)!;
      return n.reserved.memoryBytes >= 64 * MiB && n.reserved.cpus >= 0.25 ? n : undefined;
    });
    const was = before.find((x) => x.name === node)!;
    expect(seen.reserved.memoryBytes).toBeGreaterThan(was.reserved.memoryBytes);
    await h.call("DELETE", `/api/podgroups?name=${name}`);
    await h.until("group removed", async () => (await h.actual(name)).length === 0);
  });
});

describe("PATCH /api/nodes?cmd=drift refusals", () => {
  const refusals: [string, Record<string, string>, number, string][] = [
    ["cmd missing", { from: "n1" }, 400, "cmd"],
    ["an unknown cmd", { cmd: "drain", from: "n1" }, 400, "cmd"],
    ["from missing", { cmd: "drift" }, 400, "from"],
    ["from empty", { cmd: "drift", from: "" }, 400, "from"],
    ["to equal to from", { cmd: "drift", from: "n1", to: "n1" }, 400, "to"],
    ["to not a node of the cluster", { cmd: "drift", from: "n1", to: "n9" }, 400, "to"],
    ["pg_instance without pg", { cmd: "drift", from: "n1", pg_instance: "0" }, 400, "pg_instance"],
    ["a negative pg_instance", { cmd: "drift", from: "n1", pg: "x", pg_instance: "-1" }, 400, "pg_instance"],
    ["a non-integer pg_instance", { cmd: "drift", from: "n1", pg: "x", pg_instance: "1.5" }, 400, "pg_instance"],
    ["pg_instance 0 (instances are numbered from 1)", { cmd: "drift", from: "n1", pg: "x", pg_instance: "0" }, 400, "pg_instance"],
    ["a non-boolean force", { cmd: "drift", from: "n1", force: "yes" }, 400, "force"],
    ["an unknown pg", { cmd: "drift", from: "n1", pg: "no-such-group" }, 404, ""],
  ];

  it.each(refusals)("%s: %i naming the parameter, nothing written", async (_what, params, status, path) => {
    const res = await h.drift(params);
    expect(res.status).toBe(status);
    if (status === 400) {
      expect(res.body.code).toBe("BadRequest");
      expect(res.body.details?.map((d) => d.path)).toContain(path);
    } else {
      expect(res.body).toMatchObject({ code: "NotFound", message: "podgroup no-such-group not found" });
    }
    expect(await h.tasks()).toEqual([]);
  });

  it("pg_instance beyond the group's instances: 400, nothing written", async () => {
    const name = h.name("range");
    await h.create(name, 0);
    await h.create(`${name}-two`, 2);
    const res = await h.drift({ cmd: "drift", from: "n1", pg: name, pg_instance: "1" });
    expect(res.status).toBe(400);
    expect(res.body.details?.map((d) => d.path)).toEqual(["pg_instance"]);
    const above = await h.drift({ cmd: "drift", from: "n1", pg: `${name}-two`, pg_instance: "3" });
    expect([above.status, above.body.message]).toEqual([400, `pg_instance: podgroup ${name}-two has instances 1..2`]);
    const zero = await h.drift({ cmd: "drift", from: "n1", pg: `${name}-two`, pg_instance: "0" });
    expect([zero.status, zero.body.message]).toEqual([400, "pg_instance: instances are numbered from 1"]);
    expect(await h.tasks()).toEqual([]);
  });
});

describe("PATCH /api/nodes?cmd=drift accepted", () => {
  it("writes one durable drift task with what was asked and answers 202; a node no longer in the cluster may be drained", async () => {
    const name = h.name("accept");
    await h.create(name, 0);
    const res = await h.drift({ cmd: "drift", from: "gone-node", to: "n2", pg: name, force: "TRUE", pg_instance: "" });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ from: "gone-node", to: "n2", pg: name, pgInstance: null, force: true, checkUrl: `/api/podgroups?name=${name}` });
    const tasks = (await h.tasks()) as DriftTask[];
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toMatchObject({ id: res.body.task, kind: "drift", from: "gone-node", to: "n2", podGroup: name, force: true, reason: "request" });
    expect(tasks[0]!.instance).toBeUndefined();
    // Nothing of the group is on gone-node: the task is done at once and deleted.
    await h.driftTasksDone(15_000);
  });
});
