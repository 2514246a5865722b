// PodGroup operations table, periodic refresh rows (missing container, older data format, stale
// version, not running -> restart policy with back-off) and tampering behind Capstan's back
// (containers removed, stopped, a colliding name; runtime data in the store made wrong).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ContainerEvent } from "../../../adapters/cluster/index.ts";
import type { PodGroupStatus, RestartPolicy } from "../../../api/resources/podgroup.ts";
import { planContainer } from "../../../controllers/podgroup/container-spec.ts";
import { labelKeys } from "../../../controllers/podgroup/naming.ts";
import { groupSpec, Harness } from "./harness.ts";

const h = new Harness({ updateWaitMs: 300, refreshIntervalMs: 2_000 });

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await h.cleanup();
});

describe("refresh: missing, older format, stale version", () => {
  it("redeploys a container removed with rm -f within seconds", async () => {
    const name = h.name("rmf");
    await h.put(groupSpec(name, { numInstances: 2 }));
    const before = await h.converged(name, 2, 1);
    const t0 = Date.now();
    await h.cluster.remove(before[1]!.c, { force: true });
    const after = await h.until("replacement running", async () => {
      const a = await h.actual(name);
      return a.length === 2 && a.every((x) => x.c.state === "running") && a[1]!.c.id !== before[1]!.c.id ? a : undefined;
    }, 10_000, 20);
    expect(Date.now() - t0).toBeLessThan(5_000); // typically well under a second; generous for a loaded machine
    expect(after[0]!.c.id).toBe(before[0]!.c.id);
    await h.converged(name, 2, 1);
  });

  it("adopts an older-format container in place (renamed, not restarted) and records it", async () => {
    const name = h.name("legacy");
    const spec = groupSpec(name, { numInstances: 1 });
    // Older format: labels without io.capstan.format (nor io.capstan.numbering: instance 0 of the
    // 0-based numbering, instance 1 now), named after the pod rather than the group.
    // Made while no orchestrator runs, as on an upgrade: a running one would remove the group's
    // containers before the spec is stored (a group without a spec is being deleted).
    await h.stop();
    const plan = planContainer(spec, 1, 0, 0);
    const labels: Record<string, string> = { ...plan.spec.labels, [labelKeys.instance]: "0" };
    delete labels[labelKeys.format];
    delete labels[labelKeys.numbering];
    const old = await h.cluster.create("n2", `${name}-web.v1-i0-d0`, { ...plan.spec, labels });
    await h.cluster.start(old);
    const startedAt = (await h.cluster.inspect(old)).status.startedAt;

    await h.put(spec);
    await h.start();
    const s = await h.until("adopted", async () => {
      const st = await h.status(name);
      return st?.state === "running" && st.pods[0]?.containers[0]?.name === `${name}.v1-i1-d0` ? st : undefined;
    });
    const actual = await h.actual(name);
    expect(actual).toHaveLength(1);
    expect(actual[0]!.c.id).toBe(old.id);
    expect(actual[0]!.c.name).toBe(`${name}.v1-i1-d0`);
    expect(actual[0]!.instance).toBe(1);
    expect(s.pods[0]!.instanceNo).toBe(1);
    expect(actual[0]!.format).toBe("1");
    expect((await h.cluster.inspect(old)).status.startedAt).toBe(startedAt); // not restarted
    expect(s.pods[0]!.containers[0]).toMatchObject({ id: old.id, format: "1", status: "running" });
  });

  it("adopts the previous release's 0-based containers (i0..i2) as instances 1..3: same containers, not restarted, renamed, records kept", async () => {
    const name = h.name("renumber");
    const spec = groupSpec(name, { numInstances: 3 });
    // As the previous release made them, through the real adapter: names i0..i2, io.capstan.instance
    // 0..2, no io.capstan.numbering, CAPSTAN_INSTANCE_NO 0..2; i0 and i1 on one engine, so that
    // i1 must become i2 before i0 can become i1 there.
    // Made while no orchestrator runs, as on an upgrade (see above).
    await h.stop();
    const made: { id: string; node: string; startedAt: number | undefined }[] = [];
    for (const k of [0, 1, 2]) {
      const plan = planContainer(spec, k + 1, 0, 0);
      const labels: Record<string, string> = { ...plan.spec.labels, [labelKeys.instance]: String(k) };
      delete labels[labelKeys.numbering];
      const env = (plan.spec.env ?? []).map((e) => (e.startsWith("CAPSTAN_INSTANCE_NO=") ? `CAPSTAN_INSTANCE_NO=${k}` : e));
      const node = k === 2 ? "n2" : "n1";
      const c = await h.cluster.create(node, `${name}.v1-i${k}-d0`, { ...plan.spec, labels, env });
      await h.cluster.start(c);
      made.push({ id: c.id, node, startedAt: (await h.cluster.inspect(c)).status.startedAt });
    }
    // The previous release's status record (no instanceBase): instance 0 had restarted twice.
    const oldStatus = {
      state: "running",
      lastError: "",
      updatedAt: new Date().toISOString(),
      observedVersion: 1,
      pods: [0, 1, 2].map((k) => ({ instanceNo: k, state: "running", lastError: "", restartCount: k === 0 ? 2 : 0, driftCount: 0, version: 1, node: made[k]!.node, containers: [] })),
      internal: { instances: { "0": { restarts: 2, failures: 0 } } },
    };
    await h.store.txn(
      [],
      [
        { type: "put", key: h.keys.podGroup(name), value: JSON.stringify(spec) },
        { type: "put", key: h.keys.statusOf(name), value: JSON.stringify(oldStatus) },
      ],
    );
    await h.start();

    const s = await h.until("adopted as 1..3", async () => {
      const st = await h.status(name);
      const names = st?.pods.map((p) => p.containers[0]?.name);
      return st?.state === "running" && st.instanceBase === 1 && names?.join() === [1, 2, 3].map((k) => `${name}.v1-i${k}-d0`).join() ? st : undefined;
    });
    expect(s.pods.map((p) => [p.instanceNo, p.containers[0]!.id])).toEqual(made.map((m, k) => [k + 1, m.id]));
    expect(s.pods.map((p) => p.restartCount)).toEqual([2, 0, 0]);
    const actual = await h.actual(name);
    expect(actual.map((a) => [a.instance, a.c.id, a.c.name])).toEqual(made.map((m, k) => [k + 1, m.id, `${name}.v1-i${k + 1}-d0`]));
    for (const m of made) expect((await h.cluster.inspect({ node: m.node, id: m.id })).status.startedAt).toBe(m.startedAt); // not restarted
    // Nothing was created besides them.
    expect(await h.cluster.listContainers(undefined, { all: true, filters: { label: [`${labelKeys.podGroup}=${name}`] } })).toHaveLength(3);
  });

  it("upgrades containers whose version is stale, older-format ones included", async () => {
    const name = h.name("stale");
    const v1 = groupSpec(name, { numInstances: 2 });
    await h.stop(); // as above: the containers and then the spec, as an orchestrator starting finds them
    const p1 = planContainer(v1, 1, 0, 0);
    const p2 = planContainer(v1, 2, 0, 0);
    const legacyLabels = { ...p2.spec.labels };
    delete legacyLabels[labelKeys.format];
    const c0 = await h.cluster.create("n1", p1.name, p1.spec);
    const c1 = await h.cluster.create("n2", p2.name, { ...p2.spec, labels: legacyLabels });
    await Promise.all([h.cluster.start(c0), h.cluster.start(c1)]);
    // The store already says version 2 (a PATCH while the orchestrator was down).
    await h.put({ ...v1, pod: { ...v1.pod, version: 2 } });
    await h.start();
    const after = await h.converged(name, 2, 2, 30_000);
    expect(after.every((a) => a.format === "2")).toBe(true);
    // The replaced containers are kept, stopped, as the instances' previous containers.
    expect([await h.cluster.inspect(c0), await h.cluster.inspect(c1)].map((d) => [d.name, d.status.running])).toEqual([
      [`${name}.previous-i1`, false],
      [`${name}.previous-i2`, false],
    ]);
  });
});

