// Review finding 7, the Dependency part: an unreachable node blocks only what it may hold.
// The controllers' cluster is n1 plus "a2", a unix-socket proxy to engine n2 that this test
// stops and starts: a node that goes dark mid-test without disturbing the shared engines (other
// test files use n2 directly; this cluster never names n2, so nothing is seen twice).
//   - an UpdateSpec rollout whose current step's node dies moves on to the next pod, and takes the
//     step up again once the node is back;
//   - removal (with and without force) of a dependency with no pod on the dead node finishes
//     (the node was heard from since start, so the cache's empty list for it is complete).
import { rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { labelKeys } from "../../../controllers/dependency/naming.ts";
import { uniqueName } from "../../helpers/services.ts";
import { Harness, services } from "./harness.ts";

/** A byte pipe from a unix socket of ours to engine n2's. */
class EngineProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  constructor(
    readonly path: string,
    private readonly target: string,
  ) {}

  /** Listen (again); nothing to do while listening. */
  start(): Promise<void> {
    if (this.server) return Promise.resolve();
    rmSync(this.path, { force: true });
    const server = createServer((client) => {
      const upstream = createConnection(this.target);
      const pair = [client, upstream];
      for (const s of pair) {
        this.sockets.add(s);
        // One side gone (engine n2 restarted by another test file, or stop()): end the other too,
        // so the client sees a closed connection at once, not a silent one.
        s.on("close", () => {
          this.sockets.delete(s);
          for (const other of pair) other.destroy();
        });
        s.on("error", () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.path, () => resolve());
    });
  }

  /** Refuse new connections and cut every open one (the event stream included). */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }
}

const n2Socket = services.engines.n2!.replace(/^unix:\/\//, "");
const proxy = new EngineProxy(join(tmpdir(), `${uniqueName("a2")}.sock`), n2Socket);
const h = new Harness({ gcMs: 60_000, updateWaitMs: 3_000, refreshIntervalMs: 1_000, cluster: `n1=${services.engines.n1},a2=unix://${proxy.path}` });

beforeAll(async () => {
  await proxy.start();
  await h.start();
});
afterAll(async () => {
  await proxy.start(); // cleanup lists every node
  await h.cleanup();
  await proxy.stop();
  rmSync(proxy.path, { force: true });
});

const version = async (dep: string, node: string) => {
  const cs = await h.cluster.listContainers(node, { all: true, filters: { label: [`${labelKeys.dependency}=${dep}`] } });
  return cs.filter((c) => c.state === "running").map((c) => c.labels[labelKeys.version]);
};
const keysGone = async (dep: string) => (await h.store.get(h.layout.dependency(dep))) === null && (await h.store.get(h.layout.statusOf(dep))) === null;

describe("an unreachable node", () => {
  it("does not stall an UpdateSpec rollout: the step on the dead node is set aside, the next pod upgraded, the step taken up on return", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    const g = h.name("g");
    await h.putGroup(g, "ns", [{ podName: dep, policy: "node" }], ["a2", "n1"]);
    await h.until("v1 on a2 and n1", async () => (await version(dep, "a2")).join() === "1" && (await version(dep, "n1")).join() === "1");
    await h.updateDependency(dep, ["V=2"]);
    // Slots upgrade in key order: a2 first. Its old pod removed, the update wait running: a2 dies.
    await h.until("a2's step in its update wait", async () => {
      const ro = (await h.status(dep))?.internal?.rollout as { slot?: string; phase?: string } | undefined;
      return ro?.slot === "a2|" && ro.phase === "removed";
    });
    await proxy.stop();
    await h.until("a2 unknown", async () => (await h.pod(dep, "a2", ""))?.state === "unknown", 15_000);
    await h.until("n1 upgraded while a2 is down", async () => (await version(dep, "n1")).join() === "2", 20_000);

    await proxy.start();
    await h.until("a2 back, at version 2", async () => (await version(dep, "a2")).join() === "2", 30_000);
    await h.until("status running at v2", async () => {
      const s = await h.status(dep);
      return s?.state === "running" && s.pods.length === 2 && s.pods.every((p) => p.version === 2 && p.state === "running");
    });
    await h.deleteGroup(g);
  });

  it("does not block the removal (plain or forced) of a dependency that has no pod on it", async () => {
    await proxy.start();
    const plain = h.name("d");
    const forced = h.name("d");
    await h.createDependency(plain);
    await h.createDependency(forced);
    const gPlain = h.name("g");
    const gForced = h.name("g");
    await h.putGroup(gPlain, "ns", [{ podName: plain, policy: "node" }], ["n1"]);
    await h.putGroup(gForced, "ns", [{ podName: forced, policy: "node" }], ["n1"]);
    await h.until("both pods on n1", async () => (await version(plain, "n1")).length === 1 && (await version(forced, "n1")).length === 1);
    await h.until("a2 heard from", async () => h.dep!.cache.nodeState("a2") === "ready");

    await proxy.stop();
    await h.until("a2 unreachable", async () => h.dep!.cache.nodeState("a2") === "unreachable", 15_000);
    await h.deleteGroup(gPlain);
    await h.until("refCount 0", async () => (await h.pod(plain, "n1", ""))?.refCount === 0);
    expect((await h.call("DELETE", `/api/depends?name=${plain}`)).status).toBe(202);
    expect((await h.call("DELETE", `/api/depends?name=${forced}&force=true`)).status).toBe(202);
    await h.until("both removed, keys deleted, while a2 is down", async () => {
      return (await version(plain, "n1")).length === 0 && (await version(forced, "n1")).length === 0 && (await keysGone(plain)) && (await keysGone(forced));
    }, 20_000);
    expect(h.dep!.cache.nodeState("a2")).toBe("unreachable");
    await h.deleteGroup(gForced);
    await proxy.start();
  });
});
