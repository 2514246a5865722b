// GETs of the PodGroup API answered from the informer caches (api/orchestrator/records.ts,
// PodGroupReader), on the shared etcd over real HTTP. The informers here read through a source whose
// watch delivers every event late (as a loaded or partitioned replica would), so each rule is
// exercised in the window where the cache is behind the store:
// - read-your-own-writes: a GET after a write through this replica shows it (it waits for the event);
// - a miss is confirmed by the store (a group created elsewhere is not a 404);
// - a cache that does not catch up within its bound is bypassed for a store read;
// - with caches current, a GET makes no store read at all; _all is in name order.
import { serve, type ServerType } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { decodePodGroupStatus, decodeStoredPodGroup, orchestratorInformers, type CachedStatus } from "../../../api/orchestrator/informers.ts";
import { createPodGroupApi } from "../../../api/orchestrator/podgroups.ts";
import { PodGroupReader } from "../../../api/orchestrator/records.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { PodGroupWithSpec, StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { Informer } from "../../../runtime/informer.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { CountingStore, lateWatch } from "../../helpers/store-doubles.ts";
import { openAccess } from "../../helpers/access.ts";

const run = uniqueName("apicache");
const n = (suffix: string) => `${run}-${suffix}`;
const q = (params: Record<string, string>) => `/api/podgroups?${new URLSearchParams(params).toString()}`;
const watchDelayMs = 400;

function groupSpec(name: string, over: Record<string, unknown> = {}) {
  return { name, namespace: "test", numInstances: 0, restartPolicy: "never", pod: { namespace: "test", containers: [{ image: "capstan/busybox:latest" }] }, ...over };
}

function stored(name: string, restartPolicy: string): StoredPodGroup {
  const now = new Date().toISOString();
  return {
    ...(groupSpec(name, { restartPolicy }) as unknown as StoredPodGroup),
    pod: { namespace: "test", name, version: 1, containers: [{ image: "capstan/busybox:latest" }] } as StoredPodGroup["pod"],
    createdAt: now,
    updatedAt: now,
  };
}

const etcd = new EtcdStore({ endpoints: loadServices().etcdEndpoints });
const counting = new CountingStore(etcd);
const slow = lateWatch(etcd, watchDelayMs);
const informers = orchestratorInformers(etcd);
// The API's spec and status caches lag by watchDelayMs; feasibility's node cache does not matter here.
const specs = new Informer<StoredPodGroup>({ name: "podgroups-late", source: slow, prefix: keys.podGroups, decode: decodeStoredPodGroup });
const statuses = new Informer<CachedStatus>({ name: "podgroup-status-late", source: slow, prefix: keys.podGroupStatus, decode: decodePodGroupStatus });
let server: ServerType | undefined;
let base = "";

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: PodGroupWithSpec & PodGroupWithSpec[] & { message?: string } }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: (await res.json()) as PodGroupWithSpec & PodGroupWithSpec[] };
}

beforeAll(async () => {
  for (const i of [informers.nodes, specs, statuses]) i.start();
  await Promise.all([informers.nodes, specs, statuses].map((i) => i.waitForSync()));
  const app = createPodGroupApi({ store: counting.store, nodes: informers.nodes, podGroups: specs, podGroupStatuses: statuses, access: openAccess });
  await new Promise<void>((resolve) => {
    server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
      base = `http://127.0.0.1:${info.port}`;
      resolve();
    });
  });
});

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await Promise.all([informers.nodes.stop(), specs.stop(), statuses.stop()]);
  await etcd.deletePrefix(keys.podGroups + run);
  await etcd.deletePrefix(keys.podGroupStatus + run);
  await etcd.close();
});

