// DELETE /api/depends racing PodGroup writes that list the dependency (docs/dependencies.md,
// "Deleting"): whichever order the two land in, no group is left listing a dependency that is
// being deleted, unless the DELETE was forced: either the group was stored and the dependency
// stays (DELETE 409 InUse), or the dependency is going and the group was refused (409
// DependencyDeleting). Both APIs in-process at the real key layout (the PodGroup API's keys are
// fixed), on a private embedded store and on a private etcd (real network round trips between
// the reads and the transaction); no Docker is involved.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { createDependsApi } from "../../../api/orchestrator/depends.ts";
import { orchestratorInformers, type OrchestratorInformers } from "../../../api/orchestrator/informers.ts";
import { createPodGroupApi } from "../../../api/orchestrator/podgroups.ts";
import type { StoredDependency } from "../../../api/resources/dependency.ts";
import { keys, orchestratorPrefix } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import type { StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { openAccess } from "../../helpers/access.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";

describe.each(["sqlite", "etcd"] as const)("on %s", (kind) => {
  let dir: string;
  let etcd: EtcdProcess | undefined;
  let store: Store;
  let informers: OrchestratorInformers;
  let call: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: { reason?: string } }>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "capstan-depends-race-"));
    if (kind === "etcd") etcd = await startEtcd();
    store = etcd ? new EtcdStore({ endpoints: [etcd.endpoint] }) : new SqliteStore({ path: join(dir, "state.db") });
    const node: NodeRecord = {
      name: "n1",
      address: "127.0.0.1",
      endpoint: "unix:///nowhere.sock",
      labels: {},
      state: "ready",
      cpus: 64,
      memoryBytes: 64 * 2 ** 30,
      reserved: { cpus: 0, memoryBytes: 0 },
      containers: 0,
      containersRunning: 0,
      engineVersion: "test",
      updatedAt: new Date().toISOString(),
    };
    await store.put(keys.node("n1"), JSON.stringify(node));
    informers = orchestratorInformers(store);
    informers.nodes.start();
    informers.podGroups.start();
    await Promise.all([informers.nodes.waitForSync(), informers.podGroups.waitForSync()]);
    const groups = createPodGroupApi({ store, ...informers, access: openAccess });
    const depends = createDependsApi({ store, nodes: informers.nodes, prefix: orchestratorPrefix, access: openAccess });
    call = async (method, path, body) => {
      const app = path.startsWith("/api/depends") ? depends : groups;
      const res = await app.request(path, { method, headers: body === undefined ? {} : { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as { reason?: string } };
    };
  });

  afterAll(async () => {
    await informers?.nodes.stop();
    await informers?.podGroups.stop();
    await store?.close();
    await etcd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const group = (name: string, dependency: string) => ({
    name,
    namespace: "race",
    numInstances: 1,
    restartPolicy: "never",
    pod: { namespace: "race", containers: [{ image: "capstan/busybox:latest", command: ["sleep", "60"] }], dependencies: [{ podName: dependency, policy: "node" }] },
  });

  describe("DELETE /api/depends against PodGroup writes", () => {
    it("never leaves a group listing a dependency being deleted, whichever lands first", async () => {
      const outcomes = { deleteWon: 0, createWon: 0 };
      for (let i = 0; i < 40; i++) {
        const dep = `race-dep-${i}`;
        const name = `race-group-${i}`;
        expect((await call("POST", "/api/depends", { name: dep, namespace: "race", containers: [{ image: "capstan/busybox:latest" }] })).status).toBe(202);
        // Start both at once, or the POST a few milliseconds behind (the DELETE reads more before
        // its transaction, so started together it mostly loses); alternate which is sent first.
        const lag = (i >> 1) % 4;
        const later = <T>(f: () => Promise<T>) => (lag === 0 ? f() : new Promise<T>((resolve) => setTimeout(() => resolve(f()), lag)));
        const [del, create] = await (i % 2 === 0
          ? Promise.all([call("DELETE", `/api/depends?name=${dep}`), later(() => call("POST", "/api/podgroups", group(name, dep)))])
          : Promise.all([later(() => call("POST", "/api/podgroups", group(name, dep))), call("DELETE", `/api/depends?name=${dep}`)]).then(([c, d]) => [d, c] as const));
        const depKv = await store.get(keys.depends + dep);
        const groupKv = await store.get(keys.podGroup(name));
        const deleting = depKv !== null && (JSON.parse(depKv.value) as StoredDependency).deleting !== undefined;
        const listed = groupKv !== null && (JSON.parse(groupKv.value) as StoredPodGroup).pod.dependencies?.some((d) => d.podName === dep);
        const story = `round ${i}: DELETE ${del.status} ${del.body.reason ?? ""}, POST ${create.status} ${create.body.reason ?? ""}`;
        expect(deleting && listed, story).toBe(false);
        if (del.status === 202) {
          expect(create, story).toMatchObject({ status: 409, body: { reason: "DependencyDeleting" } });
          outcomes.deleteWon++;
        } else {
          expect(del, story).toMatchObject({ status: 409, body: { reason: "InUse" } });
          expect(create.status, story).toBe(202);
          outcomes.createWon++;
        }
      }
      // Both orders happened (with 40 rounds and alternating starts, one of each at the least).
      expect(outcomes.deleteWon + outcomes.createWon).toBe(40);
      expect(outcomes.deleteWon, JSON.stringify(outcomes)).toBeGreaterThan(0);
      expect(outcomes.createWon, JSON.stringify(outcomes)).toBeGreaterThan(0);
    });

    it("a spec change that adds a dependency being deleted is refused too", async () => {
      expect((await call("POST", "/api/depends", { name: "late-dep", namespace: "race", containers: [{ image: "capstan/busybox:latest" }] })).status).toBe(202);
      const g = group("late-group", "other-dep");
      expect((await call("POST", "/api/podgroups", g)).status).toBe(202);
      expect((await call("DELETE", "/api/depends?name=late-dep")).status).toBe(202);
      const patched = await call("PATCH", "/api/podgroups?name=late-group&cmd=spec", { ...g.pod, dependencies: [{ podName: "late-dep", policy: "node" }] });
      expect(patched).toMatchObject({ status: 409, body: { reason: "DependencyDeleting" } });
    });
  });
});
