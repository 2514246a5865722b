// Whole passes (PodGroupReconciler.reconcile) against the in-memory FakeCluster, with the real
// SQLite store (":memory:"), informers and container cache, wired as controllers/podgroup/index.ts
// wires them. What is checked is the ordering of actions: the rollout intent is in the store before
// the old pod is touched (R2), and a crash (an abort of the pass) between any two engine calls of a
// rollout step or of a drift move leaves a state that a new reconciler (a new process: new caches,
// nothing in memory) finishes correctly: never two pods for an instance (R1), never two instances
// down at once (R3), never a shorter update wait, never back onto the drift's `from` (R6).
import { afterEach, describe, expect, it } from "vitest";
import { ContainerCache } from "../../../adapters/cluster/container-cache.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { PodGroupStatus } from "../../../api/resources/podgroup.ts";
import { containerLabels, labelKeys, identify } from "../../../controllers/podgroup/naming.ts";
import { NodeView } from "../../../controllers/podgroup/nodes.ts";
import { PassesInFlight } from "../../../controllers/podgroup/passes.ts";
import { PodGroupReconciler } from "../../../controllers/podgroup/reconciler.ts";
import { decodeSpec, decodeStatus, decodeTask, layout, readInternal, type StoredPodGroup } from "../../../controllers/podgroup/stored.ts";
import { restartBackoff } from "../../../controllers/shared/backoff.ts";
import { ImagePuller } from "../../../controllers/shared/image-pull.ts";
import { isPreviousContainer, previousContainerName } from "../../../controllers/shared/previous.ts";
import { secretsRecheckMs } from "../../../controllers/podgroup/plan-instances.ts";
import { waitingForSecrets, type SecretMarkerEntry } from "../../../controllers/podgroup/secret-marker.ts";
import type { Result } from "../../../runtime/result.ts";
import { realClock } from "../../../runtime/clock.ts";
import { Informer } from "../../../runtime/informer.ts";
import { silentLogger } from "../../../runtime/log.ts";
import { FakeCluster, type FakeMethod } from "../../helpers/fake-cluster.ts";
import { stored } from "./fixtures.ts";

const keys = layout("/t/");
const updateWaitMs = 10_000;
const stepMs = 2_000;

/** The wall clock the reconciler keeps in the store (and the fake engines' clock). */
let wall = 1_000_000;

interface Process {
  reconciler: PodGroupReconciler;
  /** One pass, as the controller would run it, with its Result; rejects with the crash when the pass is aborted. */
  pass(name: string, controller?: AbortController): Promise<Result | void>;
  close(): Promise<void>;
}

const open: Process[] = [];
afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
});

/** A new orchestrator process on `store` and `cluster`: informers and cache from scratch, nothing in memory. */
async function startProcess(
  store: SqliteStore,
  cluster: FakeCluster,
  options: { realImagePuller?: boolean; secretMarker?: (containerId: string) => SecretMarkerEntry | undefined } = {},
): Promise<Process> {
  const specs = new Informer({ name: "specs", source: store, prefix: keys.podGroups, decode: decodeSpec });
  const statuses = new Informer({ name: "statuses", source: store, prefix: keys.status, decode: decodeStatus });
  const tasks = new Informer({ name: "tasks", source: store, prefix: keys.tasks, decode: decodeTask });
  const cache = new ContainerCache({ cluster, name: "pg", labelFilter: [labelKeys.podGroup], indexLabels: [labelKeys.podGroup] });
  const stop = new AbortController();
  for (const informer of [specs, statuses, tasks]) informer.start();
  const cacheDone = cache.start(stop.signal);
  await Promise.all([specs.waitForSync(), statuses.waitForSync(), tasks.waitForSync(), cache.waitForSync()]);
  const reconciler = new PodGroupReconciler({
    store,
    cluster,
    cache,
    nodes: new NodeView(cluster, cache, realClock),
    specs,
    statuses,
    tasks,
    dependencyReservations: { list: async () => [] },
    passes: new PassesInFlight(),
    secretMarker: options.secretMarker ?? (() => undefined),
    images: options.realImagePuller ? new ImagePuller({ cluster, now: () => wall }) : { ensureImages: async () => ({ kind: "ready" }) },
    layout: keys,
    updateWaitMs,
    refreshIntervalMs: 30_000,
    backoff: restartBackoff(),
    now: () => wall,
    random: () => 0.5,
    deployConcurrency: 16,
    removeConcurrency: 8,
    maxDeploysPerPass: 64,
  });
  const process: Process = {
    reconciler,
    async pass(name, controller = new AbortController()) {
      const result = await reconciler.reconcile(name, { signal: controller.signal, log: silentLogger, attempt: 1 });
      await settle();
      return result;
    },
    async close() {
      stop.abort();
      await cacheDone;
      await Promise.all([specs.stop(), statuses.stop(), tasks.stop()]);
    },
  };
  open.push(process);
  return process;
}

