// The controllers/shared pieces the Dependency controller was cut down to (and the PodGroup
// controller uses too): create-or-adopt, startContainers, the guarded removal transaction, the
// unreadable-spec status, the exit a back-off counts, and the wiring's defaults and checks.
import { afterEach, describe, expect, it } from "vitest";
import { ContainerCache } from "../../../adapters/cluster/container-cache.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { podControllerSettings, sharedInformer } from "../../../controllers/shared/controller-wiring.ts";
import { startContainers, type ContainerOpsContext } from "../../../controllers/shared/container-ops.ts";
import { createOrAdopt } from "../../../controllers/shared/create-or-adopt.ts";
import { deleteUnchanged } from "../../../controllers/shared/delete-unchanged.ts";
import { ForeignContainerError, StatusConflictError } from "../../../controllers/shared/errors.ts";
import { exitObservation } from "../../../controllers/shared/exit-observation.ts";
import { unreadableSpecStatus } from "../../../controllers/shared/unreadable-spec.ts";
import { asap, Wakeups } from "../../../controllers/shared/wakeups.ts";
import type { Informer } from "../../../runtime/informer.ts";
import { silentLogger } from "../../../runtime/log.ts";
import { FakeCluster } from "../../helpers/fake-cluster.ts";
import { container } from "./fixtures.ts";

function ops(): { cluster: FakeCluster; cache: ContainerCache; context: ContainerOpsContext } {
  const cluster = new FakeCluster({ nodes: ["n1"] });
  const cache = new ContainerCache({ cluster, indexLabels: ["app"] });
  return { cluster, cache, context: { cluster, cache, signal: new AbortController().signal, log: silentLogger } };
}

const plan = { name: "web.v1-n1", spec: { image: "img", labels: { app: "web" } }, limits: { memoryBytes: 1, nanoCpus: 2 } };
const rule = { ours: (found: { labels: Record<string, string> }) => found.labels.app === "web", foreign: () => "taken" };

describe("createOrAdopt", () => {
  it("creates and records the container at once", async () => {
    const { cluster, cache, context } = ops();
    expect(await createOrAdopt(context, "n1", plan, rule)).toBe("created");
    const [created] = cluster.list("n1");
    expect(cache.get("n1", created!.id)).toMatchObject({ name: "web.v1-n1", state: "created", limits: plan.limits, confirmed: false });
  });

  it("a name taken by ours (an earlier attempt): adopted, no second container", async () => {
    const { cluster, cache, context } = ops();
    const earlier = cluster.add("n1", "web.v1-n1", { labels: { app: "web" } });
    expect(await createOrAdopt(context, "n1", plan, rule)).toBe("adopted");
    expect(cluster.list("n1").map((c) => c.id)).toEqual([earlier.id]);
    expect(cache.get("n1", earlier.id)?.name).toBe("web.v1-n1");
  });

  it("a name taken by another container: ForeignContainerError, nothing touched or recorded", async () => {
    const { cluster, cache, context } = ops();
    const other = cluster.add("n1", "web.v1-n1", { labels: { app: "other" } });
    await expect(createOrAdopt(context, "n1", plan, rule)).rejects.toThrow(ForeignContainerError);
    expect(cluster.list("n1")).toEqual([other]);
    expect(cache.list()).toEqual([]);
  });
});

describe("startContainers", () => {
  it("starts those not running, in order, and records each start", async () => {
    const { cluster, cache, context } = ops();
    const created = cluster.add("n1", "a", { labels: { app: "web" } });
    cache.recordCreated({ node: "n1", id: created.id, name: "a", image: "img", labels: { app: "web" } });
    const running = container({}, { node: "n1", state: "running" });
    await startContainers(context, [running, cache.get("n1", created.id)!]);
    expect(cluster.calls.filter((c) => c.method === "start").map((c) => c.ref)).toEqual([created.id]);
    expect(cache.get("n1", created.id)?.state).toBe("running");
  });
});

