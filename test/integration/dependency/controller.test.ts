// The Dependency controller on the real etcd and both real engines, one test per row of the
// spec's Dependency operations table and events table. The test plays the PodGroup controller
// (writes group specs and statuses; references are derived from them), so every reference count
// is exact; the dependency pods are real containers, asserted on the nodes where they run.
// GC is 3 s, the refresh 2 s, the update wait 500 ms.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { labelKeys } from "../../../controllers/dependency/naming.ts";
import { Harness, serve, services } from "./harness.ts";

const run = promisify(execFile);
const h = new Harness({ gcMs: 3_000 });
const gcMs = 3_000;

beforeAll(() => h.start());
afterAll(() => h.cleanup());

const node = "node" as const;
const namespace = "namespace" as const;

async function docker(engine: string, ...args: string[]): Promise<string> {
  const { stdout } = await run("docker", ["-H", services.engines[engine]!, ...args], { timeout: 20_000 });
  return stdout.trim();
}

describe("AddSpec and AddPod", () => {
  it("deploys nothing for a stored dependency until an instance needs it, then one pod on its node (node policy)", async () => {
    const dep = h.name("d");
    const stored = Date.now();
    await h.createDependency(dep);
    // At least as long as a fixed 1 s sleep, and at least two whole passes with the spec and no
    // reference (the first on the spec's arrival, the next its periodic refresh): a deploy made
    // late in a pass, or after it, or only on a later pass, has had its chance.
    await h.until("1 s and two passes of the unreferenced dependency", async () => Date.now() - stored >= 1_000 && h.dep!.passes(dep).passes >= 2, 15_000, 20);
    expect(await h.actual(dep)).toEqual([]);
    expect(await h.status(dep)).toMatchObject({ state: "idle", pods: [] });

    const g = h.name("g");
    await h.putGroup(g, "ns-a", [{ podName: dep, policy: node }], ["n1", "n1", "n2"]);
    await h.until("one node-level pod on n1 and on n2", async () => {
      const p = await h.placement(dep);
      return p.join() === "n1/,n2/" && p;
    });
    const s = await h.until("status with both pods running", async () => {
      const st = await h.status(dep);
      return st?.state === "running" && st.pods.length === 2 && st;
    });
    expect(s.pods.map((p) => [p.node, p.namespace, p.refCount, p.state])).toEqual([
      ["n1", "", 2, "running"],
      ["n2", "", 1, "running"],
    ]);
    expect(s.pods[0]!.containers[0]!.name).toBe(`${dep}.v1-n1`);
    await h.deleteGroup(g);
  });

  it("deploys one pod per namespace per node (namespace policy)", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns-a", [{ podName: dep, policy: namespace }], ["n1"]);
    await h.putGroup(h.name("g"), "ns-b", [{ podName: dep, policy: namespace }], ["n1", "n2"]);
    await h.putGroup(h.name("g"), "ns-b", [{ podName: dep, policy: namespace }], ["n1"]);
    await h.until("pods for ns-a and ns-b on n1, ns-b on n2", async () => {
      const p = await h.placement(dep);
      return p.join() === "n1/ns-a,n1/ns-b,n2/ns-b" && p;
    });
    await h.until("refCounts", async () => (await h.pod(dep, "n1", "ns-b"))?.refCount === 2);
    expect((await h.pod(dep, "n1", "ns-a"))?.refCount).toBe(1);
    expect((await h.pod(dep, "n2", "ns-b"))?.refCount).toBe(1);
  });

  it("scopes each dependency entry on its own: a node-level entry does not leak into a namespace-level one after it", async () => {
    const shared = h.name("node-dep");
    const perNs = h.name("ns-dep");
    await h.createDependency(shared);
    await h.createDependency(perNs);
    // The original system's bug: after a node-level entry, every later entry was node-level too.
    await h.putGroup(h.name("g"), "ns-leak", [
      { podName: shared, policy: node },
      { podName: perNs, policy: namespace },
    ], ["n2"]);
    await h.until("node-level pod and namespace-level pod on n2", async () => {
      return (await h.placement(shared)).join() === "n2/" && (await h.placement(perNs)).join() === "n2/ns-leak";
    });
    const [c] = await h.actual(perNs);
    expect(c!.labels[labelKeys.namespace]).toBe("ns-leak");
    expect(c!.name).toBe(`${perNs}.v1-n2-Nns-leak`);
  });

  it("AddPod with a deployment in place: refCount up, verifyTime updated, the same container", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n1"]);
    const first = await h.until("pod running", async () => {
      const p = await h.pod(dep, "n1", "");
      return p?.state === "running" && p;
    });
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n1"]);
    const second = await h.until("refCount 2", async () => {
      const p = await h.pod(dep, "n1", "");
      return p?.refCount === 2 && p;
    });
    expect(Date.parse(second.verifyTime)).toBeGreaterThan(Date.parse(first.verifyTime));
    expect(second.deployStartedAt).toBe(first.deployStartedAt);
    expect(second.containers[0]!.id).toBe(first.containers[0]!.id);
    expect(await h.actual(dep)).toHaveLength(1);
  });
});

