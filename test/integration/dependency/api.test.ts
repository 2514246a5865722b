// The Dependency API on the real etcd (no controller running): codes and bodies of DESIGN.md
// section 6, one store transaction per write, and nothing written on a refusal.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DependencyWithStatus, StoredDependency } from "../../../api/resources/dependency.ts";
import { Harness, services, type Answer } from "./harness.ts";

const h = new Harness();

beforeAll(async () => {
  for (const node of Object.keys(services.engines)) await h.putNode(node, 4, 4 * 2 ** 30);
  h.nodes.start();
  await h.nodes.waitForSync();
});
afterAll(() => h.cleanup());

const pod = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  namespace: "capstan-test",
  containers: [{ image: services.testImage, command: ["sleep", "60"] }],
  ...extra,
});

/** Run `request`; assert the store's revision did not move (retried: other test files share etcd). */
async function noWrite(request: () => Promise<Answer>): Promise<Answer> {
  let answer: Answer | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    const before = await h.store.revision();
    answer = await request();
    if ((await h.store.revision()) === before) return answer;
  }
  throw new Error(`the store's revision moved on each of 3 attempts (answer ${JSON.stringify(answer)})`);
}

async function stored(name: string): Promise<StoredDependency | undefined> {
  const kv = await h.store.get(h.layout.dependency(name));
  return kv ? (JSON.parse(kv.value) as StoredDependency) : undefined;
}

describe("POST /api/depends (AddSpec)", () => {
  it("stores the definition at version 1 and deploys nothing", async () => {
    const name = h.name("add");
    const a = await h.call("POST", "/api/depends", pod(name));
    expect(a).toEqual({ status: 202, body: { message: expect.stringContaining("on demand"), checkUrl: `/api/depends?name=${name}` } });
    expect(await stored(name)).toMatchObject({ name, version: 1, namespace: "capstan-test" });
    const got = await h.call("GET", `/api/depends?name=${name}`);
    expect(got.status).toBe(200);
    expect(got.body as unknown as DependencyWithStatus).toMatchObject({ spec: { name, version: 1 }, state: "idle", pods: [] });
    expect(await h.actual(name)).toEqual([]);
  });

  it("accepts PascalCase keys and integer codes like the original clients", async () => {
    const name = h.name("pascal");
    const a = await h.call("POST", "/api/depends", { Name: name, Namespace: "ns", Containers: [{ Image: services.testImage }] });
    expect(a.status).toBe(202);
    expect(await stored(name)).toMatchObject({ name, namespace: "ns", containers: [{ image: services.testImage }] });
  });

  it("answers 400 naming the field, and writes nothing", async () => {
    const cases: [unknown, string][] = [
      [{ namespace: "x", containers: [{ image: "i" }] }, "name"],
      [pod("UPPER"), "name"],
      [{ ...pod(h.name("u")), colour: "red" }, "colour"],
      [pod(h.name("d"), { dependencies: [{ podName: "x", policy: "node" }] }), "dependencies"],
      [{ name: h.name("c"), namespace: "x", containers: [] }, "containers"],
      [pod(h.name("f"), { filters: ["node=n1"] }), "filters[0]"],
      ["{not json", "body"],
    ];
    for (const [body, field] of cases) {
      const a = await noWrite(() => h.call("POST", "/api/depends", body));
      expect(a.status, JSON.stringify(body)).toBe(400);
      expect(a.body.code).toBe("BadRequest");
      expect(a.body.details?.map((d) => d.path), JSON.stringify(body)).toContain(field);
    }
  });

  it("answers 409 AlreadyExists for an existing name, and writes nothing", async () => {
    const name = h.name("twice");
    expect((await h.call("POST", "/api/depends", pod(name))).status).toBe(202);
    const a = await noWrite(() => h.call("POST", "/api/depends", pod(name, { annotation: "again" })));
    expect(a).toMatchObject({ status: 409, body: { code: "NotAllowed", reason: "AlreadyExists" } });
    expect((await stored(name))?.annotation).toBeUndefined();
  });

  it("answers 409 InsufficientResources when the pod fits on no ready node (node== filters ignored)", async () => {
    const big = pod(h.name("big"), { containers: [{ image: "i", memoryLimit: 64 * 2 ** 30 }] });
    const a = await noWrite(() => h.call("POST", "/api/depends", big));
    expect(a).toMatchObject({ status: 409, body: { code: "NotAllowed", reason: "InsufficientResources" } });
    const nowhere = pod(h.name("label"), { filters: ["label:disk==ssd"] });
    expect((await noWrite(() => h.call("POST", "/api/depends", nowhere))).body.reason).toBe("InsufficientResources");
    // A dependency's pod goes where the instance runs: node==elsewhere does not make it unplaceable.
    expect((await h.call("POST", "/api/depends", pod(h.name("pinned"), { filters: ["node==elsewhere"] }))).status).toBe(202);
  });
});

describe("GET /api/depends", () => {
  it("answers 400 without a name and 404 for an unknown one", async () => {
    expect(await h.call("GET", "/api/depends")).toMatchObject({ status: 400, body: { code: "BadRequest", details: [{ path: "name" }] } });
    expect(await h.call("GET", `/api/depends?name=${h.name("none")}`)).toMatchObject({ status: 404, body: { code: "NotFound" } });
  });

  it("lists every dependency in name order at /api/depends/_all", async () => {
    const list = (await h.call("GET", "/api/depends/_all")).body as unknown as DependencyWithStatus[];
    const names = list.map((d) => d.spec.name);
    expect(names.length).toBeGreaterThan(2);
    expect(names).toEqual([...names].sort());
  });
});

