// The container watch cache over a scripted cluster: the test plays the event streams.
import { afterEach, describe, expect, it } from "vitest";
import { ContainerCache, type ContainerChange } from "../../../adapters/cluster/container-cache.ts";
import type { Cluster, ClusterEvent, ContainerDetails, ContainerSummary, EventHandler } from "../../../adapters/cluster/index.ts";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";

const L = "io.capstan.podgroup";

class ScriptedCluster {
  handler: EventHandler | undefined;
  lists: Record<string, ContainerSummary[]> = {};
  unsubscribed = false;
  nodes = async () => ["n1", "n2"].map((name) => ({ name }) as never);
  subscribe = (h: EventHandler) => {
    this.handler = h;
    return { unsubscribe: async () => void (this.unsubscribed = true), badLines: 0, connects: 0 };
  };
  listContainers = async (node?: string) => this.lists[node ?? ""] ?? [];
  emit(ev: ClusterEvent): void {
    this.handler!(ev);
  }
}

function summary(node: string, id: string, over: Partial<ContainerSummary> = {}): ContainerSummary {
  return {
    node,
    id,
    name: `c-${id}`,
    image: "img",
    imageId: "sha",
    command: "",
    created: 1,
    state: "running",
    status: "Up 1 second",
    labels: { [L]: "web" },
    networkMode: "none",
    ports: [],
    ...over,
  };
}

function event(node: string, id: string, action: string, over: Record<string, unknown> = {}): ClusterEvent {
  return { type: "container", node, id, action, name: `c-${id}`, labels: { [L]: "web" }, exitCode: undefined, time: 5_000, ...over } as ClusterEvent;
}

let stop: AbortController | undefined;
let running: Promise<void> | undefined;

async function started(clock = new FakeClock(0)) {
  const cluster = new ScriptedCluster();
  const cache = new ContainerCache({ cluster: cluster as unknown as Cluster, indexLabels: [L], labelFilter: [L], clock, resyncIntervalMs: 60_000 });
  stop = new AbortController();
  running = cache.start(stop.signal);
  await flushMicrotasks();
  const changes: ContainerChange[] = [];
  cache.addListener((c) => changes.push(c));
  return { cluster, cache, changes, clock };
}

afterEach(async () => {
  stop?.abort();
  await running;
});