describe("refresh: restart policy with back-off", () => {
  const cases: [RestartPolicy, number, boolean][] = [
    ["never", 0, false],
    ["never", 3, false],
    ["onfail", 0, false],
    ["onfail", 3, true],
    ["always", 0, true],
    ["always", 3, true],
  ];

  it("never / onfail / always on exit 0 and exit 3; restarts back off (1 s, 2 s, 4 s ...) and survive an orchestrator restart", async () => {
    const groups = cases.map(([policy, code, restarts]) => ({ name: h.name(`${policy}${code}`), policy, code, restarts }));
    const starts = new Map<string, number[]>();
    const sub = await h.subscribe(
      (ev) => {
        if (ev.type !== "container") return;
        const g = (ev as ContainerEvent).labels[labelKeys.podGroup] ?? "";
        starts.set(g, [...(starts.get(g) ?? []), ev.time]);
      },
      { filters: { label: [labelKeys.podGroup], event: ["start"] } },
    );
    for (const g of groups) {
      await h.put(groupSpec(g.name, { restartPolicy: g.policy, container: { command: ["sh", "-c", `exit ${g.code}`] } }));
    }
    const restarting = groups.filter((g) => g.restarts);
    // Two restarts take ~1 s + ~2 s of back-off; a tight loop would make dozens meanwhile.
    await h.until("two restarts each", async () => restarting.every((g) => (starts.get(g.name)?.length ?? 0) >= 3), 20_000);
    for (const g of restarting) {
      const t = starts.get(g.name)!;
      // Each restart waits its back-off after the exit: 1 s, then 2 s (the runs themselves are ~0).
      expect(t[1]! - t[0]!, g.name).toBeGreaterThanOrEqual(950);
      expect(t[2]! - t[1]!, g.name).toBeGreaterThanOrEqual(1_950);
      const st = await h.until(`${g.name} status`, async () => {
        const x = await h.status(g.name);
        // Between two runs: the pod shows why it is down and when it comes back.
        return x && x.pods[0]!.restartCount >= 2 && /restart \d+ at/.test(x.pods[0]!.lastError) ? x : undefined;
      });
      expect(st.pods[0]!.restartCount, g.name).toBeLessThanOrEqual(4);
      expect(st.pods[0]!.state).toBe(g.code === 0 ? "exited" : "failed");
    }
    for (const g of groups.filter((x) => !x.restarts)) {
      const pod = (await h.status(g.name))!.pods[0]!;
      expect([g.name, starts.get(g.name)?.length, pod.restartCount]).toEqual([g.name, 1, 0]);
      expect(pod.state).toBe(g.code === 0 ? "exited" : "failed");
      expect(pod.lastError).toMatch(new RegExp(`code ${g.code}.*not restarted`));
    }

    // A new orchestrator process continues the back-off where the old one left it.
    const crashing = groups.find((g) => g.policy === "always" && g.code === 3)!;
    const failuresOf = (st: PodGroupStatus) => (st.internal as { instances: Record<string, { failures: number }> }).instances["1"]!.failures;
    const before = (await h.status(crashing.name))!;
    expect(failuresOf(before)).toBeGreaterThanOrEqual(3);
    await h.stop();
    await h.start();
    await new Promise((r) => setTimeout(r, 3_500));
    // Reset, it would restart at +1 s and +3 s; continued, the next delay is 4 s or 8 s.
    const s = (await h.status(crashing.name))!;
    expect(s.pods[0]!.restartCount).toBeGreaterThanOrEqual(before.pods[0]!.restartCount);
    expect(s.pods[0]!.restartCount).toBeLessThanOrEqual(before.pods[0]!.restartCount + 1);
    expect(failuresOf(s)).toBeGreaterThanOrEqual(failuresOf(before));
    await sub.unsubscribe();
  });
});