/** Let the fake engines' events (delivered with setImmediate) and the informers' watches catch up. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

function spec(numInstances: number, version: number, over: Partial<StoredPodGroup> = {}): StoredPodGroup {
  return stored({ numInstances, ...over }, { version, containers: [{ image: "img" }] });
}

async function putSpec(store: SqliteStore, value: StoredPodGroup): Promise<void> {
  await store.put(keys.podGroup(value.name), JSON.stringify(value));
  await settle();
}

async function readStatus(store: SqliteStore, name = "web"): Promise<{ status: PodGroupStatus; modRevision: number } | undefined> {
  const kv = await store.get(keys.statusOf(name));
  return kv ? { status: JSON.parse(kv.value) as PodGroupStatus, modRevision: kv.modRevision } : undefined;
}

/** Pods (node|version|drift) per instance, previous containers left out. */
function podsByInstance(cluster: FakeCluster): Map<number, Set<string>> {
  const pods = new Map<number, Set<string>>();
  for (const c of cluster.list()) {
    if (isPreviousContainer(c)) continue;
    const id = identify(c, "web");
    if (!id) continue;
    const set = pods.get(id.instance) ?? new Set<string>();
    set.add(`${c.node}|${id.version}|${id.drift}`);
    pods.set(id.instance, set);
  }
  return pods;
}

/** R1 and R3 hold on the engines now. */
function checkInvariants(cluster: FakeCluster, numInstances: number): void {
  const pods = podsByInstance(cluster);
  for (const [instance, set] of pods) expect(set.size, `instance ${instance}: ${[...set].join(", ")}`).toBeLessThanOrEqual(1);
  let down = 0;
  for (let i = 1; i <= numInstances; i++) {
    const running = cluster.list().some((container) => !isPreviousContainer(container) && identify(container, "web")?.instance === i && container.state === "running");
    if (!running) down++;
  }
  expect(down, "instances down at once").toBeLessThanOrEqual(1);
}

/** Deploy `numInstances` at version 1 and let them run. */
async function deployed(numInstances: number, nodes = ["n1", "n2"]): Promise<{ store: SqliteStore; cluster: FakeCluster; process: Process }> {
  const store = new SqliteStore({ path: ":memory:" });
  const cluster = new FakeCluster({ nodes, now: () => wall });
  const process = await startProcess(store, cluster);
  await putSpec(store, spec(numInstances, 1));
  await process.pass("web");
  wall += stepMs;
  await process.pass("web");
  expect(cluster.list().filter((container) => container.state === "running")).toHaveLength(numInstances);
  return { store, cluster, process };
}

/** Passes with the wall clock moving on until `done`, checking R1 and R3 after each. */
/**
 * Passes of `process`, each checked against the invariants, until the engine write `nth` (of
 * create, start, stop, remove, rename) aborts the process after it ran, or `done`.
 */
async function runUntilCrash(process: Process, cluster: FakeCluster, nth: number, done: () => boolean, maxPasses: number): Promise<void> {
  const crash = new AbortController();
  let crashed = false;
  const writes: FakeMethod[] = ["create", "start", "stop", "remove", "rename"];
  cluster.interrupt({ methods: writes, nth, when: "after", hook: (call) => ((crashed = true), FakeCluster.crash(crash)(call)) });
  for (let i = 0; i < maxPasses && !crashed && !done(); i++) {
    await process.pass("web", crash).catch((error: unknown) => {
      if (!crash.signal.aborted) throw error;
    });
    checkInvariants(cluster, 2);
    wall += stepMs;
  }
  expect(crashed).toBe(true);
}

async function converge(process: Process, cluster: FakeCluster, numInstances: number, done: () => boolean, maxPasses = 60): Promise<void> {
  for (let i = 0; i < maxPasses && !done(); i++) {
    await process.pass("web");
    checkInvariants(cluster, numInstances);
    wall += stepMs;
  }
  expect(done()).toBe(true);
}

