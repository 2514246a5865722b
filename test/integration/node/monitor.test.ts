// The node monitor against the two real engines (scripts/services) and the shared etcd: records for
// n1 and n2 with real capacity; `reserved` following a Capstan-labelled container's limits through
// Docker events (the periodic sync is set far out, so only events can explain the changes); no
// rewrite of an unchanged record until the heartbeat; an unreachable engine recorded as such
// without stopping the loop; records of nodes that left the cluster deleted.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerRef } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import { createNodeMonitor, reservedLabel, type NodeMonitorOptions } from "../../../controllers/node/monitor.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const MiB = 1 << 20;
const services = loadServices();
const run = uniqueName("nodemon");
const downNode = `${run}-down`;

let store: EtcdStore;
let cluster: DockerCluster;
const containers: ContainerRef[] = [];

beforeAll(() => {
  expect(Object.keys(services.engines)).toEqual(["n1", "n2"]);
  store = new EtcdStore({ endpoints: services.etcdEndpoints });
  cluster = DockerCluster.fromSpec(services.cluster);
});

afterAll(async () => {
  await Promise.all(containers.map((c) => cluster.remove(c, { force: true }).catch(() => {})));
  await store.delete(keys.node(downNode));
  await store.close();
});

/** Run a monitor for the duration of `body`, then stop it and check it stops promptly. */
async function withMonitor(options: Partial<NodeMonitorOptions>, body: () => Promise<void>, on = cluster): Promise<void> {
  const monitor = createNodeMonitor({ store, cluster: on, ...options });
  expect(monitor.name).toBe("node-monitor");
  const abort = new AbortController();
  const running = monitor.start(abort.signal);
  try {
    await body();
  } finally {
    abort.abort();
    const t0 = Date.now();
    await running;
    expect(Date.now() - t0).toBeLessThan(5_000);
  }
}

async function record(name: string): Promise<{ record: NodeRecord; modRevision: number } | null> {
  const kv = await store.get(keys.node(name));
  return kv === null ? null : { record: JSON.parse(kv.value) as NodeRecord, modRevision: kv.modRevision };
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
    last = value;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("node monitor on the real engines", () => {
  it("records both nodes, then follows a Capstan container's limits through events", async () => {
    // The periodic sync is an hour away: after the first pass, only Docker events trigger syncs.
    await withMonitor({ intervalMs: 3_600_000, debounceMs: 200 }, async () => {
      const first = new Map<string, NodeRecord>();
      for (const name of ["n1", "n2"]) {
        const r = await eventually(`a fresh ready record for ${name}`, async () => {
          const got = await record(name);
          return got && got.record.state === "ready" && Date.parse(got.record.updatedAt) > Date.now() - 10_000 ? got.record : null;
        });
        expect(r).toMatchObject({ name, state: "ready", endpoint: services.engines[name], address: "127.0.0.1" });
        expect(r.cpus).toBeGreaterThan(0);
        expect(r.memoryBytes).toBeGreaterThan(0);
        expect(r.engineVersion).not.toBe("");
        expect(r.error).toBeUndefined();
        first.set(name, r);
      }

      const base = first.get("n1")!.reserved;
      const ref = await cluster.create("n1", `${run}-reserve`, {
        image: services.testImage,
        cmd: ["sleep", "600"],
        networkMode: "none",
        labels: { [reservedLabel]: run, "io.capstan.instance": "1" },
        memoryBytes: 48 * MiB,
        nanoCpus: 250_000_000,
      });
      containers.push(ref);
      await cluster.start(ref);
      const grown = await eventually("n1's reservation to grow", async () => {
        const r = (await record("n1"))!.record;
        return r.reserved.memoryBytes === base.memoryBytes + 48 * MiB ? r : null;
      });
      expect(grown.reserved.cpus).toBeCloseTo(base.cpus + 0.25, 6);
      expect(grown.containersRunning).toBeGreaterThanOrEqual(first.get("n1")!.containersRunning + 1);
      expect((await record("n2"))!.record.reserved).toEqual(first.get("n2")!.reserved);

      await cluster.remove(ref, { force: true });
      const shrunk = await eventually("n1's reservation to shrink", async () => {
        const r = (await record("n1"))!.record;
        return r.reserved.memoryBytes === base.memoryBytes ? r : null;
      });
      expect(shrunk.reserved.cpus).toBeCloseTo(base.cpus, 6);
    });
  });

  it("does not rewrite an unchanged record before the heartbeat, and does after it", async () => {
    await withMonitor({ intervalMs: 200, heartbeatMs: 3_600_000 }, async () => {
      await eventually("a record for n1", () => record("n1"));
      await new Promise((r) => setTimeout(r, 500)); // the first pass has written what changed
      const before = (await record("n1"))!;
      await new Promise((r) => setTimeout(r, 1_000)); // about five more passes
      expect((await record("n1"))!.modRevision).toBe(before.modRevision);
    });
    await withMonitor({ intervalMs: 200, heartbeatMs: 600 }, async () => {
      const before = (await record("n1"))!;
      const after = await eventually("a heartbeat rewrite of n1", async () => {
        const r = (await record("n1"))!;
        return r.modRevision > before.modRevision && r.record.updatedAt > before.record.updatedAt ? r : null;
      });
      const { updatedAt: _a, ...same } = after.record;
      const { updatedAt: _b, ...was } = before.record;
      expect(same).toEqual(was);
    });
  });

  it("records an engine that cannot be reached, keeps the others, and deletes records of departed nodes", async () => {
    const withDown = DockerCluster.fromSpec(`${services.cluster},${downNode}=unix:///nonexistent/${run}.sock`);
    await withMonitor(
      { intervalMs: 300 },
      async () => {
        const down = await eventually(`a record for ${downNode}`, () => record(downNode));
        expect(down.record).toMatchObject({ name: downNode, state: "unreachable", cpus: 0, memoryBytes: 0 });
        expect(down.record.error).toMatch(/nonexistent|ENOENT|connect/i);
        // The loop carries on: later passes still refresh the reachable nodes.
        const n1 = (await record("n1"))!;
        expect(n1.record.state).toBe("ready");
        await new Promise((r) => setTimeout(r, 700));
        expect((await record(downNode))!.record.state).toBe("unreachable");
      },
      withDown,
    );
    // A monitor over the two-node cluster drops the record of the node that left.
    await withMonitor({ intervalMs: 300 }, async () => {
      await eventually(`${downNode}'s record to be deleted`, async () => (await record(downNode)) === null);
      expect((await record("n1"))!.record.state).toBe("ready");
    });
  });
});
