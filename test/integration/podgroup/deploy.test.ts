// PodGroup operations table, deploy / scale / remove rows, against the real etcd and both engines:
// every assertion is on Docker's actual containers first, status second.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ContainerEvent } from "../../../adapters/cluster/index.ts";
import { planContainer } from "../../../controllers/podgroup/container-spec.ts";
import { containerLabels, labelKeys } from "../../../controllers/podgroup/naming.ts";
import { podDependenciesLabel } from "../../../controllers/shared/pod-dependencies.ts";
import { groupSpec, Harness, serve, services } from "./harness.ts";

const h = new Harness();

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await h.cleanup();
});

describe("deploy", () => {
  it("deploys a fresh group: named, labelled, networking off, spread over both nodes, status from the engines", async () => {
    const name = h.name("fresh");
    const dependencies = [{ podName: h.name("db"), policy: "node" as const }];
    await h.put(groupSpec(name, { numInstances: 2, container: { env: ["A=1"], memoryLimit: 64 << 20, cpuLimit: 0.25 }, pod: { dependencies } }));
    const actual = await h.converged(name, 2, 1);

    expect(actual.map((a) => a.c.name)).toEqual([`${name}.v1-i1-d0`, `${name}.v1-i2-d0`]);
    expect(new Set(actual.map((a) => a.c.node))).toEqual(new Set(["n1", "n2"])); // the spread hint
    const d = await h.cluster.inspect(actual[1]!.c);
    expect(d.labels).toMatchObject(containerLabels({ group: name, namespace: "capstan-test", instance: 2, version: 1, drift: 0, index: 0 }));
    expect(d.labels[labelKeys.format]).toBe("2");
    expect(d.labels[podDependenciesLabel]).toBe(`${dependencies[0]!.podName}:node`);
    expect(d.env).toEqual(expect.arrayContaining(["A=1", "CAPSTAN_INSTANCE_NO=2", `CAPSTAN_PODGROUP=${name}`]));
    expect(d.network.networkMode).toBe("none");
    expect(d.restartPolicy.name).toBe("no");
    expect(d.memoryBytes).toBe(64 << 20);
    expect(d.nanoCpus).toBe(250_000_000);

    const s = (await h.status(name))!;
    expect(s.state).toBe("running");
    expect(s.pods.map((p) => [p.instanceNo, p.state, p.version, p.node, p.containers[0]?.id])).toEqual(
      actual.map((a) => [a.instance, "running", 1, a.c.node, a.c.id]),
    );
    expect(s.pods[0]!.containers[0]).toMatchObject({ status: "running", nodeIp: "127.0.0.1", name: `${name}.v1-i1-d0` });
    expect(s.pods[0]!.containers[0]!.startedAt).toMatch(/^\d{4}-/);
    // The list each pod runs with, read back from its container's label.
    expect(s.pods.map((p) => p.dependencies)).toEqual([dependencies, dependencies]);
  });

  it("adopts containers that already exist for an instance instead of creating duplicates", async () => {
    const name = h.name("adopt");
    const spec = groupSpec(name, { numInstances: 2 });
    // Instance 1 running and instance 2 created-but-not-started, both on n2, before the spec exists
    // (what a crash between create and start, or between create and the status write, leaves).
    // Made while no orchestrator runs: a running one would remove a group's containers while the
    // group has no spec (it is being deleted).
    await h.stop();
    const p0 = planContainer(spec, 1, 0, 0);
    const p1 = planContainer(spec, 2, 0, 0);
    const c0 = await h.cluster.create("n2", p0.name, p0.spec);
    await h.cluster.start(c0);
    const c1 = await h.cluster.create("n2", p1.name, p1.spec);

    await h.put(spec);
    await h.start();
    const actual = await h.converged(name, 2, 1);
    expect(actual.map((a) => a.c.id)).toEqual([c0.id, c1.id]);
    expect(actual.every((a) => a.c.node === "n2")).toBe(true);
    const s = (await h.status(name))!;
    expect(s.pods.map((p) => p.containers.map((c) => c.id))).toEqual([[c0.id], [c1.id]]);
    expect(s.pods.map((p) => p.restartCount)).toEqual([0, 0]);
  });
});

