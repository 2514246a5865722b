// Event subscription against the real engines, including an engine restart while subscribed: the
// node goes unreachable then ready, the stream resumes, and a change made while the subscriber was
// disconnected is revealed by the relist that follows the reconnect.
import Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DockerCluster,
  EngineUnavailableError,
  type ClusterEvent,
  type ContainerEvent,
  type CreateSpec,
  type RelistEvent,
  type Subscription,
} from "../../../adapters/cluster/index.ts";
import { loadServices, servicesCommand, socketPath, uniqueName } from "../../helpers/services.ts";

const services = loadServices();
const run = uniqueName("cluev");
const testLabel = "io.capstan.test";
const labelFilter = `${testLabel}=${run}`;

let cluster: DockerCluster;

function spec(over: Partial<CreateSpec> = {}): CreateSpec {
  return { image: services.testImage, cmd: ["sleep", "600"], networkMode: "none", labels: { [testLabel]: run }, ...over };
}

/** Collects a subscription's events and waits for ones matching a predicate. */
class Recorder {
  readonly events: ClusterEvent[] = [];
  readonly handler = (e: ClusterEvent) => void this.events.push(e);

  async waitFor<T extends ClusterEvent>(what: string, pred: (e: ClusterEvent) => e is T, from = 0, ms = 20_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const hit = this.events.slice(from).find(pred);
      if (hit) return hit;
      if (Date.now() > end) throw new Error(`no ${what} within ${ms} ms; got ${JSON.stringify(this.events.map(brief))}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

function brief(e: ClusterEvent): string {
  if (e.type === "node") return `${e.node}:${e.state}`;
  if (e.type === "relist") return `${e.node}:relist(${e.containers.map((c) => c.name).join(",")})`;
  return `${e.node}:${e.action}:${e.name}`;
}

const isContainer = (node: string, action: string, name: string) => (e: ClusterEvent): e is ContainerEvent =>
  e.type === "container" && e.node === node && e.action === action && e.name === name;
const isRelist = (node: string) => (e: ClusterEvent): e is RelistEvent => e.type === "relist" && e.node === node;

beforeAll(() => {
  cluster = DockerCluster.fromSpec(services.cluster);
});

afterAll(async () => {
  // Whatever happened above, n2 must be running again for everyone else.
  await servicesCommand("start-engine", "n2");
  const leftovers = await cluster.listContainers(undefined, { all: true, filters: { label: [labelFilter] } });
  await Promise.all(leftovers.map((c) => cluster.remove(c, { force: true, volumes: true })));
}, 120_000);

describe("events", () => {
  it("delivers create, start, die (with exit code) and destroy with the container's labels", async () => {
    const rec = new Recorder();
    const sub = cluster.subscribe(rec.handler, { filters: { label: [labelFilter] }, nodes: ["n1"] });
    try {
      await rec.waitFor("n1 relist", isRelist("n1"));
      expect(rec.events.map(brief)).toEqual(["n1:ready", "n1:relist()"]);
      const name = `${run}-exit7`;
      const ref = await cluster.create("n1", name, spec({ cmd: ["sh", "-c", "exit 7"], labels: { [testLabel]: run, "io.capstan.podgroup": "pg1" } }));
      await cluster.start(ref);
      const die = await rec.waitFor("die", isContainer("n1", "die", name));
      expect(die).toMatchObject({ id: ref.id, exitCode: 7, labels: { [testLabel]: run, "io.capstan.podgroup": "pg1" } });
      expect(die.time).toBeGreaterThan(Date.now() - 60_000);
      await cluster.remove(ref);
      await rec.waitFor("destroy", isContainer("n1", "destroy", name));
      const mine = rec.events.filter((e): e is ContainerEvent => e.type === "container" && e.name === name).map((e) => e.action);
      expect(mine).toEqual(["create", "start", "die", "destroy"]);
      // The label filter is applied by the engine: containers of other runs are not delivered.
      expect(rec.events.every((e) => e.type !== "container" || e.labels[testLabel] === run)).toBe(true);
      expect(sub.badLines).toBe(0);
    } finally {
      await sub.unsubscribe();
    }
  });

  it("survives an engine restart: unreachable, ready, relist shows what changed meanwhile, stream resumes", async () => {
    // Fixed 3 s then 6 s reconnect delays make the timeline deterministic: the test makes its
    // change after the engine is back but before the subscriber's next reconnect attempt.
    const slow = DockerCluster.fromSpec(services.cluster, { events: { backoff: { initialMs: 3000, maxMs: 6000, jitter: 0 } } });
    const rec2 = new Recorder();
    const sub2: Subscription = slow.subscribe(rec2.handler, { filters: { label: [labelFilter] } });
    const other = new Docker({ socketPath: socketPath(services.engines.n2!) }); // a second client, not the subscriber's
    try {
      await rec2.waitFor("n2 relist", isRelist("n2"));
      const before = await cluster.create("n2", `${run}-before`, spec());
      await rec2.waitFor("create before", isContainer("n2", "create", `${run}-before`));

      const mark = rec2.events.length;
      await servicesCommand("stop-engine", "n2");
      // While n2 is down, calls to it fail fast and typed; n1 is unaffected.
      const t0 = Date.now();
      await expect(cluster.inspect(before)).rejects.toBeInstanceOf(EngineUnavailableError);
      await expect(cluster.listContainers(undefined, { all: true })).rejects.toMatchObject({ name: "EngineUnavailableError", node: "n2" });
      expect(Date.now() - t0).toBeLessThan(5000);
      expect((await cluster.nodes()).map((n) => [n.name, n.state])).toEqual([["n1", "ready"], ["n2", "unreachable"]]);
      await rec2.waitFor("n2 unreachable", (e): e is ClusterEvent => e.type === "node" && e.node === "n2" && e.state === "unreachable", mark, 30_000);

      await servicesCommand("start-engine", "n2");
      // The subscriber is between attempts now: change n2 behind its back.
      await other.getContainer(before.id).remove({ force: true });
      await other.createContainer({ name: `${run}-during`, Image: services.testImage, Cmd: ["sleep", "600"], Labels: { [testLabel]: run }, HostConfig: { NetworkMode: "none" } });
      const changedAt = rec2.events.length;

      const relist = await rec2.waitFor("relist after restart", isRelist("n2"), mark, 30_000);
      expect(rec2.events.indexOf(relist)).toBeGreaterThanOrEqual(changedAt); // it came after the change
      expect(relist.containers.map((c) => c.name)).toEqual([`${run}-during`]);
      const n2States = rec2.events.slice(mark).filter((e) => e.type === "node" && e.node === "n2").map((e) => (e.type === "node" ? e.state : ""));
      expect(n2States).toEqual(["unreachable", "ready"]);
      expect(rec2.events.slice(mark).some((e) => e.node === "n1" && e.type === "node")).toBe(false);

      // The stream resumed: a new change on n2 arrives as an event.
      await slow.start({ node: "n2", id: `${run}-during` });
      await rec2.waitFor("start after restart", isContainer("n2", "start", `${run}-during`), mark);
      // Nothing older than the relist arrived after it: the stream is opened without `since`, so the
      // engine replayed neither the removal of -before nor the creation of -during (the relist has both).
      const afterRelist = rec2.events.slice(rec2.events.indexOf(relist) + 1).filter((e) => e.type === "container" && e.node === "n2");
      expect(afterRelist.map(brief)).toEqual([`n2:start:${run}-during`]);
      expect(sub2.connects).toBeGreaterThanOrEqual(3); // n1 once, n2 before and after
      expect(sub2.badLines).toBe(0);
    } finally {
      await sub2.unsubscribe();
      await servicesCommand("start-engine", "n2");
    }
  }, 90_000);
});
