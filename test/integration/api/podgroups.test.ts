// The PodGroup API over real HTTP against the shared etcd: bad input on every endpoint (status,
// code, the named field, and no write), happy paths asserted on the stored records, PascalCase
// bodies and integer enum codes, compare-and-swap under concurrency, feasibility against node
// records, and the OpenAPI document.
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPodGroupApi } from "../../../api/orchestrator/podgroups.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { PodGroupStatus, PodGroupWithSpec, StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { uniqueName } from "../../helpers/services.ts";
import { ApiHarness } from "./support.ts";
import { openAccess } from "../../helpers/access.ts";

const MiB = 1 << 20;
const GiB = 1 << 30;
const PiB = 2 ** 50;
const run = uniqueName("api");
const api = new ApiHarness(run);

const n = (suffix: string) => `${run}-${suffix}`;
const q = (params: Record<string, string>) => `/api/podgroups?${new URLSearchParams(params).toString()}`;

function podSpec(over: Record<string, unknown> = {}) {
  return { namespace: "test", containers: [{ image: "capstan/busybox:latest", command: ["sleep", "600"], memoryLimit: 16 * MiB, cpuLimit: 0.1 }], ...over };
}

function groupSpec(name: string, over: Record<string, unknown> = {}) {
  return { name, namespace: "test", numInstances: 1, restartPolicy: "onfail", pod: podSpec(), ...over };
}

beforeAll(async () => {
  await api.start();
  // A roomy fake node so that groups with instances are feasible whatever else the store holds.
  await api.putNode(n("big"), 64, 256 * GiB);
  for (const name of [n("base"), n("gone"), n("huge")]) {
    const over = name === n("huge") ? { numInstances: 0, pod: podSpec({ containers: [{ image: "x", memoryLimit: PiB }] }) } : {};
    expect((await api.call("POST", "/api/podgroups", groupSpec(name, over))).status).toBe(202);
  }
  expect((await api.call("DELETE", q({ name: n("gone") }))).status).toBe(202);
  await api.settle(keys.podGroup(n("gone")));
});

afterAll(async () => {
  await api.stop();
});

interface BadCase {
  what: string;
  method: string;
  path: () => string;
  body?: unknown;
  headers?: Record<string, string>;
  status: 400 | 404 | 409;
  reason?: string;
  /** Must appear in the message. */
  mentions: string;
  /** For 400: a details entry with this path. */
  detail?: string;
}

const json = { "content-type": "application/json" };
const form = { "content-type": "application/x-www-form-urlencoded" };
const tooBig = JSON.stringify({ ...groupSpec("x"), pad: "p".repeat(1 << 20) });
const withContainer = (c: Record<string, unknown>) => groupSpec(n("new"), { pod: podSpec({ containers: [{ image: "x", ...c }] }) });

