// The node monitor against the two real engines (scripts/services) and the shared etcd: records for
// both engines with real capacity; `reserved` following a Capstan-labelled container's limits
// through Docker events (the periodic sync is set far out, so only events can explain the changes);
// no rewrite of an unchanged record until the heartbeat; an unreachable engine recorded as such
// without stopping the loop; records of nodes that left the cluster deleted.
//
// The engines n1 and n2 go by run-unique node names here (`<run>-n1=<n1's socket>`): node records
// live at fixed keys, and an orchestrator of another test sharing this etcd writes nodes/n1 too.
// For the same reason `reserved` is compared with what the engine itself reports at that moment
// (other tests may run Capstan containers on the same engines), and must include or exclude ours.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerRef } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import { createNodeMonitor, reservedLabel, type NodeMonitorOptions } from "../../../controllers/node/monitor.ts";
import { sameRecord } from "../../../controllers/node/record.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const MiB = 1 << 20;
const services = loadServices();
const run = uniqueName("nodemon");
const downNode = `${run}-down`;
const node1 = `${run}-n1`;
const node2 = `${run}-n2`;
const clusterSpec = `${node1}=${services.engines.n1},${node2}=${services.engines.n2}`;

let store: EtcdStore;
let cluster: DockerCluster;
const containers: ContainerRef[] = [];

beforeAll(() => {
  expect(Object.keys(services.engines)).toEqual(["n1", "n2"]);
  store = new EtcdStore({ endpoints: services.etcdEndpoints });
  cluster = DockerCluster.fromSpec(clusterSpec);
});

afterAll(async () => {
  await Promise.all(containers.map((c) => cluster.remove(c, { force: true }).catch(() => {})));
  await store.deletePrefix(keys.nodes + run);
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

/** What the engine says the node's up Capstan containers reserve, and whether `id` is among them. */
async function engineReserved(node: string, id: string): Promise<{ memoryBytes: number; nanoCpus: number; includes: boolean }> {
  const up = await cluster.listContainers(node, { filters: { label: [reservedLabel], status: ["running"] } });
  const details = await Promise.all(up.map((c) => cluster.inspect(c).catch(() => undefined)));
  const sum = { memoryBytes: 0, nanoCpus: 0, includes: false };
  for (const d of details) {
    if (d === undefined) continue; // removed since the list
    sum.memoryBytes += d.memoryBytes;
    sum.nanoCpus += d.nanoCpus;
    sum.includes ||= d.id === id;
  }
  return sum;
}

describe("node monitor on the real engines", () => {
  it("records both nodes, then follows a Capstan container's limits through events", async () => {
    // The periodic sync is an hour away: after the first pass, only Docker events trigger syncs.
    await withMonitor({ intervalMs: 3_600_000, debounceMs: 200 }, async () => {
      const first = new Map<string, NodeRecord>();
      for (const [name, engine] of [[node1, "n1"], [node2, "n2"]] as const) {
        const r = await eventually(`a fresh ready record for ${name}`, async () => {
          const got = await record(name);
          return got && got.record.state === "ready" && Date.parse(got.record.updatedAt) > Date.now() - 10_000 ? got.record : null;
        });
        expect(r).toMatchObject({ name, state: "ready", endpoint: services.engines[engine], address: "127.0.0.1" });
        expect(r.cpus).toBeGreaterThan(0);
        expect(r.memoryBytes).toBeGreaterThan(0);
        expect(r.engineVersion).not.toBe("");
        expect(r.error).toBeUndefined();
        first.set(name, r);
      }

      const ref = await cluster.create(node1, `${run}-reserve`, {
        image: services.testImage,
        cmd: ["sleep", "600"],
        networkMode: "none",
        labels: { [reservedLabel]: run, "io.capstan.instance": "1" },
        memoryBytes: 48 * MiB,
        nanoCpus: 250_000_000,
      });
      containers.push(ref);
      await cluster.start(ref);
      const grown = await eventually("the record to count the new container", async () => {
        const r = (await record(node1))!.record;
        const truth = await engineReserved(node1, ref.id);
        return truth.includes && r.reserved.memoryBytes === truth.memoryBytes && Math.round(r.reserved.cpus * 1e9) === truth.nanoCpus ? r : null;
      });
      expect(grown.reserved.memoryBytes).toBeGreaterThanOrEqual(48 * MiB);
      expect(grown.reserved.cpus).toBeGreaterThanOrEqual(0.25);

      await cluster.remove(ref, { force: true });
      await eventually("the record to drop the removed container", async () => {
        const r = (await record(node1))!.record;
        const truth = await engineReserved(node1, ref.id);
        return !truth.includes && r.reserved.memoryBytes === truth.memoryBytes && Math.round(r.reserved.cpus * 1e9) === truth.nanoCpus;
      });
    });
  });

  it("does not rewrite an unchanged record before the heartbeat, and does after it", async () => {
    await withMonitor({ intervalMs: 200, heartbeatMs: 3_600_000 }, async () => {
      await eventually(`a record for ${node1}`, () => record(node1));
      await new Promise((r) => setTimeout(r, 500)); // the first pass has written what changed
      const before = (await record(node1))!;
      // Every write in the next ~5 passes must change something besides updatedAt. (Other tests'
      // containers on the same engines can change the counts, so writes as such may happen.)
      const versions: NodeRecord[] = [before.record];
      const watch = store.watch(keys.node(node1), before.modRevision + 1, {
        onEvents: (events) => {
          for (const e of events) if (e.type === "put") versions.push(JSON.parse(e.kv.value) as NodeRecord);
        },
        onError: () => {},
      });
      await new Promise((r) => setTimeout(r, 1_000));
      await watch.close();
      for (let i = 1; i < versions.length; i++) {
        expect(sameRecord(versions[i - 1]!, versions[i]!), `write ${i} changed nothing but updatedAt`).toBe(false);
      }
    });
    await withMonitor({ intervalMs: 200, heartbeatMs: 600 }, async () => {
      const before = (await record(node1))!;
      const after = await eventually(`a heartbeat rewrite of ${node1}`, async () => {
        const r = (await record(node1))!;
        return r.modRevision > before.modRevision && r.record.updatedAt > before.record.updatedAt ? r : null;
      });
      const { updatedAt: _a, ...same } = after.record;
      const { updatedAt: _b, ...was } = before.record;
      expect(same).toEqual(was);
    });
  });

  it("records an engine that cannot be reached, keeps the others, and deletes records of departed nodes", async () => {
    const withDown = DockerCluster.fromSpec(`${clusterSpec},${downNode}=unix:///nonexistent/${run}.sock`);
    await withMonitor(
      { intervalMs: 300 },
      async () => {
        const down = await eventually(`a record for ${downNode}`, () => record(downNode));
        expect(down.record).toMatchObject({ name: downNode, state: "unreachable", cpus: 0, memoryBytes: 0 });
        expect(down.record.error).toMatch(/nonexistent|ENOENT|connect/i);
        // The loop carries on: later passes still refresh the reachable nodes.
        expect((await record(node1))!.record.state).toBe("ready");
        await new Promise((r) => setTimeout(r, 700));
        expect((await record(downNode))!.record.state).toBe("unreachable");
      },
      withDown,
    );
    // A monitor over the two-node cluster drops the record of the node that left.
    await withMonitor({ intervalMs: 300 }, async () => {
      await eventually(`${downNode}'s record to be deleted`, async () => (await record(downNode)) === null);
      expect((await record(node1))!.record.state).toBe("ready");
    });
  });
});
