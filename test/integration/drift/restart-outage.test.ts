// The orchestrator restarted while a node is down (review finding 1): its container cache has
// nothing of that node, only the last status says what runs there. Checked: no instance is
// redeployed before -node-timeout (the status keeps the pod on the lost node, state unknown);
// then the auto drift moves it with a higher drift count; once the node answers again the
// replacement survives and the old copy is removed. The engine is started again whatever happens.
import { describe, expect, it } from "vitest";
import { useDriftHarness } from "./harness.ts";

const nodeTimeoutMs = 8_000;
const h = useDriftHarness({ nodeTimeoutMs }, 120_000);

describe("orchestrator restarted while a node is down", () => {
  it("redeploys nothing early, drifts at the node timeout, and keeps the replacement when the node returns", async () => {
    const g = h.name("outage");
    await h.create(g, 2);
    const before = await h.running(g, 2);
    const lost = before.find((a) => a.c.node === "n2")!;
    expect(lost).toBeDefined();

    await h.stopOrchestrator();
    await h.stopEngine("n2");
    const t0 = Date.now();
    await h.startOrchestrator();

    // Several refresh periods (2 s) but less than the node timeout: nothing of the lost instance
    // appears on n1, and the status still places it on n2.
    while (Date.now() - t0 < nodeTimeoutMs - 2_500) {
      const onN1 = (await h.actual(g)).filter((a) => a.instance === lost.instance && a.c.node === "n1");
      expect(onN1).toEqual([]);
      const pod = (await h.status(g))?.pods.find((p) => p.instanceNo === lost.instance);
      expect(pod).toMatchObject({ node: "n2", containers: [expect.objectContaining({ id: lost.c.id })] });
      await new Promise((r) => setTimeout(r, 250));
    }

    const moved = await h.until("the lost instance drifted to n1", async () => {
      const a = await h.actual(g);
      return a.find((x) => x.instance === lost.instance && x.c.node === "n1" && x.c.state === "running");
    }, 60_000, 200);
    expect(moved.drift).toBe(lost.drift + 1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(nodeTimeoutMs - 1_000);
    await h.driftTasksDone(30_000);

    await h.startEngine("n2");
    const after = await h.running(g, 2, 60_000);
    expect(after.map((a) => a.c.node)).toEqual(["n1", "n1"]);
    expect(after.find((a) => a.instance === lost.instance)!.c.id).toBe(moved.c.id);
    // The old copy on n2 is gone from the engine itself.
    const onN2 = await h.cluster.listContainers("n2", { all: true, filters: { label: [`io.capstan.podgroup=${g}`] } });
    expect(onN2).toEqual([]);
  }, 180_000);
});