const allAtVersion = (cluster: FakeCluster, numInstances: number, version: number) => () => {
  const pods = podsByInstance(cluster);
  return (
    pods.size === numInstances &&
    [...pods.values()].every((set) => set.size === 1 && [...set][0]!.split("|")[1] === String(version)) &&
    cluster.list().filter((container) => !isPreviousContainer(container)).every((container) => container.state === "running")
  );
};

describe("a pass against the fake cluster", () => {
  it("deploys a fresh group; a pass that finds nothing to do writes nothing (R8)", async () => {
    const { store, cluster, process } = await deployed(3);
    expect(podsByInstance(cluster).size).toBe(3);
    const before = await readStatus(store);
    expect(before?.status.state).toBe("running");
    await process.pass("web");
    expect((await readStatus(store))?.modRevision).toBe(before?.modRevision);
  });

  it("R2: the rollout intent is in the store before the old pod is stopped or removed", async () => {
    const { store, cluster, process } = await deployed(2);
    await putSpec(store, spec(2, 2));
    const crash = new AbortController();
    const removals: FakeMethod[] = ["stop", "remove", "rename"];
    cluster.interrupt({ methods: removals, nth: 1, when: "before", hook: FakeCluster.crash(crash) });
    await expect(process.pass("web", crash)).rejects.toThrow(/crash at call/);
    const internal = readInternal((await readStatus(store))?.status);
    expect(internal.rollout).toMatchObject({ instance: 1, toVersion: 2, phase: "removing" });
    expect(cluster.list().filter((container) => identify(container, "web")?.version === 1)).toHaveLength(2); // nothing touched yet
  });

  it("the update wait is a requeue, never shorter than updateWaitMs after the removal", async () => {
    const { store, cluster, process } = await deployed(2);
    await putSpec(store, spec(2, 2));
    const done = allAtVersion(cluster, 2, 2);
    let removalPasses = 0;
    let waitPasses = 0;
    for (let i = 0; i < 60 && !done(); i++) {
      const result = await process.pass("web");
      checkInvariants(cluster, 2);
      const step = readInternal((await readStatus(store))?.status).rollout;
      if (step?.phase === "removed" && !podsByInstance(cluster).has(step.instance)) {
        // In the update wait: the pass asks to run again exactly when the wait is over.
        const remaining = step.at + updateWaitMs - wall;
        expect(remaining, `pass ${i}`).toBeGreaterThan(0);
        expect(result?.requeueAfterMs, `pass ${i}`).toBeDefined();
        expect(Math.abs(result!.requeueAfterMs! - remaining), `pass ${i}: requeue ${result!.requeueAfterMs} ms, wait left ${remaining} ms`).toBeLessThanOrEqual(1);
        if (step.at === wall) removalPasses++;
        else waitPasses++;
      }
      wall += stepMs;
    }
    expect(done()).toBe(true);
    expect(removalPasses, "passes that removed an old pod").toBe(2);
    expect(waitPasses, "passes within an update wait").toBeGreaterThan(0);
    checkUpdateWaits(cluster, [1, 2]);
  });
});

/**
 * Exactly one previous container (R12), stopped, per replaced instance, and none for any other;
 * and for every replaced instance its new pod was created at least updateWaitMs after its old pod
 * was stopped.
 */
function checkUpdateWaits(cluster: FakeCluster, replaced: number[]): void {
  const previous = cluster.list().filter((container) => isPreviousContainer(container));
  expect(previous.map((container) => container.name).sort(), "previous containers").toEqual(replaced.map((instance) => previousContainerName("web", instance, 0)).sort());
  for (const kept of previous) {
    const instance = Number(kept.labels[labelKeys.instance]);
    expect(kept.state, `instance ${instance}: previous container`).toBe("exited");
    const replacement = cluster.list().find((container) => !isPreviousContainer(container) && identify(container, "web")?.instance === instance);
    expect(replacement, `instance ${instance}`).toBeDefined();
    expect(replacement!.created - kept.finishedAt!, `instance ${instance}`).toBeGreaterThanOrEqual(updateWaitMs);
  }
}

