// Rolling restarts and previous containers (docs/podgroup-controller.md, "Rolling restart" and
// "The previous container"), against the real etcd and engines: a new restartedAt in the stored
// spec (what POST /api/podgroups/restart writes) replaces every instance one at a time, never two
// down at once; each replaced container is kept, stopped, as its instance's previous container (one
// per instance, the newer replacing the older); they are not instances (status, scale down,
// deletion); and a replacement that fails its runtime check halts the restart.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ContainerSummary } from "../../../adapters/cluster/index.ts";
import { labelKeys } from "../../../controllers/podgroup/naming.ts";
import { isPreviousContainer } from "../../../controllers/shared/previous.ts";
import { groupSpec, Harness, type Actual } from "./harness.ts";

const h = new Harness({ updateWaitMs: 300, refreshIntervalMs: 2_000 });

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await h.cleanup();
});

/** The group's kept previous containers on the engines, by name. */
async function previousOf(name: string): Promise<ContainerSummary[]> {
  const all = await h.cluster.listContainers(undefined, { all: true, filters: { label: [`${labelKeys.podGroup}=${name}`] } });
  return all.filter((c) => isPreviousContainer(c)).sort((a, b) => a.name.localeCompare(b.name));
}

/** Samples the group's instance containers until stopped. */
function sample(name: string): { stop(): Promise<Actual[][]> } {
  const samples: Actual[][] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
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

/** Asks for a rolling restart, as the API does: a new restartedAt, pod.version unchanged. */
async function restart(name: string): Promise<string> {
  const at = new Date().toISOString();
  await h.patch(name, (s) => {
    s.restartedAt = at;
  });
  return at;
}

/** Every instance running at `version` in a container other than `before`'s, and the status settled. */
function restarted(name: string, before: Actual[], version = 1) {
  return h.until(`${name}: every instance replaced`, async () => {
    const a = await h.actual(name);
    if (a.length !== before.length || !a.every((x, i) => x.instance === i + 1 && x.version === version && x.c.state === "running" && x.c.id !== before[i]!.c.id)) return undefined;
    const s = await h.status(name);
    if (!s || s.state !== "running" || (s.internal as { rollout?: unknown } | undefined)?.rollout !== undefined) return undefined;
    return { actual: a, status: s };
  }, 60_000);
}

describe("rolling restart", () => {
  it("replaces every instance one at a time, keeps each replaced container as its instance's previous one, the newest only", async () => {
    const name = h.name("restart");
    await h.put(groupSpec(name, { numInstances: 3, container: { memoryLimit: 16 << 20 } }));
    const before = await h.converged(name, 3, 1);
    const sampler = sample(name);
    const at = await restart(name);
    const after = await restarted(name, before);
    const samples = await sampler.stop();

    // Never two instances without a running container; replaced instances always a prefix 1..k.
    for (const s of samples) {
      const up = new Set(s.filter((a) => a.c.state === "running").map((a) => a.instance));
      expect([1, 2, 3].filter((i) => !up.has(i)).length).toBeLessThanOrEqual(1);
      const fresh = s.filter((a) => !before.some((b) => b.c.id === a.c.id)).map((a) => a.instance).sort();
      expect(fresh).toEqual(fresh.map((_, i) => i + 1));
    }
    expect(samples.some((s) => s.length < 3 || s.some((a) => a.c.state !== "running")), "an instance was seen down").toBe(true);

    // The spec history is the user's: same version; the containers carry the request's time.
    expect((await h.get(name)).pod.version).toBe(1);
    for (const a of after.actual) expect(a.c.labels[labelKeys.restartedAt]).toBe(at);

    // One stopped previous container per instance, the replaced one, not counted as an instance.
    const prev = await previousOf(name);
    expect(prev.map((c) => [c.name, c.id, c.state])).toEqual(before.map((b, i) => [`${name}.previous-i${i + 1}`, b.c.id, "exited"]));
    expect(after.status.pods.map((p) => [p.instanceNo, p.containers.length, p.previous?.map((c) => c.id)])).toEqual(before.map((b, i) => [i + 1, 1, [b.c.id]]));

    // A second restart: the previous container of each instance is now the first restart's one.
    await restart(name);
    const again = await restarted(name, after.actual);
    expect((await previousOf(name)).map((c) => c.id)).toEqual(after.actual.map((a) => a.c.id));
    expect(again.status.pods).toHaveLength(3);

    // Scaling down removes the instance's previous container with it...
    await h.patch(name, (s) => {
      s.numInstances = 2;
    });
    await h.until(`${name}: instance 3 and its previous container gone`, async () => {
      const p = await previousOf(name);
      return (await h.actual(name)).length === 2 && p.length === 2 && p.every((c) => !c.name.endsWith("-i3"));
    });
    // ...and deleting the group removes every one of them.
    await h.patch(name, (s) => {
      s.deleting = true;
    });
    await h.until(`${name}: removed`, async () => {
      const left = await h.cluster.listContainers(undefined, { all: true, filters: { label: [`${labelKeys.podGroup}=${name}`] } });
      return left.length === 0 && (await h.store.get(h.keys.podGroup(name))) === null;
    }, 30_000);
  });

  it("a replacement that fails its runtime check halts the restart at that instance; the others are left running", async () => {
    const name = h.name("restart-halt");
    // The first run of each instance marks its volume; a fresh container that finds the mark exits 3.
    const command = ["sh", "-c", "if [ -f /data/ran ]; then echo refusing; exit 3; fi; touch /data/ran; trap 'exit 0' TERM; sleep 3600 & wait"];
    await h.put(groupSpec(name, { numInstances: 2, restartPolicy: "onfail", container: { command, volumes: ["/data"] } }));
    const before = await h.converged(name, 2, 1);
    await restart(name);
    const s = await h.until(`${name}: halted`, async () => {
      const st = await h.status(name);
      return st?.state === "failed" && st.lastError.includes("halted at instance 1") ? st : undefined;
    }, 30_000);
    expect(s.lastError).toMatch(/^restart requested at .* halted at instance 1: .*code 3/);
    await h.waitedAndLooked(name, Date.now(), 1_500); // 1.5 s (past the update wait) and a pass since: nothing more is replaced
    const mid = await h.actual(name);
    expect(mid.filter((a) => a.instance === 2).map((a) => [a.c.id, a.c.state])).toEqual([[before[1]!.c.id, "running"]]);
    expect((await previousOf(name)).map((c) => c.id)).toEqual([before[0]!.c.id]);
  });
});