describe("pods of several containers", () => {
  it("places a pod's containers on one node (-c1 for the second); a lost one is recreated next to the other", async () => {
    const name = h.name("multi");
    const spec = groupSpec(name, { numInstances: 2 });
    spec.pod.containers.push({ image: services.testImage, command: serve, env: ["SIDE=1"] });
    await h.put(spec);
    const all = await h.until("4 containers running", async () => {
      const a = await h.actual(name);
      return a.length === 4 && a.every((x) => x.c.state === "running") ? a : undefined;
    });
    for (const i of [1, 2]) {
      const pod = all.filter((a) => a.instance === i);
      expect(pod.map((a) => a.c.name).sort()).toEqual([`${name}.v1-i${i}-d0`, `${name}.v1-i${i}-d0-c1`]);
      expect(new Set(pod.map((a) => a.c.node)).size).toBe(1);
    }
    const side = all.find((a) => a.c.name === `${name}.v1-i2-d0-c1`)!;
    await h.cluster.remove(side.c, { force: true });
    const again = await h.until("sidecar back", async () => {
      const a = (await h.actual(name)).find((x) => x.c.name === side.c.name && x.c.state === "running");
      return a && a.c.id !== side.c.id ? a : undefined;
    });
    expect(again.c.node).toBe(side.c.node);
    const s = await h.until("status", async () => {
      const st = await h.status(name);
      return st?.state === "running" && st.pods.every((p) => p.containers.length === 2) ? st : undefined;
    });
    expect(s.pods[1]!.containers.map((c) => c.name)).toEqual([`${name}.v1-i2-d0`, `${name}.v1-i2-d0-c1`]);
  });
});

describe("change instance count", () => {
  it("scales up with new instances, and down removing the highest InstanceNo first", async () => {
    const name = h.name("scale");
    await h.put(groupSpec(name, { numInstances: 2 }));
    const before = await h.converged(name, 2, 1);

    await h.patch(name, (s) => (s.numInstances = 5));
    const up = await h.converged(name, 5, 1);
    expect(up.slice(0, 2).map((a) => a.c.id)).toEqual(before.map((a) => a.c.id)); // untouched

    const destroyed: number[] = [];
    const sub = await h.subscribe(
      (ev) => {
        if (ev.type === "container" && ev.action === "destroy") destroyed.push(Number((ev as ContainerEvent).labels[labelKeys.instance]));
      },
      { filters: { label: [`${labelKeys.podGroup}=${name}`], event: ["destroy"] } },
    );
    try {
      await h.patch(name, (s) => (s.numInstances = 1));
      const down = await h.converged(name, 1, 1);
      expect(down[0]!.c.id).toBe(before[0]!.c.id);
      await h.until("destroy events", async () => destroyed.length >= 4, 5_000);
      expect(destroyed).toEqual([5, 4, 3, 2]);
    } finally {
      await sub.unsubscribe();
    }
    const s = (await h.status(name))!;
    expect(s.pods.map((p) => p.instanceNo)).toEqual([1]);
  });
});

describe("remove", () => {
  it("removes every instance, a leftover created behind our back mid-removal too, then the spec and status keys", async () => {
    const name = h.name("remove");
    // Stops take ~2 s (the trap sleeps), which leaves time to sneak a container in mid-removal.
    const slowStop = ["sh", "-c", "trap 'sleep 2; exit 0' TERM; sleep 3600 & wait"];
    await h.put(groupSpec(name, { numInstances: 2, container: { command: slowStop } }));
    await h.converged(name, 2, 1);

    await h.patch(name, (s) => (s.deleting = true));
    await h.until("state removing", async () => (await h.status(name))?.state === "removing", 10_000, 20);
    // A container of the group that Capstan did not create (instance 7), not even started.
    const sneaky = planContainer(groupSpec(name), 8, 0, 0);
    const leftover = await h.cluster.create("n1", sneaky.name, sneaky.spec);

    await h.until("keys gone", async () => !(await h.store.get(h.keys.podGroup(name))) && !(await h.store.get(h.keys.statusOf(name))), 30_000);
    expect(await h.actual(name)).toEqual([]);
    await expect(h.cluster.inspect(leftover)).rejects.toMatchObject({ name: "NotFoundError" });
  });
});
