// The orchestrator's `node-records` readiness check, installed as `capstan orchestrator` installs it
// (cli/orchestrator.ts), on a private etcd (docs/orchestrator.md, "Readiness"):
//   - the expected node names are -cluster's, taken without any engine call (a hanging or failing
//     engine cannot delay readiness or keep it away for good);
//   - a replica that follows with a -cluster larger than the leader's stays 503, and /readyz names
//     the node whose record is missing, until a record for it appears.
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TokenVerifier } from "../../../api/auth/index.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { installOrchestrator } from "../../../cli/orchestrator.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { silentLogger } from "../../../runtime/log.ts";
import { Manager } from "../../../runtime/manager.ts";
import { openAccess } from "../../helpers/access.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { FakeCluster } from "../../helpers/fake-cluster.ts";
import { pollUntil } from "../../helpers/poll.ts";

const elector = (store: EtcdStore, identity: string) =>
  new LeaderElector({ store, key: keys.leader, identity, ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 });

function record(name: string): NodeRecord {
  return {
    name,
    address: "127.0.0.1",
    endpoint: `fake://${name}`,
    labels: {},
    state: "ready",
    cpus: 8,
    memoryBytes: 16 * 2 ** 30,
    reserved: { cpus: 0, memoryBytes: 0 },
    containers: 0,
    containersRunning: 0,
    engineVersion: "fake",
    updatedAt: new Date().toISOString(),
  };
}

describe("the orchestrator's node-records readiness check", () => {
  let etcd: EtcdProcess;
  let store: EtcdStore;
  let leader: LeaderElector;
  let manager: Manager | undefined;

  beforeAll(async () => {
    etcd = await startEtcd();
    store = new EtcdStore({ endpoints: [etcd.endpoint] });
    // Another replica leads, with a -cluster of n1 only: its node monitor wrote n1's record.
    leader = elector(store, "leader-with-n1");
    await new Promise<void>((resolve) => leader.start({ onStartedLeading: () => resolve(), onStoppedLeading: () => {} }));
    await store.put(keys.node("n1"), JSON.stringify(record("n1")));
  }, 60_000);

  afterAll(async () => {
    await manager?.stop();
    await leader?.stop();
    await store?.close();
    await etcd?.stop();
  }, 60_000);

  it("takes the names from -cluster without an engine call; a follower with a larger -cluster names the missing node", async () => {
    const cluster = new FakeCluster({ nodes: ["n1", "n2"] });
    const follower = elector(store, "follower-with-n1-n2");
    manager = new Manager({ name: "readiness-test", http: { host: "127.0.0.1", port: 0 }, elector: follower, gracefulShutdownMs: 10_000 });
    installOrchestrator(
      { store, cluster, manager, elector: follower, underLeaderKey: () => ({ add: (r) => manager!.add(r), fence: () => follower.fence() }), log: silentLogger, access: openAccess, verifier: new TokenVerifier({ store }) },
      { updateWaitMs: 500, refreshIntervalMs: 2_000, workers: 2, dependsGcMs: 300_000, nodeTimeoutMs: 60_000 },
    );
    // No engine is asked for its nodes to know which records to wait for.
    expect(cluster.calls.filter((call) => call.method === "nodes")).toEqual([]);
    await manager.start();
    const base = `http://127.0.0.1:${(manager.address() as unknown as AddressInfo).port}`;
    const readyz = async () => {
      const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) });
      return { status: res.status, body: (await res.json()) as { checks: Record<string, boolean | string> } };
    };
    const waiting = await pollUntil("a synced follower waiting for n2's record", async () => {
      const answer = await readyz();
      return answer.body.checks["informer:nodes"] === true && answer.body.checks["leader-election"] === true ? answer : undefined;
    }, 30_000);
    expect(waiting.status).toBe(503);
    expect(waiting.body.checks["node-records"]).toBe("waiting for node records: n2");
    // The leader records n2 (its -cluster now has it too): the follower is ready.
    await store.put(keys.node("n2"), JSON.stringify(record("n2")));
    const ready = await pollUntil("ready once n2 is recorded", async () => {
      const answer = await readyz();
      return answer.status === 200 ? answer : undefined;
    }, 30_000);
    expect(ready.body.checks["node-records"]).toBe(true);
  }, 60_000);
});
