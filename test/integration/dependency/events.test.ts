// The Dependency controller's events on the real etcd and engines (docs/events.md): a pod wanted
// on a node (DeployStarted), running (DeploySucceeded), and reclaimed once unreferenced past the GC
// time (DependencyPodReclaimed). The test plays the PodGroup controller, as controller.test.ts does.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fencedStore } from "../../../adapters/store/fenced.ts";
import { decodeEventRecord, eventsKeyPrefix, type EventRecord } from "../../../api/resources/event.ts";
import { createDependencyController } from "../../../controllers/dependency/index.ts";
import { EventRecorder } from "../../../controllers/shared/events.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { Manager } from "../../../runtime/manager.ts";
import { Harness, services } from "./harness.ts";

const h = new Harness();
const prefix = eventsKeyPrefix(h.root);
let manager: Manager;
let recorder: EventRecorder;

async function eventsOf(name: string): Promise<EventRecord[]> {
  const { items } = await h.store.list(prefix);
  return items.map((kv) => decodeEventRecord(kv.value)).filter((e): e is EventRecord => e !== undefined && e.name === name);
}

beforeAll(async () => {
  for (const node of Object.keys(services.engines)) await h.putNode(node, 4, 4 * 2 ** 30);
  h.nodes.start();
  await h.nodes.waitForSync();
  const elector = new LeaderElector({ store: h.store, key: `${h.root}leader`, identity: `dep-events-${process.pid}`, ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 });
  manager = new Manager({ name: "dependency-events-test", elector, gracefulShutdownMs: 10_000 });
  const fenced = fencedStore(h.store, () => elector.fence());
  recorder = new EventRecorder({ store: fenced, prefix });
  const dep = createDependencyController({
    store: fenced,
    cluster: h.cluster,
    prefix: h.root,
    gcMs: 2_000,
    updateWaitMs: 500,
    refreshIntervalMs: 1_000,
    restartBackoff: { initialMs: 200, maxMs: 1_000 },
    registry: manager.registry,
    events: recorder,
  });
  for (const i of dep.informers) manager.addInformer(i);
  for (const r of dep.runnables) manager.add(r);
  await manager.start();
  await dep.cache.waitForSync(undefined, 30_000);
});

afterAll(async () => {
  await manager?.stop();
  recorder?.close();
  await h.cleanup();
}, 120_000);

describe("Dependency controller events", () => {
  it("a pod wanted, running, then reclaimed", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    await h.putGroup(g, "ns-a", [{ podName: dep, policy: "node" }], ["n1"]);
    await h.until("DeployStarted and DeploySucceeded", async () => (await eventsOf(dep)).some((e) => e.reason === "DeploySucceeded"), 60_000);
    const running = await eventsOf(dep);
    expect(running.find((e) => e.reason === "DeployStarted")).toMatchObject({ type: "Normal", kind: "dependency", name: dep, app: "capstan-test", node: "n1", message: "pod on n1 wanted (1 reference(s))" });
    expect(running.find((e) => e.reason === "DeploySucceeded")).toMatchObject({ type: "Normal", node: "n1", message: "pod on n1 runs version 1" });

    await h.deleteGroup(g);
    const reclaimed = await h.until("DependencyPodReclaimed", async () => (await eventsOf(dep)).find((e) => e.reason === "DependencyPodReclaimed"), 60_000);
    expect(reclaimed).toMatchObject({ type: "Normal", kind: "dependency", name: dep, node: "n1" });
    expect(reclaimed.message).toMatch(/^pod on n1 removed: unreferenced since /);
    expect((await eventsOf(dep)).filter((e) => e.type === "Warning")).toEqual([]);
  });
});