const badCases: BadCase[] = [
  // GET
  { what: "GET without name", method: "GET", path: () => "/api/podgroups", status: 400, mentions: "name", detail: "name" },
  { what: "GET with an invalid name", method: "GET", path: () => q({ name: "Bad_Name" }), status: 400, mentions: "name", detail: "name" },
  { what: "GET with an empty name", method: "GET", path: () => "/api/podgroups?name=", status: 400, mentions: "name", detail: "name" },
  { what: "GET with name twice", method: "GET", path: () => `${q({ name: n("base") })}&name=x`, status: 400, mentions: "name", detail: "name" },
  { what: "GET with a bad force_update", method: "GET", path: () => q({ name: n("base"), force_update: "yes" }), status: 400, mentions: "force_update", detail: "force_update" },
  { what: "GET of an unknown group", method: "GET", path: () => q({ name: n("nope") }), status: 404, mentions: n("nope") },
  { what: "GET force_update of an unknown group", method: "GET", path: () => q({ name: n("nope"), force_update: "true" }), status: 404, mentions: n("nope") },
  // POST
  { what: "POST malformed JSON", method: "POST", path: () => "/api/podgroups", body: '{"name": ', headers: json, status: 400, mentions: "malformed JSON", detail: "body" },
  { what: "POST form-encoded", method: "POST", path: () => "/api/podgroups", body: "name=x&namespace=y", headers: form, status: 400, mentions: "content-type", detail: "content-type" },
  { what: "POST JSON sent as text/plain", method: "POST", path: () => "/api/podgroups", body: JSON.stringify(groupSpec(n("new"))), headers: { "content-type": "text/plain" }, status: 400, mentions: "content-type", detail: "content-type" },
  { what: "POST without a content type", method: "POST", path: () => "/api/podgroups", body: JSON.stringify(groupSpec(n("new"))), headers: {}, status: 400, mentions: "content-type", detail: "content-type" },
  { what: "POST over 1 MiB", method: "POST", path: () => "/api/podgroups", body: tooBig, headers: json, status: 400, mentions: "1 MiB", detail: "body" },
  { what: "POST empty body", method: "POST", path: () => "/api/podgroups", body: "", headers: json, status: 400, mentions: "empty", detail: "body" },
  { what: "POST an array", method: "POST", path: () => "/api/podgroups", body: [groupSpec(n("new"))], status: 400, mentions: "body", detail: "body" },
  { what: "POST an unknown field", method: "POST", path: () => "/api/podgroups", body: { ...groupSpec(n("new")), colour: "blue" }, status: 400, mentions: "colour", detail: "colour" },
  { what: "POST an unknown nested field", method: "POST", path: () => "/api/podgroups", body: withContainer({ imag: "y" }), status: 400, mentions: "pod.containers[0].imag", detail: "pod.containers[0].imag" },
  { what: "POST a string count", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { numInstances: "3" }), status: 400, mentions: "numInstances", detail: "numInstances" },
  { what: "POST a negative count", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { numInstances: -1 }), status: 400, mentions: "numInstances", detail: "numInstances" },
  { what: "POST a fractional count", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { numInstances: 1.5 }), status: 400, mentions: "numInstances", detail: "numInstances" },
  { what: "POST an invalid name", method: "POST", path: () => "/api/podgroups", body: groupSpec("Web_1"), status: 400, mentions: "name", detail: "name" },
  { what: "POST an invalid pod name", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { pod: podSpec({ name: "-x" }) }), status: 400, mentions: "pod.name", detail: "pod.name" },
  { what: "POST without name", method: "POST", path: () => "/api/podgroups", body: { ...groupSpec("x"), name: undefined }, status: 400, mentions: "name: is required", detail: "name" },
  { what: "POST an unknown restart policy", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { restartPolicy: "sometimes" }), status: 400, mentions: "restartPolicy", detail: "restartPolicy" },
  { what: "POST an unknown restart policy code", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { restartPolicy: 7 }), status: 400, mentions: "restartPolicy", detail: "restartPolicy" },
  { what: "POST without pod", method: "POST", path: () => "/api/podgroups", body: { ...groupSpec(n("new")), pod: undefined }, status: 400, mentions: "pod", detail: "pod" },
  { what: "POST no containers", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { pod: podSpec({ containers: [] }) }), status: 400, mentions: "pod.containers", detail: "pod.containers" },
  { what: "POST a container without image", method: "POST", path: () => "/api/podgroups", body: withContainer({ image: undefined }), status: 400, mentions: "pod.containers[0].image", detail: "pod.containers[0].image" },
  { what: "POST a negative cpu limit", method: "POST", path: () => "/api/podgroups", body: withContainer({ cpuLimit: -1 }), status: 400, mentions: "pod.containers[0].cpuLimit", detail: "pod.containers[0].cpuLimit" },
  { what: "POST a bad env entry", method: "POST", path: () => "/api/podgroups", body: withContainer({ env: ["NOEQUALS"] }), status: 400, mentions: "pod.containers[0].env[0]", detail: "pod.containers[0].env[0]" },
  { what: "POST a bad placement filter", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("new"), { pod: podSpec({ filters: ["node=x"] }) }), status: 400, mentions: "pod.filters[0]", detail: "pod.filters[0]" },
  { what: "POST keys repeated in two cases", method: "POST", path: () => "/api/podgroups", body: { ...groupSpec(n("new")), Name: n("new2") }, status: 400, mentions: "Name", detail: "Name" },
  { what: "POST an existing name", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("base")), status: 409, reason: "AlreadyExists", mentions: "already exists" },
  { what: "POST a name being deleted", method: "POST", path: () => "/api/podgroups", body: groupSpec(n("gone")), status: 409, reason: "AlreadyExists", mentions: "being deleted" },
  { what: "POST more than the cluster holds", method: "POST", path: () => "/api/podgroups", body: withContainer({ memoryLimit: PiB }), status: 409, reason: "InsufficientResources", mentions: "memory" },
  // DELETE
  { what: "DELETE without name", method: "DELETE", path: () => "/api/podgroups", status: 400, mentions: "name", detail: "name" },
  { what: "DELETE an invalid name", method: "DELETE", path: () => q({ name: "x/../y" }), status: 400, mentions: "name", detail: "name" },
  { what: "DELETE an unknown group", method: "DELETE", path: () => q({ name: n("nope") }), status: 404, mentions: n("nope") },
  // PATCH
  { what: "PATCH without cmd", method: "PATCH", path: () => q({ name: n("base") }), status: 400, mentions: "cmd", detail: "cmd" },
  { what: "PATCH an unknown cmd", method: "PATCH", path: () => q({ name: n("base"), cmd: "restart" }), status: 400, mentions: "cmd", detail: "cmd" },
  { what: "PATCH without name", method: "PATCH", path: () => q({ cmd: "replica", num_instances: "2" }), status: 400, mentions: "name", detail: "name" },
  { what: "PATCH replica without num_instances", method: "PATCH", path: () => q({ name: n("base"), cmd: "replica" }), status: 400, mentions: "num_instances", detail: "num_instances" },
  { what: "PATCH replica negative", method: "PATCH", path: () => q({ name: n("base"), cmd: "replica", num_instances: "-1" }), status: 400, mentions: "num_instances", detail: "num_instances" },
  { what: "PATCH replica fractional", method: "PATCH", path: () => q({ name: n("base"), cmd: "replica", num_instances: "2.5" }), status: 400, mentions: "num_instances", detail: "num_instances" },
  { what: "PATCH replica too many", method: "PATCH", path: () => q({ name: n("base"), cmd: "replica", num_instances: "1001" }), status: 400, mentions: "num_instances", detail: "num_instances" },
  { what: "PATCH replica unknown restart policy", method: "PATCH", path: () => q({ name: n("base"), cmd: "replica", num_instances: "1", restart_policy: "sometimes" }), status: 400, mentions: "restart_policy", detail: "restart_policy" },
  { what: "PATCH replica unknown restart code", method: "PATCH", path: () => q({ name: n("base"), cmd: "replica", num_instances: "1", restart_policy: "3" }), status: 400, mentions: "restart_policy", detail: "restart_policy" },
  { what: "PATCH replica of an unknown group", method: "PATCH", path: () => q({ name: n("nope"), cmd: "replica", num_instances: "1" }), status: 404, mentions: n("nope") },
  { what: "PATCH replica of a group being deleted", method: "PATCH", path: () => q({ name: n("gone"), cmd: "replica", num_instances: "3" }), status: 404, mentions: "being deleted" },
  { what: "PATCH replica beyond the cluster", method: "PATCH", path: () => q({ name: n("huge"), cmd: "replica", num_instances: "1" }), status: 409, reason: "InsufficientResources", mentions: "memory" },
  { what: "PATCH spec form-encoded", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: "namespace=test", headers: form, status: 400, mentions: "content-type", detail: "content-type" },
  { what: "PATCH spec malformed JSON", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: "{", headers: json, status: 400, mentions: "malformed JSON", detail: "body" },
  { what: "PATCH spec without body", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: "", headers: json, status: 400, mentions: "empty", detail: "body" },
  { what: "PATCH spec over 1 MiB", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: tooBig, headers: json, status: 400, mentions: "1 MiB", detail: "body" },
  { what: "PATCH spec an unknown field", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: podSpec({ replicas: 3 }), status: 400, mentions: "replicas", detail: "replicas" },
  { what: "PATCH spec a whole PodGroupSpec", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: groupSpec(n("base")), status: 400, mentions: "numInstances", detail: "numInstances" },
  { what: "PATCH spec wrong type", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: podSpec({ containers: "busybox" }), status: 400, mentions: "containers", detail: "containers" },
  { what: "PATCH spec a bad filter", method: "PATCH", path: () => q({ name: n("base"), cmd: "spec" }), body: podSpec({ filters: ["zone==a"] }), status: 400, mentions: "filters[0]", detail: "filters[0]" },
  { what: "PATCH spec of an unknown group", method: "PATCH", path: () => q({ name: n("nope"), cmd: "spec" }), body: podSpec(), status: 404, mentions: n("nope") },
  { what: "PATCH spec of a group being deleted", method: "PATCH", path: () => q({ name: n("gone"), cmd: "spec" }), body: podSpec({ annotation: "x" }), status: 404, mentions: "being deleted" },
  {
    what: "PATCH spec beyond the cluster",
    method: "PATCH",
    path: () => q({ name: n("base"), cmd: "spec" }),
    body: podSpec({ containers: [{ image: "x", memoryLimit: PiB }] }),
    status: 409,
    reason: "InsufficientResources",
    mentions: "memory",
  },
  // Unknown routes
  { what: "PUT (no such operation)", method: "PUT", path: () => "/api/podgroups", body: groupSpec(n("new")), status: 404, mentions: "PUT /api/podgroups" },
];