describe("GET from the informer caches", () => {
  it("reads its own writes: a GET right after POST, PATCH and DELETE shows each", async () => {
    const name = n("ryow");
    expect((await call("POST", "/api/podgroups", groupSpec(name))).status).toBe(202);
    const created = await call("GET", q({ name }));
    expect(created.status).toBe(200);
    expect(created.body.spec.restartPolicy).toBe("never");

    // The cache holds the group now; this write's event reaches it only watchDelayMs later, so an
    // answer from the cache without waiting would still say "never".
    const t0 = performance.now();
    expect((await call("PATCH", q({ name, cmd: "replica", num_instances: "0", restart_policy: "always" }))).status).toBe(202);
    const patched = await call("GET", q({ name }));
    expect(patched.body.spec.restartPolicy).toBe("always");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(watchDelayMs - 50);

    expect((await call("DELETE", q({ name }))).status).toBe(202);
    const deleting = await call("GET", q({ name }));
    expect(deleting.body.state).toBe("removing");
    expect(deleting.body.spec.deleting).toBe(true);
  });

  it("waits only for writes of the group asked for; _all waits for every write", async () => {
    const [a, b] = [n("wait-a"), n("wait-b")];
    for (const name of [a, b]) expect((await call("POST", "/api/podgroups", groupSpec(name))).status).toBe(202);
    await specs.waitForRevision((await etcd.get(keys.podGroup(b)))!.modRevision);

    expect((await call("PATCH", q({ name: a, cmd: "replica", num_instances: "0", restart_policy: "onfail" }))).status).toBe(202);
    const t0 = performance.now();
    const other = await call("GET", q({ name: b }));
    expect(other.status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(watchDelayMs / 2);
    const all = await call("GET", "/api/podgroups/_all");
    expect(all.body.find((g) => g.spec.name === a)?.spec.restartPolicy).toBe("onfail");
  });

  it("confirms a miss with the store: a group written by another replica is not a 404", async () => {
    const name = n("elsewhere");
    const { revision } = await etcd.put(keys.podGroup(name), JSON.stringify(stored(name, "onfail")));
    expect(specs.cacheRevision()).toBeLessThan(revision); // the event is still on its way
    const reads = counting.reads;
    const answer = await call("GET", q({ name }));
    expect(answer.status).toBe(200);
    expect(answer.body.spec.restartPolicy).toBe("onfail");
    expect(counting.reads).toBeGreaterThan(reads);
    const missing = await call("GET", q({ name: n("never-created") }));
    expect(missing.status).toBe(404);
  });

  it("answers from the caches alone once they are current, with the cached status; _all in name order", async () => {
    const names = [n("b-cached"), n("a-cached")];
    for (const name of names) expect((await call("POST", "/api/podgroups", groupSpec(name))).status).toBe(202);
    const { revision } = await etcd.put(keys.podGroupStatusOf(names[0]!), "not json");
    await statuses.waitForRevision(revision);
    // (The spec cache reaches the status write's revision only at a progress notification: wait for
    // the last spec write instead.)
    await specs.waitForRevision((await etcd.get(keys.podGroup(names[1]!)))!.modRevision);

    const reads = counting.reads;
    const one = await call("GET", q({ name: names[0]! }));
    expect(one.status).toBe(200);
    expect(one.body.lastError).toMatch(/not valid JSON/);
    const other = await call("GET", q({ name: names[1]! }));
    expect(other.body.state).toBe("pending");
    const all = await call("GET", "/api/podgroups/_all");
    expect(counting.reads).toBe(reads);
    const ours = all.body.map((g) => g.spec.name).filter((x) => x.startsWith(run));
    expect(ours).toEqual([...ours].sort());
    expect(ours).toEqual(expect.arrayContaining(names));
  });
});

describe("PodGroupReader", () => {
  it("reads the store when the spec cache does not reach this replica's last write in time", async () => {
    const name = n("behind");
    await etcd.put(keys.podGroup(name), JSON.stringify(stored(name, "never")));
    const firstRevision = (await etcd.put(keys.podGroup(name), JSON.stringify(stored(name, "never")))).revision;
    await specs.waitForRevision(firstRevision);
    const reader = new PodGroupReader(etcd, specs, statuses, 50);
    const { revision } = await etcd.put(keys.podGroup(name), JSON.stringify(stored(name, "always")));
    reader.wrote(name, revision);
    const t0 = performance.now();
    const answer = await reader.get(name);
    expect(performance.now() - t0).toBeLessThan(watchDelayMs - 100);
    expect(answer?.spec.restartPolicy).toBe("always");
    // Without a write of its own to wait for, the reader answers from the (stale) cache.
    expect((await new PodGroupReader(etcd, specs, statuses).get(name))?.spec.restartPolicy).toBe("never");
  });

  it("reads the store while the status cache is missing or not synced", async () => {
    const name = n("nostatus");
    await etcd.put(keys.podGroup(name), JSON.stringify(stored(name, "onfail")));
    const reads = counting.reads;
    const answer = await new PodGroupReader(counting.store, specs, undefined).get(name);
    expect(answer?.spec.restartPolicy).toBe("onfail");
    expect(counting.reads).toBeGreaterThan(reads);
  });
});
