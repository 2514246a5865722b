// POST /api/podgroups/restart over real HTTP on the shared etcd (docs/orchestrator.md, "Rolling
// restart"): it writes restartedAt and nothing else (pod.version stays), answers 202 with the check
// URL, 404 for an unknown group or one being deleted (writing nothing), 400 without a name. Who may
// call it is the role matrix's (test/integration/auth).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keys } from "../../../api/resources/keys.ts";
import type { StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { uniqueName } from "../../helpers/services.ts";
import { ApiHarness } from "./support.ts";

const run = uniqueName("rst");
const api = new ApiHarness(run);
const name = `${run}-web`;
const restart = (n: string) => api.call("POST", `/api/podgroups/restart?name=${encodeURIComponent(n)}`);

beforeAll(async () => {
  await api.start();
  const group = { name, namespace: "test", numInstances: 0, restartPolicy: "always", pod: { namespace: "test", containers: [{ image: "capstan/busybox:latest" }] } };
  expect((await api.call("POST", "/api/podgroups", group)).status).toBe(202);
});

afterAll(async () => {
  await api.stop();
});

describe("POST /api/podgroups/restart", () => {
  it("records the request time as restartedAt, leaves the spec and its version, and GET shows it", async () => {
    const before = (await api.stored<StoredPodGroup>(keys.podGroup(name)))!;
    expect(before.restartedAt).toBeUndefined();
    const t0 = Date.now();
    const a = await restart(name);
    expect(a.status).toBe(202);
    expect(a.body).toEqual({ message: expect.stringMatching(new RegExp(`^podgroup ${name} is being restarted, one instance at a time \\(0 instance\\(s\\), requested at `)), checkUrl: `/api/podgroups?name=${name}` });
    const after = (await api.stored<StoredPodGroup>(keys.podGroup(name)))!;
    expect(Date.parse(after.restartedAt!)).toBeGreaterThanOrEqual(t0 - 1);
    const { restartedAt: _r, updatedAt: _u, ...rest } = after;
    const { updatedAt: _u0, ...restBefore } = before;
    expect(rest).toEqual(restBefore);
    expect(after.pod.version).toBe(1);
    const got = await api.call("GET", `/api/podgroups?name=${name}`);
    expect((got.body as unknown as { spec: StoredPodGroup }).spec.restartedAt).toBe(after.restartedAt);

    // Asked again: a new time, so every pod created before it is replaced again.
    await new Promise((r) => setTimeout(r, 5));
    expect((await restart(name)).status).toBe(202);
    expect((await api.stored<StoredPodGroup>(keys.podGroup(name)))!.restartedAt).not.toBe(after.restartedAt);
  });

  it("404 for an unknown group and for one being deleted, 400 without a name; none of them writes", async () => {
    const unknown = await api.expectNoWrite(() => restart(`${run}-nope`));
    expect(unknown).toMatchObject({ status: 404, body: { code: "NotFound", message: `podgroup ${run}-nope not found` } });
    const noName = await api.expectNoWrite(() => api.call("POST", "/api/podgroups/restart"));
    expect(noName.status).toBe(400);
    expect(noName.body.details?.map((d) => d.path)).toEqual(["name"]);

    const doomed = `${run}-doomed`;
    const group = { name: doomed, namespace: "test", numInstances: 0, restartPolicy: "never", pod: { namespace: "test", containers: [{ image: "capstan/busybox:latest" }] } };
    expect((await api.call("POST", "/api/podgroups", group)).status).toBe(202);
    expect((await api.call("DELETE", `/api/podgroups?name=${doomed}`)).status).toBe(202);
    const deleting = await api.expectNoWrite(() => restart(doomed));
    expect(deleting).toMatchObject({ status: 404, body: { code: "NotFound", message: `podgroup ${doomed} is being deleted` } });
  });
});