describe("PUT /api/depends (UpdateSpec)", () => {
  it("bumps the version on a change of the pod, not on the same definition again", async () => {
    const name = h.name("put");
    await h.call("POST", "/api/depends", pod(name));
    const a = await h.call("PUT", "/api/depends", pod(name, { annotation: "v2" }));
    expect(a).toMatchObject({ status: 202, body: { checkUrl: `/api/depends?name=${name}` } });
    expect(await stored(name)).toMatchObject({ version: 2, annotation: "v2" });
    const same = await noWrite(() => h.call("PUT", "/api/depends", pod(name, { annotation: "v2" })));
    expect(same.status).toBe(202);
    expect(same.body.message).toMatch(/nothing to do/);
  });

  it("answers 404 for an unknown dependency and 400 for a bad body, writing nothing", async () => {
    expect((await noWrite(() => h.call("PUT", "/api/depends", pod(h.name("ghost"))))).status).toBe(404);
    const a = await noWrite(() => h.call("PUT", "/api/depends", { name: h.name("x"), namespace: "n", containers: [{ image: 3 }] }));
    expect(a).toMatchObject({ status: 400, body: { details: [{ path: "containers[0].image" }] } });
  });
});

describe("DELETE /api/depends (RemoveSpec)", () => {
  it("refuses with 409 InUse naming the PodGroups that list it, unless force=true", async () => {
    const name = h.name("used");
    await h.call("POST", "/api/depends", pod(name));
    const g1 = h.name("g");
    const g2 = h.name("g");
    await h.putGroup(g1, "ns-a", [{ podName: name, policy: "node" }], []);
    await h.putGroup(g2, "ns-b", [{ podName: "other", policy: "node" }, { podName: name, policy: "namespace" }], []);
    const a = await noWrite(() => h.call("DELETE", `/api/depends?name=${name}`));
    expect(a).toMatchObject({ status: 409, body: { code: "NotAllowed", reason: "InUse" } });
    expect(a.body.message).toContain(g1);
    expect(a.body.message).toContain(g2);
    expect((await noWrite(() => h.call("DELETE", `/api/depends?name=${name}&force=false`))).status).toBe(409);

    const forced = await h.call("DELETE", `/api/depends?name=${name}&force=true`);
    expect(forced).toMatchObject({ status: 202, body: { checkUrl: `/api/depends?name=${name}` } });
    expect((await stored(name))?.deleting).toEqual({ force: true });
    expect(((await h.call("GET", `/api/depends?name=${name}`)).body as unknown as DependencyWithStatus).state).toBe("removing");
    // PUT on a dependency being deleted is a 404; POST of its name a 409 until it is gone.
    expect((await noWrite(() => h.call("PUT", "/api/depends", pod(name, { annotation: "late" })))).status).toBe(404);
    expect((await noWrite(() => h.call("POST", "/api/depends", pod(name)))).body.reason).toBe("AlreadyExists");
    await h.deleteGroup(g1);
    await h.deleteGroup(g2);
  });

  it("counts a group being deleted as a dependent only while its status shows instances", async () => {
    const name = h.name("deldep");
    await h.call("POST", "/api/depends", pod(name));
    const g = h.name("g");
    await h.putGroup(g, "ns-a", [{ podName: name, policy: "node" }], ["n1"]);
    const key = `${h.layout.podGroups}${g}`;
    const spec = JSON.parse((await h.store.get(key))!.value) as Record<string, unknown>;
    await h.store.put(key, JSON.stringify({ ...spec, deleting: true }));
    const a = await noWrite(() => h.call("DELETE", `/api/depends?name=${name}`));
    expect(a).toMatchObject({ status: 409, body: { reason: "InUse" } });
    expect(a.body.message).toContain(`${g} (being deleted)`);
    // Its instances gone (the group's own removal may still be waiting for something): not in use.
    await h.putGroup(g, "ns-a", [{ podName: name, policy: "node" }], [], { only: "status" });
    expect((await h.call("DELETE", `/api/depends?name=${name}`)).status).toBe(202);
    expect((await stored(name))?.deleting).toEqual({ force: false });
    await h.deleteGroup(g);
  });

  it("marks an unused dependency for deletion; 404 for an unknown one; 400 for a bad force", async () => {
    const name = h.name("unused");
    await h.call("POST", "/api/depends", pod(name));
    expect((await h.call("DELETE", `/api/depends?name=${name}`)).status).toBe(202);
    expect((await stored(name))?.deleting).toEqual({ force: false });
    expect((await noWrite(() => h.call("DELETE", `/api/depends?name=${h.name("none")}`))).status).toBe(404);
    const bad = await noWrite(() => h.call("DELETE", `/api/depends?name=${name}&force=yes`));
    expect(bad).toMatchObject({ status: 400, body: { details: [{ path: "force" }] } });
    expect((await noWrite(() => h.call("DELETE", "/api/depends"))).status).toBe(400);
  });
});