describe("a crash between any two engine calls, then a new reconciler", () => {
  // A rollout of two single-container instances makes 8 engine writes: per instance stop and
  // rename (kept as the previous container), then create and start of the new pod.
  it.each(Array.from({ length: 8 }, (_, i) => i + 1))("rollout step: crash after write call %i", async (nth) => {
    const { store, cluster, process } = await deployed(2);
    await putSpec(store, spec(2, 2));
    // The first process runs until it crashes (or the rollout is done: nth beyond its calls).
    await runUntilCrash(process, cluster, nth, allAtVersion(cluster, 2, 2), 40);
    await process.close();
    open.splice(open.indexOf(process), 1);
    const next = await startProcess(store, cluster);
    await converge(next, cluster, 2, allAtVersion(cluster, 2, 2));
    await next.pass("web");
    expect(readInternal((await readStatus(store))?.status).rollout).toBeUndefined();
    expect((await readStatus(store))?.status.state).toBe("running");
    // One previous container per replaced instance, exactly (R12), and the update waits kept.
    checkUpdateWaits(cluster, [1, 2]);
  });

  // A move makes 4 engine writes: stop and remove on `from`, create and start elsewhere.
  it.each(Array.from({ length: 4 }, (_, i) => i + 1))("drift move: crash after write call %i", async (nth) => {
    const { store, cluster, process } = await deployed(2, ["n1", "n2", "n3"]);
    const onN1 = cluster.list("n1").map((container) => identify(container, "web")!.instance);
    expect(onN1).toHaveLength(1);
    const moving = onN1[0]!;
    const since = cluster.calls.length;
    await store.put(`${keys.tasks}d1`, JSON.stringify({ kind: "drift", from: "n1", force: false, reason: "request", createdAt: "" }));
    await settle();
    const movedOff = () => cluster.list("n1").length === 0 && podsByInstance(cluster).size === 2 && cluster.list().every((container) => container.state === "running");
    await runUntilCrash(process, cluster, nth, movedOff, 10);
    await process.close();
    open.splice(open.indexOf(process), 1);
    const next = await startProcess(store, cluster);
    await converge(next, cluster, 2, movedOff);
    await next.pass("web"); // the pass after the move clears its record
    // R6: never back onto `from`; the moved instance carries a higher drift count.
    expect(cluster.calls.slice(since).filter((call) => call.method === "create" && call.node === "n1")).toEqual([]);
    expect([...podsByInstance(cluster).get(moving)!][0]).toMatch(/\|1\|1$/);
    const internal = readInternal((await readStatus(store))?.status);
    expect(internal.instances[String(moving)]?.move).toBeUndefined();
  });
});

describe("restart back-off across processes (R9)", () => {
  it("a new process continues the back-off where the old one left it: no restart before the stored time", async () => {
    const { store, cluster, process } = await deployed(1);
    const running = () => cluster.list().find((container) => !isPreviousContainer(container))!;
    const stored = async () => readInternal((await readStatus(store))?.status).instances["1"]!;
    // Four crashes, each restarted once its back-off is over: 1 s, 2 s, 4 s.
    for (let crash = 0; crash < 4; crash++) {
      cluster.exit(running().node, running().id, 3);
      await settle();
      await process.pass("web");
      const record = await stored();
      expect(record.failures).toBe(crash + 1);
      if (crash === 3) break;
      wall = record.nextAttemptAt!;
      await process.pass("web");
      expect(running().state).toBe("running");
    }
    const before = await stored();
    expect(before.nextAttemptAt! - wall).toBe(8_000); // the fourth failure: 8 s
    await process.close();
    open.splice(open.indexOf(process), 1);

    const next = await startProcess(store, cluster);
    wall = before.nextAttemptAt! - 1; // a reset back-off would have restarted 1 s after the exit
    await next.pass("web");
    expect(running().state).toBe("exited");
    expect((await stored()).failures).toBe(before.failures); // the exit is not counted twice
    wall = before.nextAttemptAt!;
    await next.pass("web");
    expect(running().state).toBe("running");
    expect((await readStatus(store))?.status.pods[0]?.restartCount).toBe(4);
  });
});