describe("restart policy changed on an exited instance", () => {
  it("never -> always restarts it; always -> never leaves the next exit alone", async () => {
    const name = h.name("policy-patch");
    await h.put(groupSpec(name, { numInstances: 1, restartPolicy: "never", container: { command: ["sh", "-c", "sleep 1; exit 0"] } }));
    await h.until("exited under never", async () => {
      const st = await h.status(name);
      return st?.pods[0]?.state === "exited" && /restart policy never: not restarted/.test(st.pods[0].lastError) ? st : undefined;
    }, 20_000);
    await h.patch(name, (s) => {
      s.restartPolicy = "always";
    });
    const restarted = await h.until("restarted under always", async () => {
      const st = await h.status(name);
      return st && st.pods[0]!.restartCount >= 1 ? st : undefined;
    }, 20_000);
    expect(restarted.pods[0]!.lastError).not.toMatch(/restart policy never/);
    await h.patch(name, (s) => {
      s.restartPolicy = "never";
    });
    const stopped = await h.until("exited again under never", async () => {
      const st = await h.status(name);
      return st?.pods[0]?.state === "exited" && /restart policy never: not restarted/.test(st.pods[0].lastError) ? st : undefined;
    }, 20_000);
    expect(stopped.pods[0]!.restartCount).toBeGreaterThanOrEqual(1);
  });
});

