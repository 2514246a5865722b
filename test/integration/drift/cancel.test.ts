// Deleting a drift task cancels the moves it started (review finding 2). The group is pinned to
// n1 (filter node==n1), so a drift from n1 to n2 can never be placed: the instance stays on n1,
// "drifting" with "no node fits". Once the task key is deleted, the move is dropped: the very
// same container runs on, the pod is "running" again with no error, and nothing is retried.
import { describe, expect, it } from "vitest";
import { keys } from "../../../api/resources/keys.ts";
import { useDriftHarness } from "./harness.ts";

const h = useDriftHarness();

describe("a drift task deleted before its move could be made", () => {
  it("is cancelled: the instance stays where it runs and stops drifting", async () => {
    const g = h.name("pinned");
    await h.create(g, 1, { filters: ["node==n1"] });
    const [before] = await h.running(g, 1);
    expect(before!.c.node).toBe("n1");

    const res = await h.drift({ cmd: "drift", from: "n1", to: "n2", pg: g });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const task = res.body.task as string;
    await h.until("the move stuck on no node fits", async () => {
      const p = (await h.status(g))?.pods[0];
      return p?.state === "drifting" && p.lastError.includes("no node fits");
    });

    await h.store!.delete(keys.task(task));
    const pod = await h.until("drifting no more", async () => {
      const s = await h.status(g);
      const instances = (s?.internal as { instances?: Record<string, { move?: unknown }> } | undefined)?.instances;
      return s?.state === "running" && instances?.["1"]?.move === undefined ? s.pods[0] : undefined;
    }, 15_000);
    expect(pod).toMatchObject({ state: "running", lastError: "", node: "n1", driftCount: 0 });
    const after = await h.actual(g);
    expect(after.map((a) => a.c.id)).toEqual([before!.c.id]);
    expect(after[0]!.c.state).toBe("running");
  }, 60_000);
});