describe("ContainerCache", () => {
  it("syncs once every node has relisted or been reported unreachable", async () => {
    const { cluster, cache } = await started();
    expect(cache.hasSynced()).toBe(false);
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a")] });
    expect(cache.hasSynced()).toBe(false);
    cluster.emit({ type: "node", node: "n2", state: "unreachable", error: "down" });
    expect(cache.hasSynced()).toBe(true);
    await cache.waitForSync();
    expect(cache.byLabel(L, "web").map((c) => c.id)).toEqual(["a"]);
    expect(cache.nodeState("n2")).toBe("unreachable");
    expect(() => cache.byLabel("other", "x")).toThrow(RangeError);
  });

  it("follows create, start, die (exit code, times), rename and destroy", async () => {
    const { cluster, cache, changes } = await started();
    cluster.emit({ type: "relist", node: "n1", containers: [] });
    cluster.emit(event("n1", "a", "create"));
    expect(cache.get("n1", "a")).toMatchObject({ state: "created", confirmed: true });
    cluster.emit(event("n1", "a", "start", { time: 6_000 }));
    expect(cache.get("n1", "a")).toMatchObject({ state: "running", startedAt: 6_000 });
    cluster.emit(event("n1", "a", "die", { exitCode: 3, time: 7_000 }));
    expect(cache.get("n1", "a")).toMatchObject({ state: "exited", exitCode: 3, finishedAt: 7_000, startedAt: 6_000 });
    cluster.emit(event("n1", "a", "rename", { name: "new-name" }));
    expect(cache.get("n1", "a")!.name).toBe("new-name");
    cluster.emit(event("n1", "a", "destroy"));
    expect(cache.get("n1", "a")).toBeUndefined();
    expect(changes.map((c) => [c.action, c.gone])).toEqual([
      ["create", false],
      ["start", false],
      ["die", false],
      ["rename", false],
      ["destroy", true],
    ]);
  });

  it("a relist is the node's truth: exit codes from status lines, vanished containers dropped", async () => {
    const { cluster, cache, changes } = await started();
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a"), summary("n1", "b")] });
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a", { state: "exited", status: "Exited (137) 3 seconds ago" })] });
    expect(cache.get("n1", "a")).toMatchObject({ state: "exited", exitCode: 137 });
    expect(cache.get("n1", "b")).toBeUndefined();
    expect(changes.filter((c) => c.gone).map((c) => c.container.id)).toEqual(["b"]);
  });

  it("a destroyed id never comes back from a late event or an older relist", async () => {
    const { cluster, cache } = await started();
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a")] });
    cache.recordRemoved("n1", "a");
    cluster.emit(event("n1", "a", "start"));
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a")] });
    expect(cache.get("n1", "a")).toBeUndefined();
  });

  it("our own create survives a relist answered before it, until an event confirms it", async () => {
    const { cluster, cache } = await started();
    cluster.emit({ type: "relist", node: "n1", containers: [] });
    cache.recordCreated({ node: "n1", id: "x", name: "x", image: "img", labels: { [L]: "web" }, limits: { memoryBytes: 5, nanoCpus: 0 } });
    cluster.emit({ type: "relist", node: "n1", containers: [] });
    expect(cache.get("n1", "x")).toMatchObject({ state: "created", confirmed: false, limits: { memoryBytes: 5, nanoCpus: 0 } });
    cluster.emit(event("n1", "x", "create"));
    cache.recordStarted("n1", "x", cache.get("n1", "x")!.generation, 9_000);
    expect(cache.get("n1", "x")).toMatchObject({ state: "running", startedAt: 9_000, confirmed: true, limits: { memoryBytes: 5, nanoCpus: 0 } });
    cluster.emit({ type: "relist", node: "n1", containers: [] });
    expect(cache.get("n1", "x")).toBeUndefined();
  });

  it("a start we made does not overwrite the die event of a container that exited at once", async () => {
    const { cluster, cache } = await started();
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a", { state: "exited", status: "Exited (1) 1 second ago" })] });
    const before = cache.get("n1", "a")!.generation;
    cluster.emit(event("n1", "a", "start", { time: 8_000 }));
    cluster.emit(event("n1", "a", "die", { exitCode: 1, time: 8_001 })); // both before start() returned
    cache.recordStarted("n1", "a", before, 9_000);
    expect(cache.get("n1", "a")).toMatchObject({ state: "exited", exitCode: 1, startedAt: 8_000 });
  });

  it("an inspect applies its state only if nothing changed since the caller read the entry", async () => {
    const { cluster, cache } = await started();
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a")] });
    const seen = cache.get("n1", "a")!;
    const details = {
      node: "n1",
      id: "a",
      name: "c-a",
      image: "img",
      created: 1,
      labels: { [L]: "web" },
      memoryBytes: 64,
      nanoCpus: 5,
      status: { state: "running", running: true, oomKilled: false, exitCode: 0, startedAt: 4_000, finishedAt: undefined },
      network: { networks: [{ ipAddress: "" }], ports: [] },
    } as unknown as ContainerDetails;
    cluster.emit(event("n1", "a", "die", { exitCode: 1 })); // newer than the inspect below
    cache.recordDetails(details, seen.generation);
    expect(cache.get("n1", "a")).toMatchObject({ state: "exited", exitCode: 1, limits: { memoryBytes: 64, nanoCpus: 5 }, ip: "" });
    cache.recordDetails(details, cache.get("n1", "a")!.generation);
    expect(cache.get("n1", "a")).toMatchObject({ state: "running", startedAt: 4_000 });
  });

  it("keeps an unreachable node's containers (unknown, not gone) and tells listeners", async () => {
    const { cluster, cache, changes } = await started();
    cluster.emit({ type: "relist", node: "n2", containers: [summary("n2", "a")] });
    cluster.emit({ type: "node", node: "n2", state: "ready" });
    cluster.emit({ type: "node", node: "n2", state: "unreachable" });
    expect(cache.get("n2", "a")).toBeDefined();
    expect(changes.map((c) => c.action)).toEqual(["relist", "node-ready", "node-unreachable"]);
  });

  it("as a Source: every change enqueues the mapped keys, at the priority chosen per change", async () => {
    const { cluster, cache } = await started();
    const src = cache.source((c) => [c.labels[L]!], (ch) => (ch.action === "die" ? 100 : 0));
    const got: [string, number | undefined][] = [];
    await src.start((key, o) => got.push([key, o?.priority]));
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a")] });
    cluster.emit(event("n1", "a", "die", { exitCode: 0 }));
    await src.stop();
    cluster.emit(event("n1", "a", "start"));
    expect(got).toEqual([
      ["web", 0],
      ["web", 100],
    ]);
  });

  it("resyncs reachable nodes on its interval; stops its subscription on abort", async () => {
    const { cluster, cache, clock } = await started();
    cluster.emit({ type: "relist", node: "n1", containers: [summary("n1", "a")] });
    cluster.emit({ type: "node", node: "n1", state: "ready" });
    cluster.lists.n1 = [summary("n1", "b")];
    await clock.advanceAsync(60_000);
    await flushMicrotasks();
    expect(cache.byLabel(L, "web").map((c) => c.id)).toEqual(["b"]);
    stop!.abort();
    await running;
    expect(cluster.unsubscribed).toBe(true);
  });
});
