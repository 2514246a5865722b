// PodGroup operations table, spec update row: one instance at a time with the update wait, a
// failing new version halting the rollout with a clear status, and stateful pods keeping their
// node and their volume data.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ContainerEvent } from "../../../adapters/cluster/index.ts";
import { labelKeys } from "../../../controllers/podgroup/naming.ts";
import { groupSpec, Harness, serve, type Actual } from "./harness.ts";

const h = new Harness({ updateWaitMs: 500 });

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await h.cleanup();
});

/** Samples the group's containers until stopped; returns every sample. */
function sample(name: string): { stop(): Promise<Actual[][]> } {
  const samples: Actual[][] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      // A sample the engines could not answer is skipped (another suite may restart an engine).
      const a = await h.actual(name).catch(() => undefined);
      if (a) samples.push(a);
      await new Promise((r) => setTimeout(r, 40));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

describe("spec update", () => {
  it("replaces one instance at a time: remove, wait, deploy, check; never two instances down", async () => {
    const name = h.name("roll");
    await h.put(groupSpec(name, { numInstances: 3 }));
    await h.converged(name, 3, 1);

    const events: { action: string; instance: number; version: number; at: number }[] = [];
    const sub = await h.subscribe(
      (ev) => {
        if (ev.type !== "container") return;
        const e = ev as ContainerEvent;
        events.push({ action: e.action, instance: Number(e.labels[labelKeys.instance]), version: Number(e.labels[labelKeys.version]), at: Date.now() });
      },
      { filters: { label: [`${labelKeys.podGroup}=${name}`], event: ["create", "destroy", "rename"] } },
    );
    const sampler = sample(name);
    await h.updatePod(name, (pod) => (pod.containers[0]!.env = ["NEW=1"]));
    const after = await h.converged(name, 3, 2, 30_000);
    const samples = await sampler.stop();
    await sub.unsubscribe();

    // Never more than one instance without a running container, and v2 instances always a prefix 1..k.
    for (const s of samples) {
      const up = new Set(s.filter((a) => a.c.state === "running").map((a) => a.instance));
      expect([1, 2, 3].filter((i) => !up.has(i)).length).toBeLessThanOrEqual(1);
      const v2 = [...new Set(s.filter((a) => a.version === 2).map((a) => a.instance))].sort();
      expect(v2).toEqual(v2.map((_, i) => i + 1));
    }
    // Order and the update wait: v1 of i stopped and kept as its previous container (a rename, not
    // a destroy: docs/podgroup-controller.md, "The previous container"), >= 500 ms, create v2 of
    // i, then the next instance.
    const order = events.filter((e) => ((e.action === "destroy" || e.action === "rename") && e.version === 1) || (e.action === "create" && e.version === 2));
    expect(order.map((e) => `${e.action}:${e.instance}`)).toEqual(["rename:1", "create:1", "rename:2", "create:2", "rename:3", "create:3"]);
    for (let i = 0; i < 3; i++) expect(order[2 * i + 1]!.at - order[2 * i]!.at).toBeGreaterThanOrEqual(450);

    const d = await h.cluster.inspect(after[2]!.c);
    expect(d.env).toContain("NEW=1");
    const s = (await h.status(name))!;
    expect(s.observedVersion).toBe(2);
    expect(s.pods.every((p) => p.version === 2 && p.state === "running")).toBe(true);
  });

  it("halts on a failing new version with a clear status, keeps the other instances up, and rolls on with a fixed spec", async () => {
    const name = h.name("halt");
    await h.put(groupSpec(name, { numInstances: 3, restartPolicy: "onfail" }));
    const v1 = await h.converged(name, 3, 1);

    await h.updatePod(name, (pod) => (pod.containers[0]!.command = ["sh", "-c", "exit 3"]));
    const s = await h.until("halted", async () => {
      const st = await h.status(name);
      return st?.state === "failed" && st.lastError.includes("halted at instance 1") ? st : undefined;
    });
    expect(s.lastError).toMatch(/code 3/);
    expect(s.pods[0]).toMatchObject({ instanceNo: 1, version: 2, state: "failed" });
    await h.waitedAndLooked(name, Date.now(), 1_500); // 1.5 s (past the update wait) and a pass since: nothing more is replaced
    const mid = await h.actual(name);
    // Instances 2 and 3 were never touched.
    expect(mid.filter((a) => a.instance > 1).map((a) => [a.c.id, a.c.state])).toEqual(v1.slice(1).map((a) => [a.c.id, "running"]));

    await h.updatePod(name, (pod) => (pod.containers[0]!.command = serve));
    await h.converged(name, 3, 3, 30_000);
  });
});

describe("stateful pods", () => {
  it("keep their node through a spec update even when placement would move them, and their volume data", async () => {
    const name = h.name("state");
    const write = ["sh", "-c", "echo \"i$CAPSTAN_INSTANCE_NO-v1\" > /data/marker; trap 'exit 0' TERM; sleep 3600 & wait"];
    await h.put(groupSpec(name, { numInstances: 2, container: { command: write, volumes: ["/data"] }, pod: { filters: ["node==n1"] } }));
    const v1 = await h.converged(name, 2, 1);
    expect(v1.map((a) => a.c.node)).toEqual(["n1", "n1"]);

    // v2 drops the filter (the spread hint would now put one instance on n2) and no longer writes.
    await h.updatePod(name, (pod) => {
      pod.filters = [];
      pod.containers[0]!.command = serve;
    });
    const v2 = await h.converged(name, 2, 2, 30_000);
    expect(v2.map((a) => a.c.node)).toEqual(["n1", "n1"]);
    expect(v2.map((a) => a.c.id)).not.toEqual(v1.map((a) => a.c.id));
    for (const a of v2) expect((await h.exec(a.c, ["cat", "/data/marker"])).trim()).toBe(`i${a.instance}-v1`);

    // A stateful instance whose container vanishes comes back on its node, with its data.
    await h.cluster.remove(v2[1]!.c, { force: true });
    const back = await h.until("instance 2 back", async () => {
      const a = (await h.actual(name)).find((x) => x.instance === 2 && x.c.state === "running");
      return a && a.c.id !== v2[1]!.c.id ? a : undefined;
    });
    expect(back.c.node).toBe("n1");
    expect((await h.exec(back.c, ["cat", "/data/marker"])).trim()).toBe("i2-v1");
  });
});
