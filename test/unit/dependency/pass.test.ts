// The Dependency controller's pass against an in-memory cluster and the real embedded store, on a
// fake clock (pass-harness.ts): the orderings the invariants of controllers/dependency/reconciler.ts
// depend on, and crashes between any two engine calls of a pass followed by a new process that
// must finish the job with one pod per slot.
import { afterEach, describe, expect, it } from "vitest";
import { labelKeys } from "../../../controllers/dependency/naming.ts";
import { readInternal } from "../../../controllers/dependency/stored.ts";
import { FakeCluster, type FakeMethod } from "../../helpers/fake-cluster.ts";
import { gcMs, settle, updateWaitMs, World, type Process } from "./pass-harness.ts";

let world: World;
const processes: Process[] = [];

async function start(nodes?: string[]): Promise<Process> {
  world ??= new World(nodes);
  const process = await world.start();
  processes.push(process);
  return process;
}

afterEach(async () => {
  const done = world;
  world = undefined as unknown as World;
  try {
    for (const process of processes.splice(0)) await process.stop();
  } finally {
    await done?.close();
  }
});

/** The dependency's containers on the fake engines, taken right after one engine call, at the fake clock's time. */
interface Sample {
  at: number;
  containers: { node: string; version: string | undefined; state: string; created: number }[];
}

const everyMethod: FakeMethod[] = ["nodes", "listContainers", "create", "start", "stop", "remove", "rename", "inspect", "hasImage", "pullImage"];

/**
 * Append a Sample to `samples` after each of the next `max` engine calls (the fake cluster's
 * interrupt hooks, run once the call took effect; a call that failed changed nothing). `check()`
 * fails if more calls were made than were sampled.
 */
function sampleEveryCall(samples: Sample[], max = 1_000): { check: () => void } {
  const base = world.cluster.calls.length;
  for (let nth = 1; nth <= max; nth++) {
    world.cluster.interrupt({
      nth,
      methods: everyMethod,
      when: "after",
      hook: () =>
        void samples.push({
          at: world.clock.now(),
          containers: world.containers().map((c) => ({ node: c.node, version: c.labels[labelKeys.version], state: c.state, created: c.created })),
        }),
    });
  }
  return { check: () => expect(world.cluster.calls.length - base, "engine calls beyond the sampled ones").toBeLessThan(max) };
}

/** Every slot referenced holds exactly one container, at `version`, running. */
function onePodPerSlot(nodes: string[], version: number): boolean {
  return world.placement().join() === nodes.map((node) => `${node}: v${version} running`).join();
}

