// Auto drift: engine n2 is stopped (scripts/services stop-engine) for longer than the node timeout
// (3 s here). The node monitor writes one drift task for the outage; the non-stateful group's pod
// on n2 is deployed on n1 without waiting for n2, the stateful group's stays. When n2 is started
// again, the old copy there is removed: one pod per instance, nowhere a duplicate. The engine is
// started again whatever happens (the harness's clean-up), since other tests share it.
import { describe, expect, it } from "vitest";
import { useDriftHarness } from "./harness.ts";

const h = useDriftHarness({ nodeTimeoutMs: 3_000 }, 120_000);

describe("a node unreachable past -node-timeout", () => {
  it("has its non-stateful instances drifted elsewhere; once back, its old copies are removed", async () => {
    const plain = h.name("plain");
    const stateful = h.name("stateful");
    await h.create(plain, 2);
    await h.create(stateful, 2, { stateful: true });
    const plainBefore = await h.running(plain, 2);
    const statefulBefore = await h.running(stateful, 2);
    const lost = plainBefore.find((a) => a.c.node === "n2")!;
    const kept = statefulBefore.find((a) => a.c.node === "n2")!;
    expect(lost).toBeDefined();
    expect(kept).toBeDefined();
    const t0 = Date.now();
    await h.stopEngine("n2");
    const moved = await h.until("the plain instance running on n1", async () => {
      const a = await h.actual(plain);
      return a.find((x) => x.instance === lost.instance && x.c.node === "n1" && x.c.state === "running" && x.drift === 1);
    }, 60_000, 200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3_000);
    const n2 = (await h.nodes()).find((n) => n.name === "n2")!;
    expect(n2).toMatchObject({ state: "unreachable", autoDriftTask: expect.stringMatching(/^node-timeout-n2-\d+$/) });
    expect(Date.parse(n2.unreachableSince!)).toBeLessThanOrEqual(Date.now() - 3_000);
    // The stateful group's instance on n2 stays (unknown), nothing of it is deployed on n1.
    expect((await h.actual(stateful)).filter((a) => a.instance === kept.instance && a.c.node === "n1")).toEqual([]);
    expect((await h.status(stateful))!.pods.find((p) => p.instanceNo === kept.instance)!.node).toBe("n2");
    await h.driftTasksDone(30_000);

    await h.startEngine("n2");
    const plainAfter = await h.running(plain, 2, 60_000);
    expect(plainAfter.map((a) => a.c.node)).toEqual(["n1", "n1"]);
    expect(plainAfter.find((a) => a.instance === lost.instance)!.c.id).toBe(moved.c.id);
    const statefulAfter = await h.running(stateful, 2, 60_000);
    expect(statefulAfter.find((a) => a.instance === kept.instance)!.c.id).toBe(kept.c.id); // restarted in place
    const back = await h.until("n2 ready again", async () => (await h.nodes()).find((n) => n.name === "n2" && n.state === "ready"), 30_000);
    expect(back.unreachableSince).toBeUndefined();
    expect(back.autoDriftTask).toBeUndefined();
    expect((await h.tasks()).filter((t) => t.kind === "drift")).toEqual([]);
  }, 180_000);
});