describe("operations table rows, as whole passes", () => {
  async function fresh(nodes = ["n1", "n2"]): Promise<{ store: SqliteStore; cluster: FakeCluster; process: Process }> {
    const store = new SqliteStore({ path: ":memory:" });
    const cluster = new FakeCluster({ nodes, now: () => wall });
    return { store, cluster, process: await startProcess(store, cluster) };
  }
  const ours = (instance: number) => containerLabels({ group: "web", instance, version: 1, drift: 0, index: 0, namespace: "ns" });

  it("Deploy, container exists (R1): adopted, not duplicated", async () => {
    const { store, cluster, process } = await fresh(["n1"]);
    // Made by an earlier attempt whose create answer was lost: silent, so the cache does not know
    // it and the pass creates; the create meets the name conflict and adopts the container.
    const existing = cluster.add("n1", "web.v1-i1-d0", { labels: ours(1), state: "running", startedAt: wall }, true);
    await settle();
    await putSpec(store, spec(1, 1));
    const since = cluster.calls.length;
    await process.pass("web");
    expect(cluster.calls.slice(since).filter((call) => call.method === "create").map((call) => [call.node, call.ref])).toEqual([["n1", "web.v1-i1-d0"]]);
    expect(cluster.list().map((container) => [container.id, container.state])).toEqual([[existing.id, "running"]]);
    const status = (await readStatus(store))?.status;
    expect(status?.pods[0]).toMatchObject({ state: "running", lastError: "" });
    expect(status?.pods[0]?.containers[0]?.id).toBe(existing.id);
  });

  it("Deploy, the name is taken by a container without our labels (R7): reported and left alone, retried with back-off", async () => {
    const { store, cluster, process } = await fresh(["n1"]);
    const foreign = cluster.add("n1", "web.v1-i1-d0", { labels: {}, state: "running" });
    await putSpec(store, spec(1, 1));
    await process.pass("web");
    const status = (await readStatus(store))!.status;
    expect(status.pods[0]).toMatchObject({ state: "failed" });
    expect(status.pods[0]!.lastError).toMatch(/^container name web\.v1-i1-d0 on n1 is taken by a container Capstan did not create \(id fake\d+\); rename or remove it/);
    expect(cluster.list().map((container) => container.id)).toEqual([foreign.id]);
    const creates = () => cluster.calls.filter((call) => call.method === "create").length;
    const tried = creates();
    await process.pass("web"); // within the back-off: no new attempt (R9)
    expect(creates()).toBe(tried);
    cluster.destroy("n1", foreign.id);
    await settle();
    wall += 2_000;
    await process.pass("web");
    expect(cluster.list().map((container) => [container.name, container.labels[labelKeys.podGroup]])).toEqual([["web.v1-i1-d0", "web"]]);
  });

  it("Scale down / remove instance: highest first, one per pass, a leftover only the engines know of is swept", async () => {
    const { store, cluster, process } = await deployed(3);
    await putSpec(store, spec(1, 1));
    // A leftover of instance 3 the cache never saw (made behind our back on n1, its event lost).
    const leftover = cluster.add("n1", "web.v1-i3-d7", { labels: { ...ours(3), [labelKeys.drift]: "7" } }, true);
    await process.pass("web");
    expect([...podsByInstance(cluster).keys()].sort()).toEqual([1, 2]);
    expect(cluster.find("n1", leftover.id)).toBeUndefined();
    await process.pass("web");
    expect([...podsByInstance(cluster).keys()]).toEqual([1]);
  });

  it("Delete group: every instance removed, then a sweep of every node, then the keys", async () => {
    const { store, cluster, process } = await deployed(2);
    await putSpec(store, { ...spec(2, 1), deleting: true });
    for (let i = 0; i < 5 && (await store.get(keys.podGroup("web"))); i++) await process.pass("web");
    expect(cluster.list()).toEqual([]);
    expect(await store.get(keys.podGroup("web"))).toBeNull();
    expect(await store.get(keys.statusOf("web"))).toBeNull();
  });
});

describe("images (R11)", () => {
  it("a drift move pulls on the new node before it removes the pod on `from`", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    const cluster = new FakeCluster({ nodes: ["n1", "n2"], now: () => wall, images: ["img"] });
    cluster.removeImage("n2", "img");
    const process = await startProcess(store, cluster, { realImagePuller: true });
    await putSpec(store, spec(1, 1, { pod: { ...spec(1, 1).pod, filters: ["node==n1"] } }));
    await process.pass("web");
    expect(cluster.list("n1")).toHaveLength(1);
    await putSpec(store, spec(1, 1)); // unpinned, so that it may move
    await store.put(`${keys.tasks}d1`, JSON.stringify({ kind: "drift", from: "n1", to: "n2", force: false, reason: "request", createdAt: "" }));
    await settle();
    await process.pass("web");
    // The image is being pulled: the pod on `from` still runs, and nothing is created on n2 yet.
    expect(cluster.list("n1").map((container) => container.state)).toEqual(["running"]);
    expect(cluster.list("n2")).toEqual([]);
    expect((await readStatus(store))?.status.pods[0]?.lastError).toMatch(/^pulling img on n2/);
    await process.pass("web");
    expect(cluster.list("n1")).toEqual([]);
    expect(cluster.list("n2").map((container) => container.state)).toEqual(["running"]);
    const pulled = cluster.calls.find((call) => call.method === "pullImage")!.seq;
    const removed = cluster.calls.find((call) => call.method === "stop" || call.method === "remove")!.seq;
    expect(pulled).toBeLessThan(removed);
  });
});

