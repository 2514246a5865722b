// GET /api/podgroups/history against the shared etcd: every pod version is recorded in the
// transaction that writes it (a scale or a restart is not a version), newest first, at most
// historyDepth kept, a rollback is a PATCH of an older pod that becomes the next version, and a
// group created again under a deleted group's name does not show the old one's versions.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { historyDepth, type SpecVersion } from "../../../api/orchestrator/history.ts";
import { keys } from "../../../api/resources/keys.ts";
import { uniqueName } from "../../helpers/services.ts";
import { ApiHarness } from "./support.ts";

const run = uniqueName("hist");
const api = new ApiHarness(run);
const GiB = 1 << 30;
const n = (s: string) => `${run}-${s}`;
const q = (path: string, params: Record<string, string>) => `${path}?${new URLSearchParams(params).toString()}`;
const pod = (word: string) => ({ namespace: "test", containers: [{ image: "capstan/busybox:latest", command: ["echo", word], memoryLimit: 16 << 20 }] });

beforeAll(async () => {
  await api.start();
  await api.putNode(n("big"), 64, 256 * GiB);
});
afterAll(async () => {
  await api.stop();
});

const history = async (name: string) => {
  const r = await api.call("GET", q("/api/podgroups/history", { name }));
  expect(r.status).toBe(200);
  return r.body as unknown as SpecVersion[];
};

describe("spec history", () => {
  it("records each pod version, not scales or restarts, and a rollback becomes the next version", async () => {
    const name = n("a");
    expect((await api.call("POST", "/api/podgroups", { name, namespace: "test", numInstances: 1, restartPolicy: "never", pod: pod("one") })).status).toBe(202);
    expect((await api.call("PATCH", q("/api/podgroups", { name, cmd: "spec" }), pod("two"))).status).toBe(202);
    expect((await api.call("PATCH", q("/api/podgroups", { name, cmd: "replica", num_instances: "2" }))).status).toBe(202);
    expect((await api.call("POST", q("/api/podgroups/restart", { name }))).status).toBe(202);
    // The same spec again is no new version.
    expect((await api.call("PATCH", q("/api/podgroups", { name, cmd: "spec" }), pod("two"))).status).toBe(202);
    let h = await history(name);
    expect(h.map((e) => [e.version, e.pod.containers[0]!.command])).toEqual([
      [2, ["echo", "two"]],
      [1, ["echo", "one"]],
    ]);
    // Roll back to version 1: its pod, as version 3.
    const { version: _v, ...first } = h[1]!.pod;
    expect((await api.call("PATCH", q("/api/podgroups", { name, cmd: "spec" }), first)).status).toBe(202);
    h = await history(name);
    expect(h.map((e) => e.version)).toEqual([3, 2, 1]);
    expect(h[0]!.pod.containers[0]!.command).toEqual(["echo", "one"]);
    expect(((await api.stored<{ pod: { version: number } }>(keys.podGroup(name)))!).pod.version).toBe(3);
  });

  it(`keeps the newest ${historyDepth} versions`, async () => {
    const name = n("deep");
    expect((await api.call("POST", "/api/podgroups", { name, namespace: "test", numInstances: 0, restartPolicy: "never", pod: pod("v1") })).status).toBe(202);
    for (let v = 2; v <= historyDepth + 3; v++) expect((await api.call("PATCH", q("/api/podgroups", { name, cmd: "spec" }), pod(`v${v}`))).status).toBe(202);
    const h = await history(name);
    expect(h).toHaveLength(historyDepth);
    expect(h[0]!.version).toBe(historyDepth + 3);
    expect(h.at(-1)!.version).toBe(4);
    const { items } = await api.store.list(`${keys.podGroupHistory}${name}/`);
    expect(items).toHaveLength(historyDepth);
  });

  it("does not show an earlier group's versions under a reused name; 404 and 400 as GET", async () => {
    const name = n("again");
    expect((await api.call("POST", "/api/podgroups", { name, namespace: "test", numInstances: 0, restartPolicy: "never", pod: pod("old1") })).status).toBe(202);
    expect((await api.call("PATCH", q("/api/podgroups", { name, cmd: "spec" }), pod("old2"))).status).toBe(202);
    // The controller's removal would clear the history with the spec; a leftover must not show.
    await api.store.delete(keys.podGroup(name));
    expect((await api.call("POST", "/api/podgroups", { name, namespace: "test", numInstances: 0, restartPolicy: "never", pod: pod("new1") })).status).toBe(202);
    const h = await history(name);
    expect(h.map((e) => [e.version, e.pod.containers[0]!.command![1]])).toEqual([[1, "new1"]]);
    expect((await api.call("GET", q("/api/podgroups/history", { name: n("nope") }))).status).toBe(404);
    const bad = await api.call("GET", "/api/podgroups/history");
    expect(bad.status).toBe(400);
    expect(bad.body.details?.[0]?.path).toBe("name");
  });
});