describe("RemovePod, VerifyPod and garbage collection", () => {
  it("RemovePod: refCount down and verifyTime updated, the pod stays; reclaimed GC time after the last reference, not before", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g1 = h.name("g");
    const g2 = h.name("g");
    await h.putGroup(g1, "ns", [{ podName: dep, policy: node }], ["n2"]);
    await h.putGroup(g2, "ns", [{ podName: dep, policy: node }], ["n2"]);
    const before = await h.until("refCount 2", async () => {
      const p = await h.pod(dep, "n2", "");
      return p?.refCount === 2 && p.state === "running" && p;
    });
    await h.deleteGroup(g1);
    const one = await h.until("refCount 1", async () => {
      const p = await h.pod(dep, "n2", "");
      return p?.refCount === 1 && p;
    });
    expect(Date.parse(one.verifyTime)).toBeGreaterThan(Date.parse(before.verifyTime));
    expect(one.containers[0]!.id).toBe(before.containers[0]!.id);

    await h.deleteGroup(g2);
    const zero = await h.until("refCount 0", async () => {
      const p = await h.pod(dep, "n2", "");
      return p?.refCount === 0 && p;
    });
    const reclaimAt = Date.parse(zero.verifyTime) + gcMs;
    expect(zero.reclaimAt).toBe(new Date(reclaimAt).toISOString());
    // Not removed at once (RemovePod never removes), and still there shortly before its time:
    // the same container at every poll until it is gone, the last of them at most 700 ms before it.
    const seen = await h.watchUntilGone(dep, reclaimAt - Date.now() + 4_300);
    expect(seen.lists).toEqual([zero.containers[0]!.id]);
    expect(seen.lastPresentAt).toBeGreaterThanOrEqual(reclaimAt - 700);
    expect(Date.now()).toBeGreaterThanOrEqual(reclaimAt);
    await h.until("its status entry dropped", async () => (await h.status(dep))?.pods.length === 0);
  });

  it("a pod referenced again before its GC time is kept (the reference count is honoured)", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    await h.putGroup(g, "ns", [{ podName: dep, policy: node }], ["n1"]);
    const p = await h.until("running", async () => (await h.pod(dep, "n1", ""))?.state === "running" && (await h.pod(dep, "n1", "")));
    await h.deleteGroup(g);
    await h.until("refCount 0", async () => (await h.pod(dep, "n1", ""))?.refCount === 0);
    await h.putGroup(g, "ns", [{ podName: dep, policy: node }], ["n1"]);
    await h.until("refCount 1", async () => (await h.pod(dep, "n1", ""))?.refCount === 1);
    // A pass well after the GC time that applied to the unreferenced pod: it is kept.
    await h.passAfter(dep, Date.now() + gcMs + 1_500);
    expect((await h.actual(dep)).map((c) => c.id)).toEqual([p.containers[0]!.id]);
  });

  it("VerifyPod: a refresh while referenced updates verifyTime, the count unchanged", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n1"]);
    const first = await h.until("running", async () => {
      const p = await h.pod(dep, "n1", "");
      return p?.state === "running" && p;
    });
    const later = await h.until("verifyTime moved by a refresh", async () => {
      const p = await h.pod(dep, "n1", "");
      return p && Date.parse(p.verifyTime) > Date.parse(first.verifyTime) && p;
    }, 10_000);
    expect(later.refCount).toBe(1);
    expect(later.containers[0]!.id).toBe(first.containers[0]!.id);
  });
});