describe("bad input changes nothing", () => {
  it.each(badCases.map((c) => [c.what, c] as const))("%s", async (_what, c) => {
    const answer = await api.expectNoWrite(() => api.call(c.method, c.path(), c.body, c.headers));
    expect(answer.status).toBe(c.status);
    const code = { 400: "BadRequest", 404: "NotFound", 409: "NotAllowed" }[c.status];
    expect(answer.body.code).toBe(code);
    expect(answer.body.message).toContain(c.mentions);
    if (c.reason) expect(answer.body.reason).toBe(c.reason);
    if (c.status === 400) {
      expect(answer.body.details?.map((d) => d.path)).toContain(c.detail);
    } else {
      expect(answer.body.details).toBeUndefined();
    }
  });

  it("stored nothing under the names bad requests used", async () => {
    for (const name of [n("new"), n("new2"), n("nope"), "web_1"]) expect(await api.stored(keys.podGroup(name))).toBeNull();
    expect(await api.tasks()).toEqual([]);
  });
});

describe("happy paths", () => {
  it("POST stores the spec with server-managed fields and answers 202 with a checkUrl", async () => {
    const name = n("web");
    const answer = await api.call("POST", "/api/podgroups", groupSpec(name, { version: 9, pod: podSpec({ version: 7 }) }));
    expect(answer).toEqual({ status: 202, body: { message: expect.stringContaining(name), checkUrl: `/api/podgroups?name=${name}` } });
    const stored = await api.stored<StoredPodGroup>(keys.podGroup(name));
    expect(stored).toMatchObject({ name, namespace: "test", numInstances: 1, restartPolicy: "onfail" });
    expect(stored?.pod).toMatchObject({ name, namespace: "test", version: 1, containers: [{ image: "capstan/busybox:latest", memoryLimit: 16 * MiB }] });
    expect(stored?.version).toBeUndefined();
    expect(stored?.deleting).toBeUndefined();
    expect(Date.parse(stored!.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    expect(stored?.updatedAt).toBe(stored?.createdAt);
  });

  it("GET answers pending before the controller has written a status", async () => {
    const answer = await api.call("GET", q({ name: n("web") }));
    expect(answer.status).toBe(200);
    const group = answer.body as unknown as PodGroupWithSpec;
    expect(group).toMatchObject({ state: "pending", lastError: "", observedVersion: 0, pods: [] });
    expect(group.spec).toEqual(await api.stored(keys.podGroup(n("web"))));
  });

  it("GET joins the controller's status and hides its internal bookkeeping", async () => {
    const status: PodGroupStatus = {
      state: "running",
      lastError: "",
      updatedAt: new Date().toISOString(),
      observedVersion: 1,
      pods: [
        {
          instanceNo: 1,
          state: "running",
          lastError: "",
          restartCount: 2,
          driftCount: 0,
          version: 1,
          node: "n1",
          containers: [{ id: "abc", name: `${n("web")}.v1-i1-d0`, node: "n1", nodeIp: "127.0.0.1", ip: "", status: "running" }],
        },
      ],
      internal: { rollout: { step: 3 } },
      instanceBase: 1,
    };
    await api.store.put(keys.podGroupStatusOf(n("web")), JSON.stringify(status));
    const answer = await api.call("GET", q({ name: n("web") }));
    const { internal: _internal, instanceBase: _base, ...shown } = status;
    expect(answer.body).toEqual({ spec: await api.stored(keys.podGroup(n("web"))), ...shown });
    expect(answer.body).not.toHaveProperty("internal");
    expect(answer.body).not.toHaveProperty("instanceBase");
  });

  it("GET force_update=true writes one refresh task and answers the current state", async () => {
    const answer = await api.call("GET", q({ name: n("web"), force_update: "true" }));
    expect(answer.status).toBe(200);
    expect(answer.body.state).toBe("running");
    const tasks = await api.tasks();
    expect(tasks).toEqual([{ id: expect.any(String), kind: "refresh", podGroup: n("web"), createdAt: expect.any(String) }]);
    expect(await api.stored(keys.task(tasks[0]!.id))).toEqual(tasks[0]);
    // force_update=false writes nothing.
    await api.expectNoWrite(() => api.call("GET", q({ name: n("web"), force_update: "false" })));
    await api.store.delete(keys.task(tasks[0]!.id));
  });

  it("GET _all lists every group with its status, in name order", async () => {
    const answer = await fetch(`${api.base}/api/podgroups/_all`);
    expect(answer.status).toBe(200);
    const all = (await answer.json()) as PodGroupWithSpec[];
    const ours = all.filter((g) => g.spec.name.startsWith(run));
    expect(ours.map((g) => g.spec.name)).toEqual([n("base"), n("gone"), n("huge"), n("web")]);
    expect(ours.find((g) => g.spec.name === n("web"))?.state).toBe("running");
    expect(ours.find((g) => g.spec.name === n("gone"))?.state).toBe("removing");
    expect(ours.find((g) => g.spec.name === n("base"))?.state).toBe("pending");
    const names = all.map((g) => g.spec.name);
    expect(names).toEqual([...names].sort());
  });

  it("PATCH replica changes count and restart policy, not the pod version", async () => {
    const name = n("web");
    const before = (await api.stored<StoredPodGroup>(keys.podGroup(name)))!;
    const answer = await api.call("PATCH", q({ name, cmd: "replica", num_instances: "3", restart_policy: "always" }));
    expect(answer).toEqual({ status: 202, body: { message: expect.stringContaining("3 instance(s)"), checkUrl: `/api/podgroups?name=${name}` } });
    const after = (await api.stored<StoredPodGroup>(keys.podGroup(name)))!;
    expect(after).toMatchObject({ numInstances: 3, restartPolicy: "always", pod: before.pod, createdAt: before.createdAt });
    expect(after.updatedAt > before.updatedAt).toBe(true);

    // Integer codes; restart_policy may be left out (unchanged); zero instances is allowed.
    expect((await api.call("PATCH", q({ name, cmd: "replica", num_instances: "2", restart_policy: "0" }))).status).toBe(202);
    expect(await api.stored(keys.podGroup(name))).toMatchObject({ numInstances: 2, restartPolicy: "never" });
    expect((await api.call("PATCH", q({ name, cmd: "replica", num_instances: "0" }))).status).toBe(202);
    expect(await api.stored(keys.podGroup(name))).toMatchObject({ numInstances: 0, restartPolicy: "never" });
    expect((await api.call("PATCH", q({ name, cmd: "replica", num_instances: "1", restart_policy: "2" }))).status).toBe(202);
    expect(await api.stored(keys.podGroup(name))).toMatchObject({ numInstances: 1, restartPolicy: "onfail", pod: { version: 1 } });

    // The same values again: 202, nothing written.
    const same = await api.expectNoWrite(() => api.call("PATCH", q({ name, cmd: "replica", num_instances: "1", restart_policy: "onfail" })));
    expect(same.status).toBe(202);
    expect(same.body.message).toContain("nothing to do");
  });

  it("PATCH spec replaces the pod and bumps its version; the same spec again changes nothing", async () => {
    const name = n("web");
    const pod = podSpec({ containers: [{ image: "capstan/busybox:latest", env: ["MODE=2"], memoryLimit: 32 * MiB }], annotation: "v2" });
    const answer = await api.call("PATCH", q({ name, cmd: "spec" }), pod);
    expect(answer.status).toBe(202);
    expect(answer.body.message).toContain("pod version 2");
    const stored = (await api.stored<StoredPodGroup>(keys.podGroup(name)))!;
    expect(stored.pod).toEqual({ ...pod, name, version: 2 });
    expect(stored.numInstances).toBe(1);

    const again = await api.expectNoWrite(() => api.call("PATCH", q({ name, cmd: "spec" }), { ...pod, version: 12 }));
    expect(again.status).toBe(202);
    expect(again.body.message).toContain("nothing to do");
    expect((await api.stored<StoredPodGroup>(keys.podGroup(name)))!.pod.version).toBe(2);
  });

  it("DELETE marks the group deleting; GET shows removing; a second DELETE writes nothing", async () => {
    const name = n("web");
    const answer = await api.call("DELETE", q({ name }));
    expect(answer).toEqual({ status: 202, body: { message: `podgroup ${name} is being deleted`, checkUrl: `/api/podgroups?name=${name}` } });
    expect(await api.stored(keys.podGroup(name))).toMatchObject({ deleting: true, numInstances: 1 });
    expect((await api.call("GET", q({ name }))).body).toMatchObject({ state: "removing" });
    const again = await api.expectNoWrite(() => api.call("DELETE", q({ name })));
    expect(again.status).toBe(202);
    // Once the controller has removed both keys, the group is gone.
    await api.store.delete(keys.podGroupStatusOf(name));
    await api.store.delete(keys.podGroup(name));
    expect((await api.call("GET", q({ name }))).status).toBe(404);
  });

  it("accepts PascalCase bodies and integer enum codes, stored in canonical form", async () => {
    const name = n("pascal");
    const body = {
      Name: name,
      Namespace: "test",
      NumInstances: 1,
      RestartPolicy: 1,
      Pod: {
        Namespace: "test",
        Containers: [{ Image: "capstan/busybox:latest", MemoryLimit: 8 * MiB, CpuLimit: 0.05, Env: ["A=1"] }],
        Dependencies: [{ PodName: "redis", Policy: 1 }],
        SetupTime: 5,
      },
    };
    expect((await api.call("POST", "/api/podgroups", body)).status).toBe(202);
    expect(await api.stored(keys.podGroup(name))).toMatchObject({
      name,
      restartPolicy: "always",
      numInstances: 1,
      pod: {
        name,
        version: 1,
        setupTime: 5,
        containers: [{ image: "capstan/busybox:latest", memoryLimit: 8 * MiB, cpuLimit: 0.05, env: ["A=1"] }],
        dependencies: [{ podName: "redis", policy: "node" }],
      },
    });
    const patched = await api.call("PATCH", q({ name, cmd: "spec" }), { Namespace: "test", Containers: [{ Image: "x" }], Dependencies: [{ PodName: "redis", Policy: 0 }] });
    expect(patched.status).toBe(202);
    expect(await api.stored(keys.podGroup(name))).toMatchObject({ pod: { version: 2, containers: [{ image: "x" }], dependencies: [{ podName: "redis", policy: "namespace" }] } });
  });
});

describe("concurrency", () => {
  it("10 concurrent PATCH replica: all accepted, the stored count is one of them", async () => {
    const name = n("race");
    expect((await api.call("POST", "/api/podgroups", groupSpec(name, { numInstances: 0 }))).status).toBe(202);
    const counts = Array.from({ length: 10 }, (_, i) => i + 1);
    const answers = await Promise.all(counts.map((c) => api.call("PATCH", q({ name, cmd: "replica", num_instances: String(c) }))));
    expect(answers.map((a) => a.status)).toEqual(counts.map(() => 202));
    const stored = (await api.stored<StoredPodGroup>(keys.podGroup(name)))!;
    expect(counts).toContain(stored.numInstances);
    expect(stored.pod.version).toBe(1);
  });

  it("5 concurrent PATCH spec: no bump is lost", async () => {
    const name = n("race");
    const answers = await Promise.all(
      [1, 2, 3, 4, 5].map((i) => api.call("PATCH", q({ name, cmd: "spec" }), podSpec({ annotation: `change ${i}` }))),
    );
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202, 202]);
    const stored = (await api.stored<StoredPodGroup>(keys.podGroup(name)))!;
    expect(stored.pod.version).toBe(6);
    expect(answers.map((a) => a.body.message).sort()).toEqual([2, 3, 4, 5, 6].map((v) => expect.stringContaining(`pod version ${v}`)));
  });

  it("concurrent POSTs of one name: exactly one is created", async () => {
    const name = n("twin");
    const answers = await Promise.all([1, 2, 3, 4].map(() => api.call("POST", "/api/podgroups", groupSpec(name))));
    expect(answers.map((a) => a.status).sort()).toEqual([202, 409, 409, 409]);
    expect(answers.filter((a) => a.status === 409).every((a) => a.body.reason === "AlreadyExists")).toBe(true);
  });
});