describe("the dependency pass on a fake cluster", () => {
  it("events and D1: deployed on the first reference; reclaimed exactly at the GC time, not a millisecond before", async () => {
    const process = await start();
    await world.putSpec(1);
    world.reference(["n1", "n1"]);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running"]);
    expect((await world.status())?.pods.map((p) => [p.node, p.refCount, p.state])).toEqual([["n1", 2, "running"]]);

    world.reference([]);
    const dropped = world.clock.now();
    const result = await process.pass();
    const pod = (await world.status())!.pods[0]!;
    expect([pod.refCount, pod.verifyTime, pod.reclaimAt]).toEqual([0, new Date(dropped).toISOString(), new Date(dropped + gcMs).toISOString()]);
    expect(result).toEqual({ requeueAfterMs: gcMs });

    await world.clock.advanceAsync(gcMs - 1);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running"]);
    await world.clock.advanceAsync(1);
    await process.pass();
    expect(world.placement()).toEqual([]);
    expect((await world.status())?.pods).toEqual([]);
  });

  it("D1: referenced again before the GC time, the pod is kept", async () => {
    const process = await start();
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    const [first] = world.containers();
    world.reference([]);
    await process.pass();
    await world.clock.advanceAsync(gcMs - 1);
    world.reference(["n1"]);
    await process.pass();
    await world.clock.advanceAsync(gcMs);
    await process.pass();
    expect(world.containers().map((c) => c.id)).toEqual([first!.id]);
  });

  it("D6: the status is written only when it changed, not when only time moved (updatedAt aside)", async () => {
    const process = await start();
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    await process.pass(); // the inspect's data (start time) corrects the cache's guess: written once
    const writes = world.journal.length;
    const written = (await world.status())!.updatedAt;
    // Time moves between the passes (short of a full refresh, which verifies the slot and so
    // changes its verifyTime): a pass builds updatedAt from its own clock, and must not write
    // a status that differs only in that.
    for (let i = 0; i < 3; i++) {
      await world.clock.advanceAsync(1_000);
      await settle();
      await process.pass();
    }
    expect(world.journal.length).toBe(writes);
    expect((await world.status())!.updatedAt).toBe(written);
  });

  it("D3: an upgrade records its intent before the old pod is removed, replaces one pod at a time, and waits -update-wait", async () => {
    const process = await start();
    await world.putSpec(1);
    world.reference(["n1", "n2"]);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running", "n2: v1 running"]);
    // Every engine write from now on goes into the journal, in order with the status writes.
    for (let nth = 1; nth <= 40; nth++) {
      world.cluster.interrupt({ nth, when: "before", hook: (call) => void world.journal.push({ kind: "call", method: call.method, node: call.node, ref: call.ref }) });
    }
    world.journal.length = 0;
    await world.putSpec(2);
    let maxDown = 0;
    await process.until(() => {
      maxDown = Math.max(maxDown, 2 - world.placement().filter((p) => p.endsWith("running")).length);
      return onePodPerSlot(["n1", "n2"], 2);
    });
    expect(maxDown).toBe(1);
    await process.pass(); // the last new pod seen running: the step is done
    // Before each old pod's first stop: a status write naming its slot as "removing".
    const steps = world.journal.flatMap((entry, i) => (entry.kind === "call" && entry.method === "stop" ? [i] : []));
    expect(steps).toHaveLength(2);
    for (const i of steps) {
      const call = world.journal[i] as { node: string };
      const intent = world.journal.slice(0, i).reverse().find((e) => e.kind === "status");
      expect(intent?.kind === "status" && intent.status.internal?.rollout).toMatchObject({ slot: `${call.node}|`, phase: "removing" });
    }
    expect((await world.status())?.internal?.rollout).toBeUndefined();
  });

  it("D3: the new pod is deployed no sooner than -update-wait after the old one was removed", async () => {
    const process = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    await world.putSpec(2);
    await process.pass(); // intent, removal
    expect(world.containers()).toEqual([]);
    const removedAt = world.clock.now();
    await world.clock.advanceAsync(updateWaitMs - 1);
    await process.pass();
    expect(world.containers()).toEqual([]);
    await world.clock.advanceAsync(1);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v2 running"]);
    expect(world.clock.now() - removedAt).toBe(updateWaitMs);
  });

  // Every engine write of an upgrade of two slots, crashed at in turn: the process dies there (its
  // reconcile aborted), a new one starts on the same store and engines and finishes the upgrade.
  it.each(Array.from({ length: 8 }, (_, i) => i + 1))("a crash at engine write %i of an upgrade: a new process finishes it, one pod per slot, one down at a time, the wait kept", async (nth) => {
    const first = await start();
    await world.putSpec(1);
    world.reference(["n1", "n2"]);
    await first.pass();
    expect(world.placement()).toEqual(["n1: v1 running", "n2: v1 running"]);
    const samples: Sample[] = [];
    const sampling = sampleEveryCall(samples); // registered before the crash: it sees the crash's own call
    await world.putSpec(2);
    const dying = new AbortController();
    world.cluster.interrupt({ nth, when: nth % 2 === 0 ? "after" : "before", hook: FakeCluster.crash(dying) });
    let crashed = false;
    for (let i = 0; i < 20 && !crashed; i++) {
      try {
        const result = await first.pass(dying.signal);
        await world.clock.advanceAsync(result?.requeueAfterMs ?? 1);
        await settle();
      } catch {
        crashed = dying.signal.aborted;
      }
    }
    expect(crashed).toBe(true);
    sampling.check();
    world.cluster.clearInterrupts(); // the crash's, and the sampling hooks with it
    const resampling = sampleEveryCall(samples);
    const second = await start();
    await second.until(() => onePodPerSlot(["n1", "n2"], 2));
    // Settled: later passes change nothing, and no step is left.
    await world.clock.advanceAsync(updateWaitMs);
    await second.pass();
    resampling.check();
    expect(world.placement()).toEqual(["n1: v2 running", "n2: v2 running"]);
    expect((await world.status())?.internal?.rollout).toBeUndefined();
    // Across the crash and the restart, after every engine call: at most one pod down (D3, one at
    // a time), and each slot's new pod created no sooner than -update-wait after its old pod was
    // removed (the fake clock does not move within a pass, so that is also the step's `at`).
    expect(Math.max(...samples.map((sample) => ["n1", "n2"].filter((node) => !sample.containers.some((c) => c.node === node && c.state === "running")).length))).toBe(1);
    for (const node of ["n1", "n2"]) {
      const oldGoneAt = samples.find((sample) => !sample.containers.some((c) => c.node === node && c.version === "1"))?.at;
      const created = samples.flatMap((sample) => sample.containers.filter((c) => c.node === node && c.version === "2").map((c) => c.created));
      expect(oldGoneAt, `old pod on ${node} removed`).toBeDefined();
      expect(created.length, `new pod on ${node} seen`).toBeGreaterThan(0);
      expect(Math.min(...created) - oldGoneAt!, `update wait on ${node}`).toBeGreaterThanOrEqual(updateWaitMs);
    }
  });

  it("operations, POST: a stored dependency deploys nothing until an instance needs it", async () => {
    const process = await start();
    await world.putSpec(1);
    await process.pass();
    expect(world.placement()).toEqual([]);
    expect((await world.status())?.state).toBe("idle");
  });

  it("operations, refresh, container missing: redeployed on its node", async () => {
    const process = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    const [first] = world.containers();
    world.cluster.destroy("n1", first!.id);
    await settle();
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running"]);
    expect(world.containers()[0]!.id).not.toBe(first!.id);
  });

  it("operations, refresh, container exited: restarted after the back-off (1 s), restartCount 1", async () => {
    const process = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    const [pod] = world.containers();
    world.cluster.exit("n1", pod!.id, 3);
    await settle();
    const result = await process.pass();
    expect(world.placement()).toEqual(["n1: v1 exited"]);
    expect(result).toEqual({ requeueAfterMs: 1_000 });
    await world.clock.advanceAsync(1_000);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running"]);
    expect(world.containers()[0]!.id).toBe(pod!.id);
    expect((await world.status())?.pods[0]?.restartCount).toBe(1);
  });

  /** The pod on `node` exits (code 3); one pass sees it. Returns that pass's result. */
  async function exitOnce(process: Process, node: string) {
    const [pod] = world.containers().filter((c) => c.node === node);
    world.cluster.exit(node, pod!.id, 3);
    await settle();
    return process.pass();
  }

  it("D3: an upgrade step starts the new version with a clean restart record: restartCount 0, no back-off or error of the old pod's", async () => {
    const process = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    // The v1 pod crashes three times: restarted after 1 s, then 2 s; the third exit waits 4 s.
    for (const backoff of [1_000, 2_000]) {
      expect(await exitOnce(process, "n1")).toEqual({ requeueAfterMs: backoff });
      await world.clock.advanceAsync(backoff);
      await process.pass();
      expect(world.placement()).toEqual(["n1: v1 running"]);
    }
    expect(await exitOnce(process, "n1")).toEqual({ requeueAfterMs: 4_000 });
    const before = await world.status();
    expect([before?.pods[0]?.restartCount, before?.pods[0]?.state, readInternal(before).slots["n1|"]?.failures]).toEqual([2, "failed", 3]);

    await world.putSpec(2);
    await process.pass(); // the step begins at n1: intent, removal, the update wait
    expect(world.containers()).toEqual([]);
    const waiting = await world.status();
    expect(waiting?.internal?.rollout).toMatchObject({ slot: "n1|", phase: "removed" });
    expect(waiting?.pods.map((p) => [p.restartCount, p.state, p.lastError])).toEqual([[0, "upgrading", ""]]);
    expect(readInternal(waiting).slots["n1|"]).toBeUndefined();

    await world.clock.advanceAsync(updateWaitMs);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v2 running"]);
    await process.pass(); // the new pod seen running: the step is done
    const upgraded = await world.status();
    expect(upgraded?.internal?.rollout).toBeUndefined();
    expect(upgraded?.pods.map((p) => [p.restartCount, p.state, p.lastError])).toEqual([[0, "running", ""]]);
    // Its first exit is restart 1, after the first back-off step (1 s), not the old pod's fourth.
    expect(await exitOnce(process, "n1")).toEqual({ requeueAfterMs: 1_000 });
    await world.clock.advanceAsync(1_000);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v2 running"]);
    expect((await world.status())?.pods[0]?.restartCount).toBe(1);
  });

  it("a successful deploy clears the failed deploys' count: the pod's first exit backs off from 1 s again", async () => {
    const process = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    world.images = { kind: "failed", message: "image pull failed: img on n1: denied" };
    // Two failed deploys: the next one after 1 s, then after 2 s.
    for (const backoff of [1_000, 2_000]) {
      expect(await process.pass()).toEqual({ requeueAfterMs: backoff });
      expect(world.placement()).toEqual([]);
      await world.clock.advanceAsync(backoff);
    }
    expect(readInternal(await world.status()).slots["n1|"]?.failures).toBe(2);
    world.images = { kind: "ready" };
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running"]);
    const deployed = await world.status();
    expect(deployed?.pods.map((p) => [p.restartCount, p.state, p.lastError])).toEqual([[0, "running", ""]]);
    expect(readInternal(deployed).slots["n1|"]).toBeUndefined(); // restarts 0, failures 0: nothing to keep
    expect(await exitOnce(process, "n1")).toEqual({ requeueAfterMs: 1_000 });
  });

  it("operations, DELETE ?force=true: every pod killed at once (no stop), then both keys deleted", async () => {
    const process = await start();
    await world.putSpec(1);
    world.reference(["n1", "n2"]);
    await process.pass();
    const before = world.cluster.calls.length;
    await world.putSpec(1, { deleting: { force: true } });
    await process.until(async () => (await world.sqlite.get(world.layout.dependency(world.name))) === null);
    const calls = world.cluster.calls.slice(before).map((call) => call.method);
    expect(calls).not.toContain("stop");
    expect(calls.filter((method) => method === "remove")).toHaveLength(2);
    expect(await world.status()).toBeUndefined();
  });

  it("D6: a status written by someone else meanwhile is not overwritten: the pass fails, the next one decides again", async () => {
    const process = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    world.cluster.interrupt({ nth: 1, methods: ["start"], when: "after", hook: () => void world.sqlite.put(world.layout.statusOf(world.name), JSON.stringify({ state: "idle", lastError: "foreign", updatedAt: "", pods: [] })) });
    await expect(process.pass()).rejects.toThrow(/changed since it was read/);
    expect((await world.status())?.lastError).toBe("foreign");
    await settle(); // the retry (the work queue's back-off) reads the status as it is now
    await process.pass();
    expect((await world.status())?.pods.map((p) => [p.node, p.state])).toEqual([["n1", "running"]]);
  });

  it("D7: while its images are pulled the pod is pending with the pull's progress, and nothing is created", async () => {
    const process = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    world.images = { kind: "pulling", message: "pulling img on n1: 3 of 5 layers" };
    const result = await process.pass();
    expect(world.placement()).toEqual([]);
    expect((await world.status())?.pods.map((p) => [p.state, p.lastError])).toEqual([["pending", "pulling img on n1: 3 of 5 layers"]]);
    expect(result?.requeueAfterMs).toBeLessThanOrEqual(5_000);
    world.images = { kind: "ready" };
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running"]);
  });

  it("D2: a crash between create and start; the new process adopts the created container (no second one)", async () => {
    const first = await start(["n1"]);
    await world.putSpec(1);
    world.reference(["n1"]);
    const dying = new AbortController();
    world.cluster.interrupt({ nth: 1, methods: ["create"], when: "after", hook: FakeCluster.crash(dying) });
    await expect(first.pass(dying.signal)).rejects.toThrow(/crash/);
    expect(world.placement()).toEqual(["n1: v1 created"]);
    const created = world.containers()[0]!.id;
    const second = await start();
    await second.until(() => onePodPerSlot(["n1"], 1));
    expect(world.containers().map((c) => c.id)).toEqual([created]);
  });

  it("D2: a container of our name that is not ours is reported, never touched", async () => {
    const process = await start(["n1"]);
    world.cluster.add("n1", "logagent.v1-n1", { labels: { other: "x" } });
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    expect((await world.status())?.pods[0]?.lastError).toMatch(/container name logagent.v1-n1 on n1 is taken by another container/);
    expect(world.cluster.list("n1").map((c) => c.labels)).toEqual([{ other: "x" }]);
  });

  it("D4: nothing is deployed on an unreachable node; the pod is deployed once it is back", async () => {
    const process = await start();
    await world.putSpec(1);
    world.cluster.setReachable("n2", false);
    await settle();
    world.reference(["n1", "n2"]);
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running"]);
    expect((await world.status())?.pods.map((p) => [p.node, p.state])).toEqual([["n1", "running"], ["n2", "unknown"]]);
    world.cluster.setReachable("n2", true);
    await settle();
    await process.pass();
    expect(world.placement()).toEqual(["n1: v1 running", "n2: v1 running"]);
  });

  it("D5: RemoveSpec finishes while a node heard from, with none of its containers, is unreachable", async () => {
    const process = await start();
    await world.putSpec(1);
    world.reference(["n1"]);
    await process.pass();
    world.cluster.setReachable("n2", false);
    await settle();
    await world.putSpec(1, { deleting: { force: false } });
    await process.until(async () => (await world.sqlite.get(world.layout.dependency(world.name))) === null);
    expect(world.placement()).toEqual([]);
    expect(await world.status()).toBeUndefined();
  });

  it("D5: RemoveSpec waits for an unreachable node that holds a container, and finishes once it is back", async () => {
    const process = await start();
    await world.putSpec(1);
    world.reference(["n1", "n2"]);
    await process.pass();
    world.cluster.setReachable("n2", false);
    await settle();
    await world.putSpec(1, { deleting: { force: true } });
    await process.pass();
    expect(world.placement()).toEqual(["n2: v1 running"]);
    expect((await world.status())?.lastError).toBe("waiting for node n2 to confirm the removal");
    world.cluster.setReachable("n2", true);
    await settle();
    await process.until(async () => (await world.sqlite.get(world.layout.dependency(world.name))) === null);
    expect(world.placement()).toEqual([]);
  });
});