describe("Periodic refresh", () => {
  it("runtime matches: nothing happens; the pod keeps its container over several refreshes (lookup label = labelling label)", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n1"]);
    const [c] = await h.until("running", async () => {
      const a = await h.actual(dep);
      return a.length === 1 && a[0]!.state === "running" && a;
    });
    // Three full refreshes (every 2 s): each inspects the pod and looks it up by its label.
    await h.refreshes(dep, 3);
    const after = await h.actual(dep);
    expect(after.map((x) => [x.id, x.state])).toEqual([[c!.id, "running"]]);
    expect((await h.pod(dep, "n1", ""))?.restartCount).toBe(0);
  });

  it("container missing: redeployed on the same node", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n2"]);
    const [c] = await h.until("running", async () => {
      const a = await h.actual(dep);
      return a.length === 1 && a[0]!.state === "running" && a;
    });
    await docker("n2", "rm", "-f", c!.id);
    const [again] = await h.until("redeployed", async () => {
      const a = await h.actual(dep);
      return a.length === 1 && a[0]!.id !== c!.id && a[0]!.state === "running" && a;
    });
    expect(again!.node).toBe("n2");
    expect(again!.name).toBe(`${dep}.v1-n2`);
  });

  it("container missing from the record: re-registered from the live list, not redeployed", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n1"]);
    const p = await h.until("running", async () => (await h.pod(dep, "n1", ""))?.state === "running" && (await h.pod(dep, "n1", "")));
    // The stored runtime data loses the pod (a foreign write): the controller finds it again.
    const kv = (await h.store.get(h.layout.statusOf(dep)))!;
    const status = JSON.parse(kv.value) as { pods: unknown[] };
    await h.store.put(kv.key, JSON.stringify({ ...status, pods: [] }));
    const back = await h.until("pod back in the status", async () => (await h.pod(dep, "n1", ""))?.state === "running" && (await h.pod(dep, "n1", "")));
    expect(back.containers.map((c) => c.id)).toEqual(p.containers.map((c) => c.id));
    expect(back.refCount).toBe(1);
    expect((await h.actual(dep)).map((c) => c.id)).toEqual([p.containers[0]!.id]);
  });

  it("older data format: the pod is upgraded to the current format", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    // An older orchestrator left a container for (n2, node-level): our label, no io.capstan.format.
    await h.stopControllers();
    const old = await docker(
      "n2", "run", "-d", "--name", `${dep}-n2-old`, "--network", "none",
      "--label", `${labelKeys.dependency}=${dep}`, "--label", `${labelKeys.namespace}=`, "--label", `${labelKeys.version}=1`,
      services.testImage, ...serve,
    );
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n2"]);
    await h.startControllers();
    const [c] = await h.until("replaced by a current-format pod", async () => {
      const a = await h.actual(dep);
      return a.length === 1 && !old.startsWith(a[0]!.id) && a[0]!.labels[labelKeys.format] === "2" && a[0]!.state === "running" && a;
    });
    expect(c!.name).toBe(`${dep}.v1-n2`);
    expect((await h.pod(dep, "n2", ""))?.refCount).toBe(1);
  });

  it("container dead: restarted (same container, restartCount 1)", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n1"]);
    const [c] = await h.until("running", async () => {
      const a = await h.actual(dep);
      return a.length === 1 && a[0]!.state === "running" && a;
    });
    await docker("n1", "kill", c!.id);
    await h.until("restarted", async () => {
      const p = await h.pod(dep, "n1", "");
      return p?.state === "running" && p.restartCount === 1 && p.containers[0]!.id === c!.id;
    });
  });
});

describe("UpdateSpec and RemoveSpec", () => {
  it("UpdateSpec: every running pod upgraded, one at a time", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns", [{ podName: dep, policy: node }], ["n1", "n2"]);
    await h.until("two pods", async () => (await h.placement(dep)).join() === "n1/,n2/");
    await h.updateDependency(dep, ["V=2"]);
    let maxDown = 0;
    await h.until("both at version 2", async () => {
      const a = await h.actual(dep);
      const running = a.filter((c) => c.state === "running");
      maxDown = Math.max(maxDown, 2 - running.length);
      return running.length === 2 && running.every((c) => c.labels[labelKeys.version] === "2") && a.length === 2;
    }, 30_000, 50);
    expect(maxDown).toBe(1); // one pod replaced at a time
    await h.until("status running at v2", async () => {
      const s = await h.status(dep);
      return s?.state === "running" && s.pods.every((p) => p.version === 2 && p.state === "running");
    });
    const env = await docker("n1", "inspect", "-f", "{{json .Config.Env}}", `${dep}.v2-n1`);
    expect(env).toContain("V=2");
  });

  it("RemoveSpec with force while referenced: every pod killed, spec and status deleted", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    await h.putGroup(g, "ns", [{ podName: dep, policy: node }], ["n1", "n2"]);
    await h.until("two pods", async () => (await h.placement(dep)).join() === "n1/,n2/");
    expect((await h.call("DELETE", `/api/depends?name=${dep}`)).status).toBe(409);
    expect((await h.call("DELETE", `/api/depends?name=${dep}&force=true`)).status).toBe(202);
    await h.until("no containers", async () => (await h.actual(dep)).length === 0);
    await h.until("keys gone", async () => (await h.store.get(h.layout.dependency(dep))) === null && (await h.store.get(h.layout.statusOf(dep))) === null);
    expect((await h.call("GET", `/api/depends?name=${dep}`)).status).toBe(404);
    await h.deleteGroup(g);
  });

  it("RemoveSpec of an unused dependency: its unreferenced pods removed, keys deleted", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    await h.putGroup(g, "ns", [{ podName: dep, policy: node }], ["n1"]);
    await h.until("pod", async () => (await h.placement(dep)).join() === "n1/");
    await h.deleteGroup(g);
    await h.until("refCount 0", async () => (await h.pod(dep, "n1", ""))?.refCount === 0);
    expect((await h.call("DELETE", `/api/depends?name=${dep}`)).status).toBe(202);
    await h.until("gone", async () => (await h.actual(dep)).length === 0 && (await h.store.get(h.layout.dependency(dep))) === null);
  });
});