describe("feasibility", () => {
  it("refuses a pod larger than its node record, and accepts it once the record grows", async () => {
    const node = n("pinned");
    const name = n("fit");
    await api.putNode(node, 1, 32 * MiB);
    const spec = groupSpec(name, { pod: podSpec({ filters: [`node==${node}`], containers: [{ image: "x", memoryLimit: 64 * MiB }] }) });
    const refused = await api.expectNoWrite(() => api.call("POST", "/api/podgroups", spec));
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: "NotAllowed", reason: "InsufficientResources" });
    expect(refused.body.message).toContain("one pod needs 64 MiB");

    await api.putNode(node, 1, GiB);
    expect((await api.call("POST", "/api/podgroups", spec)).status).toBe(202);
    expect(await api.stored(keys.podGroup(name))).toMatchObject({ numInstances: 1 });

    // Unreachable nodes do not count: growing the group is refused again.
    await api.putNode(node, 1, GiB, "unreachable");
    const scale = await api.expectNoWrite(() => api.call("PATCH", q({ name, cmd: "replica", num_instances: "2" })));
    expect(scale.status).toBe(409);
    expect(scale.body.reason).toBe("InsufficientResources");
    // Scaling down is always accepted.
    expect((await api.call("PATCH", q({ name, cmd: "replica", num_instances: "0" }))).status).toBe(202);
  });
});

