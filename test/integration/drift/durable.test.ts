// A drift survives an orchestrator restart mid-way. The pods ignore SIGTERM (busybox sleep as PID
// 1), so removing one on `from` takes its kill timeout (10 s): the orchestrator is stopped while
// the moves are under way (recorded, pods being stopped), then started again. The task must
// complete with each moved instance exactly once on the other node, with the drift count the first
// run recorded (1, not 2), nothing of the group left on `from` and no duplicate anywhere.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DriftHarness } from "./harness.ts";

const h = new DriftHarness();

beforeAll(async () => {
  await h.start();
}, 60_000);

afterAll(async () => {
  await h.cleanup();
}, 90_000);

describe("drift across an orchestrator restart", () => {
  it("completes after the restart: no duplicates, nothing left on `from`, drift counted once", async () => {
    const name = h.name("durable");
    await h.create(name, 4, { killTimeout: 10 }, { command: ["sleep", "3600"] });
    const before = await h.running(name, 4);
    const moving = before.filter((a) => a.c.node === "n1").map((a) => a.instance);
    expect(moving).toHaveLength(2);

    const res = await h.drift({ cmd: "drift", from: "n1", pg: name });
    expect(res.status).toBe(202);
    // The moves are recorded (status "drifting") before the old pods are touched; stop then.
    const s = await h.until("drifting", async () => {
      const st = await h.status(name);
      return moving.every((i) => st?.pods[i]?.state === "drifting") ? st : undefined;
    }, 15_000, 50);
    expect(s.state).toBe("degraded");
    await h.stopOrchestrator();
    expect((await h.tasks()).filter((t) => t.kind === "drift")).toHaveLength(1); // still pending: durable

    await h.startOrchestrator();
    await h.driftTasksDone(60_000);
    const after = await h.running(name, 4, 30_000);
    expect(after.map((a) => a.c.node)).toEqual(["n2", "n2", "n2", "n2"]);
    for (const a of after) expect(a.drift).toBe(moving.includes(a.instance) ? 1 : 0);
    // Exactly one container per instance on any node (running() counted all states), none on n1.
    expect((await h.actual(name)).filter((a) => a.c.node === "n1")).toEqual([]);
    const status = (await h.status(name))!;
    expect(status.pods.map((p) => p.driftCount)).toEqual([0, 1, 2, 3].map((i) => (moving.includes(i) ? 1 : 0)));
  }, 120_000);
});
