// The orchestrator restarted between a dependency's last reference going away and its GC time:
// the pod is reclaimed on time (from the stored verifyTime), not early (counts are rebuilt from
// complete caches before any decision), not never. And end to end with the real PodGroup
// controller: a group's instance gets the dependency pod on its own node; the group deleted, the
// pod is reclaimed after the GC time.
import { afterAll, describe, expect, it } from "vitest";
import { Harness, serve, services } from "./harness.ts";

describe("restart between the last reference and the GC time", () => {
  const gcMs = 6_000;
  const h = new Harness({ gcMs });
  afterAll(() => h.cleanup());

  it("reclaims on time, not early, not never", async () => {
    await h.start();
    const dep = h.name("d");
    const kept = h.name("kept");
    await h.createDependency(dep);
    await h.createDependency(kept);
    const g = h.name("g");
    await h.putGroup(g, "ns", [{ podName: dep, policy: "node" }], ["n1"]);
    // A second dependency stays referenced across the restart: it must not be reclaimed at all.
    await h.putGroup(h.name("g"), "ns", [{ podName: kept, policy: "namespace" }], ["n2"]);
    const [c] = await h.until("pod running", async () => {
      const a = await h.actual(dep);
      return a.length === 1 && a[0]!.state === "running" && a;
    });
    const [k] = await h.until("kept pod running", async () => {
      const a = await h.actual(kept);
      return a.length === 1 && a[0]!.state === "running" && a;
    });
    await h.deleteGroup(g);
    const zero = await h.until("refCount 0 recorded", async () => {
      const p = await h.pod(dep, "n1", "");
      return p?.refCount === 0 && p;
    });
    const reclaimAt = Date.parse(zero.verifyTime) + gcMs;

    await h.stopControllers();
    // A real period with no controller at all, on purpose (not a wait for something to happen):
    // the pod's GC time keeps running while nobody is there to count it, so the new controller
    // must reclaim it from the stored verifyTime, with less time left than a fresh count would
    // give, and not from when it came up. The gap is measured, so it cannot shrink unnoticed.
    const stoppedAt = Date.now();
    await new Promise((r) => setTimeout(r, 1_000));
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(1_000);
    await h.startControllers();
    // Not early: the new controller still has the pod, with the stored verifyTime and the reclaim
    // time counted from it (not from the new controller's start, a second or more later), at every
    // poll until shortly before its time...
    const verifyTimes = new Set<string>();
    const reclaimTimes = new Set<string>();
    const seen = await h.watchUntilGone(dep, reclaimAt - Date.now() + 3_000, async () => {
      const pod = await h.pod(dep, "n1", "");
      if (pod) verifyTimes.add(pod.verifyTime);
      if (pod?.reclaimAt !== undefined) reclaimTimes.add(pod.reclaimAt);
    });
    expect(seen.lists).toEqual([c!.id]);
    expect([...verifyTimes]).toEqual([zero.verifyTime]);
    expect(zero.reclaimAt).toBe(new Date(reclaimAt).toISOString());
    expect([...reclaimTimes]).toEqual([zero.reclaimAt]);
    expect(seen.lastPresentAt).toBeGreaterThanOrEqual(reclaimAt - 1_000);
    // ...on time: gone within a few seconds after it (never before it).
    expect(Date.now()).toBeGreaterThanOrEqual(reclaimAt);
    // The referenced one is untouched by the new controller's next full refresh.
    await h.refreshes(kept, 1);
    expect((await h.actual(kept)).map((x) => [x.id, x.state])).toEqual([[k!.id, "running"]]);
  });
});

describe("end to end with the PodGroup controller", () => {
  const h = new Harness({ gcMs: 3_000, podGroups: true });
  afterAll(() => h.cleanup());

  it("deploys the dependency pod on the instance's node; reclaims it after the group is deleted", async () => {
    await h.start();
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    const now = new Date().toISOString();
    const group = {
      name: g,
      namespace: "e2e",
      numInstances: 1,
      restartPolicy: "always",
      pod: {
        name: g,
        namespace: "e2e",
        version: 1,
        containers: [{ image: services.testImage, command: serve }],
        network: "none",
        filters: ["node==n2"],
        dependencies: [{ podName: dep, policy: "namespace" }],
      },
      createdAt: now,
      updatedAt: now,
    };
    await h.store.put(`${h.layout.podGroups}${g}`, JSON.stringify(group));
    await h.until("dependency pod on n2 for namespace e2e", async () => (await h.placement(dep)).join() === "n2/e2e", 30_000);
    expect((await h.pod(dep, "n2", "e2e"))?.refCount).toBe(1);

    // DELETE of the group: the PodGroup controller removes the instance, then the keys.
    await h.store.put(`${h.layout.podGroups}${g}`, JSON.stringify({ ...group, deleting: true }));
    const zero = await h.until("refCount 0", async () => {
      const p = await h.pod(dep, "n2", "e2e");
      return p?.refCount === 0 && p;
    }, 30_000);
    expect(await h.placement(dep)).toEqual(["n2/e2e"]); // not removed with the reference
    await h.until("reclaimed", async () => (await h.actual(dep)).length === 0, 10_000);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(zero.verifyTime) + 3_000);
  });
});