describe("secret files (R10)", () => {
  it("a created pod whose spec lists secret files starts only once Secret-sync's marker covers them", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    const cluster = new FakeCluster({ nodes: ["n1"], now: () => wall });
    const markers = new Map<string, SecretMarkerEntry>();
    const process = await startProcess(store, cluster, { secretMarker: (id) => markers.get(id) });
    await putSpec(store, stored({ numInstances: 1 }, { version: 1, containers: [{ image: "img", secretFiles: ["a.conf", "b.conf"] }] }));
    const starts = () => cluster.calls.filter((call) => call.method === "start").length;

    // No marker: created, not started; the pod is pending and says why; looked at again soon.
    const first = await process.pass("web");
    expect(cluster.list().map((container) => [container.name, container.state])).toEqual([["web.v1-i1-d0", "created"]]);
    expect(starts()).toBe(0);
    const id = cluster.list()[0]!.id;
    let status = (await readStatus(store))!.status;
    expect(status.pods[0]).toMatchObject({ state: "pending", lastError: waitingForSecrets });
    expect(first?.requeueAfterMs).toBe(secretsRecheckMs);

    // A marker that misses a listed path: still waiting, in a later pass too.
    markers.set(id, { containerId: id, podGroup: "web", paths: ["a.conf"], error: undefined });
    wall += secretsRecheckMs;
    await process.pass("web");
    expect(cluster.list().map((container) => [container.id, container.state])).toEqual([[id, "created"]]);
    expect(starts()).toBe(0);
    expect((await readStatus(store))!.status.pods[0]).toMatchObject({ state: "pending", lastError: waitingForSecrets });

    // The marker covers every listed path: the next pass starts the container it created.
    markers.set(id, { containerId: id, podGroup: "web", paths: ["a.conf", "b.conf"], error: undefined });
    wall += 1_000;
    await process.pass("web");
    expect(cluster.list().map((container) => [container.id, container.state])).toEqual([[id, "running"]]);
    expect(starts()).toBe(1);
    status = (await readStatus(store))!.status;
    expect(status.pods[0]).toMatchObject({ state: "running", lastError: "" });
    expect(status.pods[0]!.containers[0]!.id).toBe(id);
  });

  it("a pod without secret files is started in the pass that creates it, with no marker", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    const cluster = new FakeCluster({ nodes: ["n1"], now: () => wall });
    const process = await startProcess(store, cluster, { secretMarker: () => undefined });
    await putSpec(store, spec(1, 1));
    await process.pass("web");
    expect(cluster.list().map((container) => container.state)).toEqual(["running"]);
  });
});

describe("restart policy changed on an exited instance (R9), every transition, as whole passes", () => {
  const policies = ["never", "onfail", "always"] as const;
  const transitions = policies.flatMap((from) => policies.filter((to) => to !== from).map((to) => [from, to] as const));
  const cases = transitions.flatMap(([from, to]) => [0, 3].map((code) => [from, to, code] as const));

  it.each(cases)("%s -> %s after exit %i: the exit is judged again under the policy in force, counted once", async (from, to, code) => {
    const store = new SqliteStore({ path: ":memory:" });
    const cluster = new FakeCluster({ nodes: ["n1"], now: () => wall });
    const process = await startProcess(store, cluster);
    const pod = () => cluster.list().find((container) => !isPreviousContainer(container))!;
    const shown = async () => (await readStatus(store))!.status.pods[0]!;
    const record = async () => Object.values(readInternal((await readStatus(store))?.status).instances)[0]!;
    await putSpec(store, spec(1, 1, { restartPolicy: from }));
    await process.pass("web");
    wall += stepMs;
    await process.pass("web");
    expect(pod().state).toBe("running");

    cluster.exit(pod().node, pod().id, code);
    await settle();
    await process.pass("web"); // the exit is counted under `from`; no restart before its back-off
    const restartsUnderFrom = from === "always" || (from === "onfail" && code !== 0);
    expect(pod().state).toBe("exited");
    expect((await shown()).lastError).toContain(restartsUnderFrom ? "restart 1 at" : `restart policy ${from}: not restarted`);
    expect((await shown()).state).toBe(code === 0 ? "exited" : "failed");

    // The PATCH: only the policy changes (no new pod version, no rollout).
    await putSpec(store, spec(1, 1, { restartPolicy: to }));
    await process.pass("web");
    wall += 2 * stepMs; // past the first back-off (1 s from the exit)
    await process.pass("web");
    const restartsUnderTo = to === "always" || (to === "onfail" && code !== 0);
    expect(pod().state).toBe(restartsUnderTo ? "running" : "exited");
    const after = await shown();
    expect(after.restartCount).toBe(restartsUnderTo ? 1 : 0);
    if (!restartsUnderTo) expect(after.lastError).toBe(`exited with code ${code}; restart policy ${to}: not restarted`);
    else expect(after.lastError).not.toContain("not restarted");
    expect((await record()).failures).toBe(1); // judged again, not counted twice
    expect(cluster.calls.filter((call) => call.method === "create")).toHaveLength(1); // restarted in place, never redeployed
  });
});

