// Events of the real PodGroup controller on the real engines (docs/events.md): a deploy records
// DeployStarted then DeploySucceeded; a container that exits non-zero records InstanceCrashed and
// InstanceRestarted (counted in one record each as it repeats), then CrashLooping. The recorder
// writes through the fenced store, as in production. Every wait is on the store's events.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fencedStore } from "../../../adapters/store/fenced.ts";
import { decodeEventRecord, eventsKeyPrefix, type EventRecord } from "../../../api/resources/event.ts";
import { createPodGroupController } from "../../../controllers/podgroup/index.ts";
import { EventRecorder } from "../../../controllers/shared/events.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { Manager } from "../../../runtime/manager.ts";
import { groupSpec, Harness } from "./harness.ts";

const h = new Harness();
const prefix = eventsKeyPrefix(h.root);
let manager: Manager;
let recorder: EventRecorder;

async function eventsOf(name: string): Promise<EventRecord[]> {
  const { items } = await h.store.list(prefix);
  return items.map((kv) => decodeEventRecord(kv.value)).filter((e): e is EventRecord => e !== undefined && e.name === name);
}

beforeAll(async () => {
  const elector = new LeaderElector({ store: h.store, key: `${h.root}leader`, identity: `events-test-${process.pid}`, ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 });
  manager = new Manager({ name: "podgroup-events-test", elector, gracefulShutdownMs: 10_000 });
  const fenced = fencedStore(h.store, () => elector.fence());
  recorder = new EventRecorder({ store: fenced, prefix });
  const pg = createPodGroupController({
    store: fenced,
    cluster: h.cluster,
    prefix: h.root,
    secretMarkerPrefix: h.markerPrefix,
    updateWaitMs: 500,
    refreshIntervalMs: 2_000,
    restartBackoff: { initialMs: 200, maxMs: 1_000 },
    registry: manager.registry,
    events: recorder,
  });
  for (const i of pg.informers) manager.addInformer(i);
  for (const r of pg.runnables) manager.add(r);
  await manager.start();
  await pg.cache.waitForSync(undefined, 30_000);
});

afterAll(async () => {
  await manager?.stop();
  recorder?.close();
  await h.cleanup();
}, 120_000);

describe("PodGroup controller events", () => {
  it("a deploy: DeployStarted, then DeploySucceeded once its instances run", async () => {
    const name = h.name("ok");
    await h.put(groupSpec(name, { numInstances: 2 }));
    const events = await h.until(
      "DeployStarted and DeploySucceeded",
      async () => {
        const es = await eventsOf(name);
        return es.some((e) => e.reason === "DeploySucceeded") ? es : undefined;
      },
      60_000,
    );
    const started = events.find((e) => e.reason === "DeployStarted")!;
    const succeeded = events.find((e) => e.reason === "DeploySucceeded")!;
    expect(started).toMatchObject({ type: "Normal", kind: "podgroup", name, app: "capstan-test", message: "deploying version 1: 2 instance(s)", count: 1 });
    expect(succeeded).toMatchObject({ type: "Normal", kind: "podgroup", name, app: "capstan-test", message: "version 1 runs on 2 instance(s)" });
    expect(started.id < succeeded.id).toBe(true); // recorded in that order
    expect(Date.parse(started.firstTime)).toBeLessThanOrEqual(Date.parse(succeeded.firstTime));
    expect(events.filter((e) => e.type === "Warning")).toEqual([]);
    // The containers really run.
    expect((await h.actual(name)).filter((a) => a.c.state === "running")).toHaveLength(2);
  });

  it("a container that exits non-zero: InstanceCrashed and InstanceRestarted, counted as they repeat, then CrashLooping", async () => {
    const name = h.name("crash");
    await h.put(groupSpec(name, { restartPolicy: "onfail", container: { command: ["sh", "-c", "sleep 0.3; exit 3"] } }));
    const events = await h.until(
      "repeated crashes and restarts, and a crash loop",
      async () => {
        const es = await eventsOf(name);
        const crashed = es.find((e) => e.reason === "InstanceCrashed");
        const restarted = es.find((e) => e.reason === "InstanceRestarted");
        return crashed && restarted && crashed.count >= 2 && restarted.count >= 2 && es.some((e) => e.reason === "CrashLooping") ? es : undefined;
      },
      90_000,
      200,
    );
    const crashed = events.find((e) => e.reason === "InstanceCrashed")!;
    expect(crashed).toMatchObject({ type: "Warning", kind: "podgroup", name, app: "capstan-test", instance: 1, message: "instance 1 exited with code 3" });
    expect(crashed.node).toMatch(/^n\d$/);
    expect(Date.parse(crashed.lastTime)).toBeGreaterThan(Date.parse(crashed.firstTime));
    expect(events.find((e) => e.reason === "InstanceRestarted")).toMatchObject({ type: "Normal", instance: 1, message: "instance 1 restarted by restart policy onfail" });
    expect(events.find((e) => e.reason === "CrashLooping")).toMatchObject({ type: "Warning", instance: 1, message: "instance 1 keeps exiting: back-off restarting it" });
    // Aggregated: one record per (reason, message), however often it happened.
    expect(events.filter((e) => e.reason === "InstanceCrashed")).toHaveLength(1);
    // The deploy started before the first crash (its instance started, so the deploy may have succeeded too).
    expect(events.find((e) => e.reason === "DeployStarted")!.id < crashed.id).toBe(true);
  });
});