describe("mounted on a parent app", () => {
  it("keeps its error shape for other methods and sub-paths of /api/podgroups, and shadows nothing else", async () => {
    const parent = new Hono();
    parent.route("/", createPodGroupApi({ store: api.store, ...api.informers, access: openAccess }));
    parent.get("/api/nodes", (c) => c.json([]));
    const put = await parent.request("/api/podgroups", { method: "PUT" });
    expect(put.status).toBe(404);
    expect(await put.json()).toEqual({ code: "NotFound", message: "no route for PUT /api/podgroups" });
    const sub = await parent.request("/api/podgroups/x/y");
    expect(await sub.json()).toMatchObject({ code: "NotFound" });
    expect((await parent.request("/api/nodes")).status).toBe(200);
    const missing = await parent.request(q({ name: n("nope") }));
    expect(await missing.json()).toEqual({ code: "NotFound", message: `podgroup ${n("nope")} not found` });
  });
});

describe("OpenAPI document", () => {
  it("is valid JSON listing every path, method, parameter, body and response code", async () => {
    const res = await fetch(`${api.base}/api/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/application\/json/);
    const doc = JSON.parse(await res.text()) as {
      openapi: string;
      paths: Record<string, Record<string, { parameters?: { name: string; in: string; required: boolean }[]; requestBody?: unknown; responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, { required?: string[] }> };
    };
    expect(doc.openapi).toBe("3.1.0");
    const ops = Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
    expect(ops.sort()).toEqual(
      [
        "DELETE /api/depends",
        "DELETE /api/podgroups",
        "GET /api/depends",
        "GET /api/depends/_all",
        "GET /api/nodes",
        "GET /api/openapi.json",
        "GET /api/podgroups",
        "GET /api/podgroups/_all",
        "GET /api/podgroups/logs",
        "PATCH /api/nodes",
        "PATCH /api/podgroups",
        "POST /api/depends",
        "POST /api/podgroups",
        "POST /api/podgroups/restart",
        "PUT /api/depends",
      ].sort(),
    );
    const pg = doc.paths["/api/podgroups"]!;
    expect(Object.keys(pg.get!.responses).sort()).toEqual(["200", "400", "401", "403", "404", "500", "503"]);
    expect(Object.keys(pg.post!.responses).sort()).toEqual(["202", "400", "401", "403", "409", "500", "503"]);
    expect(Object.keys(pg.delete!.responses).sort()).toEqual(["202", "400", "401", "403", "404", "500", "503"]);
    expect(Object.keys(pg.patch!.responses).sort()).toEqual(["202", "400", "401", "403", "404", "409", "500", "503"]);
    // Every operation needs a token, in either header.
    expect(Object.keys((doc as unknown as { components: { securitySchemes: object } }).components.securitySchemes).sort()).toEqual(["accessToken", "bearer"]);
    expect(pg.get!.parameters?.map((p) => [p.name, p.required])).toEqual([["name", true], ["force_update", false]]);
    expect(pg.patch!.parameters?.map((p) => p.name)).toEqual(["name", "cmd", "num_instances", "restart_policy"]);
    const logs = doc.paths["/api/podgroups/logs"]!.get!;
    expect(logs.parameters?.map((p) => [p.name, p.required])).toEqual([["name", true], ["instance", false], ["follow", false], ["tail", false], ["since", false], ["timestamps", false], ["previous", false]]);
    expect(Object.keys(logs.responses).sort()).toEqual(["200", "400", "401", "403", "404", "500", "503"]);
    expect(pg.post!.requestBody).toMatchObject({ required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/PodGroupSpec" } } } });
    // restartPolicy may be left out: it defaults to never, the original's zero value.
    expect(doc.components.schemas.PodGroupSpec?.required).toEqual(["name", "namespace", "numInstances", "pod"]);

    // Every $ref points at a schema the document holds.
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(10);
    for (const ref of new Set(refs)) expect(doc.components.schemas, ref).toHaveProperty(ref);
  });
});
