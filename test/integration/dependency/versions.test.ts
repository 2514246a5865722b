// Review finding 3 on the real store and engines: a pod counts the dependencies of the spec
// version it runs. A spec update that drops a dependency keeps its pod while instances of the old
// version run, and the pod is reclaimed GC time after the last of them is replaced. The pods'
// own reported lists (the PodGroup status field fed by the io.capstan.dependencies label) keep
// counting across a controller restart in the middle of such a rollout.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { labelKeys } from "../../../controllers/dependency/naming.ts";
import { Harness } from "./harness.ts";

const gcMs = 3_000;
const h = new Harness({ gcMs });
beforeAll(() => h.start());
afterAll(() => h.cleanup());

/** The dependency's containers on n1 (this file uses n1 only: other files restart n2 at times). */
const onN1 = (dep: string) => h.cluster.listContainers("n1", { all: true, filters: { label: [`${labelKeys.dependency}=${dep}`] } });

describe("references from the version each instance runs", () => {
  it("a spec update dropping a dependency: its pod stays while old-version instances run, reclaimed after GC once they are gone", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    const uses = [{ podName: dep, policy: "node" as const }];
    await h.putGroup(g, "ns", uses, ["n1", "n1"]);
    const first = await h.until("pod running with 2 references", async () => {
      const p = await h.pod(dep, "n1", "");
      return p?.refCount === 2 && p.state === "running" && p;
    });

    // cmd=spec: version 2 lists nothing; both instances still run version 1.
    await h.putGroup(g, "ns", [], ["n1", "n1"], { spec: 2, pods: 1, only: "spec" });
    // A pass well after the GC time a dropped count would have started: nothing reclaimed.
    await h.passAfter(dep, Date.now() + gcMs + 1_500);
    const during = await h.pod(dep, "n1", "");
    expect(during?.refCount).toBe(2);
    expect((await onN1(dep)).map((c) => [c.id, c.state])).toEqual([[first.containers[0]!.id, "running"]]);

    // The rollout replaces the instances one by one: the count follows.
    await h.putGroup(g, "ns", [], ["n1", "n1"], { spec: 2, pods: 1, only: "status" });
    const status = async (versions: number[]) => {
      const kv = await h.store.get(`${h.layout.podGroupStatus}${g}`);
      const st = JSON.parse(kv!.value) as { pods: { version: number }[] };
      st.pods.forEach((p, i) => (p.version = versions[i]!));
      await h.store.put(`${h.layout.podGroupStatus}${g}`, JSON.stringify(st));
    };
    await status([2, 1]);
    await h.until("refCount 1", async () => (await h.pod(dep, "n1", ""))?.refCount === 1);
    await status([2, 2]);
    const zero = await h.until("refCount 0", async () => {
      const p = await h.pod(dep, "n1", "");
      return p?.refCount === 0 && p;
    });
    expect((await onN1(dep)).map((c) => c.id)).toEqual([first.containers[0]!.id]); // not removed with the reference
    await h.until("reclaimed", async () => (await onN1(dep)).length === 0, gcMs + 5_000);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(zero.verifyTime) + gcMs);
  });

  it("a pod's reported list keeps counting across a controller restart mid-rollout", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    const uses = [{ podName: dep, policy: "namespace" as const }];
    // The spec is at version 2 (lists nothing); the instance runs version 1 and says it lists dep.
    await h.putGroup(g, "ns-r", [], ["n1"], { spec: 2, pods: 1, podDependencies: uses });
    const running = await h.until("pod for ns-r running", async () => {
      const p = await h.pod(dep, "n1", "ns-r");
      return p?.refCount === 1 && p.state === "running" && p;
    });
    await h.stopControllers();
    await h.startControllers();
    await h.passAfter(dep, Date.now() + gcMs + 1_500);
    expect((await h.pod(dep, "n1", "ns-r"))?.refCount).toBe(1);
    expect((await onN1(dep)).map((c) => c.id)).toEqual([running.containers[0]!.id]);
  });
});
