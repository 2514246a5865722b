// POST and PATCH /api/podgroups count dependency pods (api/orchestrator/dependency-demand.ts) as
// cli/orchestrator.ts wires them: the PodGroup API with the dependency caches, on the in-memory
// embedded store, in-process. Two ready nodes of 1 GiB; dependency `agent` needs 400 MiB a pod.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { createDependsApi } from "../../../api/orchestrator/depends.ts";
import { dependencyInformers, type DependencyInformers } from "../../../api/orchestrator/dependency-demand.ts";
import { orchestratorInformers, type OrchestratorInformers } from "../../../api/orchestrator/informers.ts";
import { createPodGroupApi } from "../../../api/orchestrator/podgroups.ts";
import { keys, orchestratorPrefix } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import { openAccess } from "../../helpers/access.ts";
import { pollUntil } from "../../helpers/poll.ts";

const MiB = 1 << 20;
const GiB = 1 << 30;
let store: SqliteStore;
let informers: OrchestratorInformers;
let deps: DependencyInformers;
let call: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: { reason?: string; message?: string } }>;

const nodeRecord = (name: string): NodeRecord => ({
  name,
  address: "127.0.0.1",
  endpoint: "unix:///nowhere.sock",
  labels: {},
  state: "ready",
  cpus: 4,
  memoryBytes: GiB,
  reserved: { cpus: 0, memoryBytes: 0 },
  containers: 0,
  containersRunning: 0,
  engineVersion: "test",
  updatedAt: new Date(0).toISOString(),
});

beforeAll(async () => {
  store = new SqliteStore({ path: ":memory:" });
  for (const name of ["n1", "n2"]) await store.put(keys.node(name), JSON.stringify(nodeRecord(name)));
  informers = orchestratorInformers(store);
  deps = dependencyInformers(store);
  for (const informer of [informers.nodes, informers.podGroups, informers.podGroupStatuses, deps.specs, deps.statuses]) informer.start();
  await Promise.all([informers.nodes, informers.podGroups, informers.podGroupStatuses, deps.specs, deps.statuses].map((i) => i.waitForSync()));
  const groups = createPodGroupApi({ store, ...informers, access: openAccess, dependencies: deps });
  const depends = createDependsApi({ store, nodes: informers.nodes, prefix: orchestratorPrefix, access: openAccess });
  call = async (method, path, body) => {
    const app = path.startsWith("/api/depends") ? depends : groups;
    const res = await app.request(path, { method, headers: body === undefined ? {} : { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as { reason?: string; message?: string } };
  };
  expect((await call("POST", "/api/depends", { name: "agent", namespace: "dd", containers: [{ image: "img", memoryLimit: 400 * MiB }] })).status).toBe(202);
  await pollUntil("the dependency in the API's cache", async () => deps.specs.get(`${keys.depends}agent`) !== undefined, 5_000, 10);
});

afterAll(async () => {
  for (const informer of [informers?.nodes, informers?.podGroups, informers?.podGroupStatuses, deps?.specs, deps?.statuses]) await informer?.stop();
  await store?.close();
});

/** The API's demand index follows the podgroups informer: wait until it has seen `name`'s write. */
const seen = (name: string, numInstances: number) =>
  pollUntil(`${name} in the API's cache`, async () => informers.podGroups.get(keys.podGroup(name))?.numInstances === numInstances, 5_000, 10);

const group = (name: string, numInstances: number, memoryLimit: number, dependencies?: { podName: string; policy: "node" | "namespace" }[]) => ({
  name,
  namespace: "dd",
  numInstances,
  restartPolicy: "always",
  pod: { namespace: "dd", containers: [{ image: "img", memoryLimit }], ...(dependencies && { dependencies }) },
});

describe("feasibility with dependency pods, through the API", () => {
  it("a pod that fits a node alone but not with the dependency pod it needs there is refused; without the dependency it is accepted", async () => {
    const refused = await call("POST", "/api/podgroups", group("with-agent", 1, 700 * MiB, [{ podName: "agent", policy: "node" }]));
    expect(refused).toMatchObject({ status: 409, body: { reason: "InsufficientResources" } });
    expect(refused.body.message).toContain("with the dependency pods it needs there: at least 1100 MiB");
    expect(await store.get(keys.podGroup("with-agent"))).toBeNull();
    expect((await call("POST", "/api/podgroups", group("alone", 1, 700 * MiB))).status).toBe(202);
    await seen("alone", 1);
  });

  it("the totals count a dependency pod per node the instances occupy; a pod already on a node is not counted twice", async () => {
    // 2 x 300 MiB + 2 agent pods (800 MiB) + the 700 MiB group above = 2100 MiB > 2048 MiB.
    const refused = await call("POST", "/api/podgroups", group("pair", 2, 300 * MiB, [{ podName: "agent", policy: "node" }]));
    expect(refused).toMatchObject({ status: 409, body: { reason: "InsufficientResources" } });
    expect(refused.body.message).toContain("plus 800 MiB for 2 dependency pods");
    // One instance needs one agent pod: 300 + 400 + 700 = 1400 MiB fits.
    expect((await call("POST", "/api/podgroups", group("single", 1, 300 * MiB, [{ podName: "agent", policy: "node" }]))).status).toBe(202);
    await seen("single", 1);
    // A second group on the same node-level slot, one instance: it shares the agent pod (the totals stay 1 agent pod).
    expect((await call("POST", "/api/podgroups", group("second", 1, 100 * MiB, [{ podName: "agent", policy: "node" }]))).status).toBe(202);
    await seen("second", 1);
  });

  it("PATCH cmd=spec that adds a dependency is checked even though the pod keeps its size", async () => {
    expect((await call("POST", "/api/podgroups", group("grow", 1, 100 * MiB))).status).toBe(202);
    await seen("grow", 1);
    const patched = await call("PATCH", "/api/podgroups?name=grow&cmd=spec", {
      namespace: "dd",
      containers: [{ image: "img", memoryLimit: 100 * MiB }],
      dependencies: [{ podName: "agent", policy: "namespace" }],
    });
    // A namespace-level slot is a pod of its own: 700 + 300 + 100 + 100 + 400 (node-level) + 400 (namespace-level) = 2000 MiB fits;
    expect(patched.status).toBe(202);
    await pollUntil("grow's new spec in the API's cache", async () => informers.podGroups.get(keys.podGroup("grow"))?.pod.dependencies?.length === 1, 5_000, 10);
    // scaling it to 2 instances needs a second namespace-level pod: 2100 + ... no longer fits.
    const scaled = await call("PATCH", "/api/podgroups?name=grow&cmd=replica&num_instances=2");
    expect(scaled).toMatchObject({ status: 409, body: { reason: "InsufficientResources" } });
  });
});