describe("deleteUnchanged", () => {
  let store: SqliteStore;
  afterEach(() => store.close());

  it("deletes every record and what goes with it in one revision; a record changed since: nothing deleted", async () => {
    store = new SqliteStore({ path: ":memory:" });
    const spec = await store.put("/p/spec", "1");
    const status = await store.put("/p/status", "1");
    await store.put("/p/history/1", "h");
    await store.put("/p/task", "t");
    await store.put("/p/status", "2"); // written since the pass read it
    const guarded = [{ key: "/p/status", modRevision: status.revision }, { key: "/p/spec", modRevision: spec.revision, alsoDelete: [{ type: "deletePrefix" as const, prefix: "/p/history/" }] }];
    await expect(deleteUnchanged(store, guarded, [{ type: "delete", key: "/p/task" }], "changed")).rejects.toThrow(StatusConflictError);
    expect((await store.list("/p/")).items.map((kv) => kv.key)).toEqual(["/p/history/1", "/p/spec", "/p/status", "/p/task"]);
    const now = (await store.get("/p/status"))!.modRevision;
    const result = await deleteUnchanged(store, [{ ...guarded[0]!, modRevision: now }, guarded[1]], [{ type: "delete", key: "/p/task" }], "changed");
    expect(result?.succeeded).toBe(true);
    expect((await store.list("/p/")).items).toEqual([]);
    expect(await deleteUnchanged(store, [undefined], [], "changed")).toBeUndefined();
  });
});

describe("unreadableSpecStatus, exitObservation, wiring", () => {
  it("the unreadable spec: the previous status kept, the state and reason set", () => {
    const empty = { state: "idle", lastError: "", updatedAt: "", pods: [] as string[] };
    const status = unreadableSpecStatus({ ...empty, pods: ["kept"] }, empty, "degraded", "not JSON", Date.parse("2026-01-01T00:00:00Z"));
    expect(status).toEqual({ state: "degraded", lastError: "the stored spec cannot be read (not JSON); nothing is changed until it is fixed", updatedAt: "2026-01-01T00:00:00.000Z", pods: ["kept"] });
    expect(unreadableSpecStatus(undefined, empty, "failed", "x", 0).pods).toEqual([]);
  });

  it("wakeups: the earliest time, never sooner than asap", () => {
    const wakeups = new Wakeups();
    wakeups.add(1_000 + 30_000, 1_000 + 2_000.2);
    expect(wakeups.result(1_000)).toEqual({ requeueAfterMs: 2_001 });
    wakeups.add(500);
    expect(wakeups.result(1_000)).toEqual({ requeueAfterMs: asap });
  });

  it("an exit is keyed by container and restart count", () => {
    const stopped = container({}, { id: "abc", state: "exited", exitCode: 2, startedAt: 5, finishedAt: 9, oomKilled: true });
    expect(exitObservation(stopped, 3)).toEqual({ key: "abc#3", exitCode: 2, oomKilled: true, startedAt: 5, finishedAt: 9 });
  });

  it("settings: defaults, bad timings refused; a shared informer of another prefix refused", () => {
    const base = { store: undefined as never, cluster: undefined as never };
    expect(podControllerSettings(base, "x")).toMatchObject({ updateWaitMs: 10_000, refreshIntervalMs: 30_000, reconcileTimeoutMs: 300_000 });
    expect(() => podControllerSettings({ ...base, updateWaitMs: -1 }, "x")).toThrow("updateWaitMs must be >= 0 (got -1)");
    expect(() => podControllerSettings({ ...base, refreshIntervalMs: 0 }, "x")).toThrow("refreshIntervalMs must be > 0 (got 0)");
    const informer = { name: "i", prefix: "/a/" } as Informer<unknown>;
    expect(sharedInformer(informer, "/a/")).toBe(informer);
    expect(sharedInformer(undefined, "/a/")).toBeUndefined();
    expect(() => sharedInformer(informer, "/b/")).toThrow("shared informer i caches /a/, not /b/");
  });
});