describe("tampering", () => {
  it("a container stopped behind our back is restarted (policy always)", async () => {
    const name = h.name("stopped");
    await h.put(groupSpec(name, { numInstances: 1, restartPolicy: "always" }));
    const [a] = await h.converged(name, 1, 1);
    await h.cluster.stop(a!.c, { timeoutSeconds: 1 });
    await h.until("restarted", async () => {
      const d = await h.cluster.inspect(a!.c);
      return d.status.running;
    }, 10_000);
    const s = await h.until("status counts it", async () => {
      const st = await h.status(name);
      return st?.pods[0]?.restartCount === 1 && st.state === "running" ? st : undefined;
    });
    expect(s.pods[0]!.containers[0]!.id).toBe(a!.c.id);
  });

  it("wrong runtime data in the store is corrected from the engines", async () => {
    const name = h.name("garbage");
    await h.put(groupSpec(name, { numInstances: 2 }));
    const actual = await h.converged(name, 2, 1);
    const key = h.keys.statusOf(name);
    const fake = { state: "failed", lastError: "lies", updatedAt: "x", observedVersion: 9, pods: [{ instanceNo: 7, state: "missing", containers: [] }] };
    await h.store.put(key, JSON.stringify(fake));
    let s = await h.until("corrected", async () => {
      const st = await h.status(name);
      return st?.state === "running" && st.pods.length === 2 ? st : undefined;
    }, 10_000);
    expect(s.pods.map((p) => p.containers[0]!.id)).toEqual(actual.map((a) => a.c.id));
    expect(s.observedVersion).toBe(1);

    await h.store.put(key, "not json {");
    s = await h.until("corrected again", async () => {
      const st = await h.status(name).catch(() => undefined);
      return st?.state === "running" ? st : undefined;
    }, 10_000);
    expect(s.pods.map((p) => p.containers[0]!.id)).toEqual(actual.map((a) => a.c.id));
    expect((await h.actual(name)).map((a) => a.c.id)).toEqual(actual.map((a) => a.c.id)); // nothing redeployed
  });

  it("a colliding container with our name but not our labels is reported and left alone", async () => {
    const name = h.name("collide");
    const spec = groupSpec(name, { numInstances: 1, pod: { filters: ["node==n1"] } });
    const foreign = await h.cluster.create("n1", `${name}.v1-i1-d0`, { image: spec.pod.containers[0]!.image, cmd: ["sleep", "600"], networkMode: "none" });
    await h.put(spec);
    const s = await h.until("reported", async () => {
      const st = await h.status(name);
      return st?.pods[0]?.state === "failed" ? st : undefined;
    });
    expect(s.state).toBe("failed");
    expect(s.pods[0]!.lastError).toMatch(/taken by a container Capstan did not create/);
    await h.waitedAndLooked(name, Date.now(), 2_000); // 2 s (past the first back-off) and a pass since
    expect((await h.cluster.inspect(foreign)).labels).toEqual({}); // still there, untouched
    expect(await h.actual(name)).toEqual([]);

    // Once the operator clears it away, the instance deploys (after its back-off).
    await h.cluster.remove(foreign, { force: true });
    await h.converged(name, 1, 1, 15_000);
  });
});

describe("refresh tasks", () => {
  it("a RefreshTask (force_update) is carried out at once and deleted; one naming an unknown group is deleted too", async () => {
    const name = h.name("task");
    await h.put(groupSpec(name, { numInstances: 1 }));
    await h.converged(name, 1, 1);
    const mine = h.keys.root + "tasks/t-" + name;
    const stray = h.keys.root + "tasks/t-stray-" + name;
    const task = (group: string) => JSON.stringify({ id: "t", kind: "refresh", podGroup: group, createdAt: new Date().toISOString() });
    await h.store.put(mine, task(name));
    await h.store.put(stray, task(`${name}-nonexistent`));
    await h.until("tasks deleted", async () => !(await h.store.get(mine)) && !(await h.store.get(stray)), 3_000, 20);
    expect((await h.status(name))!.state).toBe("running");
  });
});