describe("containers of the 0-based numbering (docs/podgroup-controller.md, \"Instance numbers\"), as whole passes", () => {
  /** `count` running containers made by a 0-based release on n1: web.v1-i0-d0.., env CAPSTAN_INSTANCE_NO 0.. */
  async function oldGroup(count: number, withInstanceLabel: boolean): Promise<{ store: SqliteStore; cluster: FakeCluster }> {
    const store = new SqliteStore({ path: ":memory:" });
    const cluster = new FakeCluster({ nodes: ["n1"], now: () => wall });
    for (let old = 0; old < count; old++) {
      const labels: Record<string, string> = withInstanceLabel
        ? containerLabels({ group: "web", instance: old, version: 1, drift: 0, index: 0, namespace: "ns" })
        : { [labelKeys.podGroup]: "web", [labelKeys.namespace]: "ns", [labelKeys.version]: "1" }; // the oldest format: instance in the name only
      delete labels[labelKeys.numbering];
      cluster.add("n1", `web.v1-i${old}-d0`, { labels, state: "running", startedAt: wall, spec: { image: "img", labels, env: [`CAPSTAN_INSTANCE_NO=${old}`] } });
    }
    return { store, cluster };
  }

  /** CAPSTAN_INSTANCE_NO of every running pod container: never the same value twice. */
  function checkInstanceEnv(cluster: FakeCluster): void {
    const values = cluster
      .list()
      .filter((container) => !isPreviousContainer(container) && container.state === "running")
      .map((container) => container.spec.env?.find((e) => e.startsWith("CAPSTAN_INSTANCE_NO="))?.split("=")[1]);
    expect(values.length, `CAPSTAN_INSTANCE_NO: ${values.join(", ")}`).toBe(new Set(values).size);
  }

  /** Every pod renewed under the 1-based numbering, running; one previous container per instance, stopped. */
  function renewed(cluster: FakeCluster, numInstances: number, version: number): () => boolean {
    return () =>
      allAtVersion(cluster, numInstances, version)() &&
      cluster.list().every((container) => isPreviousContainer(container) || container.labels[labelKeys.numbering] === "1");
  }

  it("a spec update: the renames finish before the rollout step, so every replaced pod is kept as the previous one", async () => {
    const { store, cluster } = await oldGroup(4, true);
    const process = await startProcess(store, cluster);
    await putSpec(store, spec(4, 2));
    const done = renewed(cluster, 4, 2);
    for (let i = 0; i < 80 && !done(); i++) {
      await process.pass("web");
      checkInvariants(cluster, 4);
      wall += stepMs;
    }
    expect(done()).toBe(true);
    const previous = cluster.list().filter((container) => isPreviousContainer(container));
    expect(previous.map((container) => container.name).sort()).toEqual([1, 2, 3, 4].map((i) => previousContainerName("web", i, 0)));
    // Each is the old pod of its instance: labelled one lower (0-based), stopped.
    for (const kept of previous) {
      expect(`web.previous-i${Number(kept.labels[labelKeys.instance]) + 1}`).toBe(kept.name);
      expect(kept.state).toBe("exited");
    }
  });

  it("the rollout replaces the highest instance first while a pod is numbered from 0: no two running pods see one CAPSTAN_INSTANCE_NO", async () => {
    const { store, cluster } = await oldGroup(3, true);
    const process = await startProcess(store, cluster);
    await putSpec(store, spec(3, 2));
    const since = cluster.calls.length;
    await converge(process, cluster, 3, renewed(cluster, 3, 2), 80);
    checkInstanceEnv(cluster);
    const created = cluster.calls.slice(since).filter((call) => call.method === "create").map((call) => call.ref);
    expect(created).toEqual(["web.v2-i3-d0", "web.v2-i2-d0", "web.v2-i1-d0"]);
  });

  it("a rolling restart of containers whose instance is in their name only: replaced highest first, every name free when it is needed", async () => {
    const { store, cluster } = await oldGroup(3, false);
    const process = await startProcess(store, cluster);
    await putSpec(store, spec(3, 1, { restartedAt: "r1" }));
    const done = () => renewed(cluster, 3, 1)() && cluster.list().every((container) => isPreviousContainer(container) || container.labels[labelKeys.restartedAt] === "r1");
    for (let i = 0; i < 80 && !done(); i++) {
      await process.pass("web");
      checkInvariants(cluster, 3);
      checkInstanceEnv(cluster);
      for (const pod of (await readStatus(store))?.status.pods ?? []) expect(pod.lastError, `pass ${i}, instance ${pod.instanceNo}`).not.toMatch(/did not create|cannot rename/);
      wall += stepMs;
    }
    expect(done()).toBe(true);
    expect(
      cluster
        .list()
        .filter((container) => !isPreviousContainer(container))
        .map((container) => [container.name, container.spec.env?.find((e) => e.startsWith("CAPSTAN_INSTANCE_NO="))])
        .sort(),
    ).toEqual([1, 2, 3].map((i) => [`web.v1-i${i}-d0`, `CAPSTAN_INSTANCE_NO=${i}`]));
    // Each old pod is kept as its own instance's previous container: named from its 0-based number
    // (read back from the name, plus one), CAPSTAN_INSTANCE_NO that number.
    const process2 = await startProcess(store, cluster);
    await process2.pass("web");
    const previous = cluster.list().filter((container) => isPreviousContainer(container));
    expect(previous.map((container) => [container.name, container.spec.env?.find((e) => e.startsWith("CAPSTAN_INSTANCE_NO="))]).sort()).toEqual(
      [0, 1, 2].map((i) => [`web.previous-i${i}`, `CAPSTAN_INSTANCE_NO=${i}`]),
    );
  });

  it("a name held by another instance of the group is not called foreign: the message names the instance", async () => {
    // Old instance 2 (web.v1-i1-d0, instance in its name) holds the name new instance 1 needs; its
    // event was lost, so only the create's conflict shows it.
    const { store, cluster } = await oldGroup(0, false);
    const process = await startProcess(store, cluster);
    const labels = { [labelKeys.podGroup]: "web", [labelKeys.namespace]: "ns", [labelKeys.version]: "1" };
    cluster.add("n1", "web.v1-i1-d0", { labels, state: "running", startedAt: wall }, true);
    await putSpec(store, spec(1, 1));
    await process.pass("web");
    const pod = (await readStatus(store))!.status.pods.find((p) => p.instanceNo === 1)!;
    expect(pod.lastError).not.toMatch(/did not create/);
    expect(pod.lastError).toMatch(/^container name web\.v1-i1-d0 on n1 is held by instance 2 of this group \(id fake\d+, created under the 0-based numbering\); waiting for it to be replaced or renamed/);
  });

  it("an instance without a pod whose name another instance holds is deployed under the next drift count, then the holder is replaced (R3)", async () => {
    const { store, cluster } = await oldGroup(2, false);
    cluster.destroy("n1", cluster.list().find((container) => container.name === "web.v1-i0-d0")!.id); // instance 1's old pod is gone
    const process = await startProcess(store, cluster);
    await putSpec(store, spec(2, 1));
    for (let i = 0; i < 40 && !renewed(cluster, 2, 1)(); i++) {
      await process.pass("web");
      // CAPSTAN_INSTANCE_NO is not checked: new instance 1 sees 1 beside old instance 2 until the
      // rollout replaces it (a redeploy of one instance, as the docs say).
      checkInvariants(cluster, 2);
      for (const pod of (await readStatus(store))?.status.pods ?? []) expect(pod.lastError, `pass ${i}, instance ${pod.instanceNo}`).not.toMatch(/did not create|held by/);
      wall += stepMs;
    }
    expect(renewed(cluster, 2, 1)()).toBe(true);
    expect(cluster.list().filter((container) => !isPreviousContainer(container)).map((container) => container.name).sort()).toEqual(["web.v1-i1-d1", "web.v1-i2-d0"]);
  });
});
