// The PodGroup side of the Secret-sync handshake (docs/secret-sync.md), against the real etcd and
// engines: a container whose spec lists secret files is created but started only once the marker
// at <markerPrefix><containerId> exists without `error` and names every listed path. The markers
// are written here by hand, standing in for Secret-sync. The periodic refresh is a minute, so a
// start within about a second can only come from the markers informer.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupSpec, Harness } from "./harness.ts";

const h = new Harness({ refreshIntervalMs: 60_000 });

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await h.cleanup();
});

async function writeMarker(containerId: string, marker: Record<string, unknown>): Promise<void> {
  await h.store.put(`${h.markerPrefix}${containerId}`, JSON.stringify({ at: new Date().toISOString(), node: "n1", ...marker }));
}

describe("secret files handshake", () => {
  it("creates the container, holds its start until the marker covers every listed file, then starts it at once", async () => {
    const name = h.name("secrets");
    await h.put(groupSpec(name, { container: { secretFiles: ["config.yaml", "/etc/app/key.pem"] } }));
    const [created] = await h.until(`${name}: created`, async () => {
      const a = await h.actual(name);
      return a.length === 1 ? a : undefined;
    });
    const id = created!.c.id;
    const statusSays = (lastError: string) =>
      h.until(`${name}: pending with "${lastError}"`, async () => {
        const p = (await h.status(name))?.pods[0];
        return p?.state === "pending" && p.lastError === lastError ? p : undefined;
      }, 10_000);

    // No marker: created, never started: for 3 s, checked throughout, and a pass since.
    await statusSays("waiting for secret files");
    const stillCreated = async () => expect((await h.actual(name)).map((a) => [a.c.id, a.c.state])).toEqual([[id, "created"]]);
    await h.waitedAndLooked(name, Date.now(), 3_000, stillCreated);
    await stillCreated();
    expect((await h.status(name))!.state).toBe("pending");

    // An error marker: its text is the pod's lastError, and the container stays created.
    const error = `secret file config.yaml is not written for ${name}`;
    await writeMarker(id, { podGroup: name, files: [], error });
    await statusSays(error);
    // A marker that misses one listed path does not count either.
    await writeMarker(id, { podGroup: name, files: [{ path: "config.yaml", digest: "d1" }] });
    await statusSays("waiting for secret files");
    // Nor does a marker naming another group.
    await writeMarker(id, { podGroup: `${name}-other`, files: [{ path: "config.yaml", digest: "d1" }, { path: "/etc/app/key.pem", digest: "d2" }] });
    await h.waitedAndLooked(name, Date.now(), 1_000, stillCreated); // 1 s and a pass since
    expect((await h.actual(name)).map((a) => a.c.state)).toEqual(["created"]);

    const written = Date.now();
    await writeMarker(id, { podGroup: name, files: [{ path: "config.yaml", digest: "d1" }, { path: "/etc/app/key.pem", digest: "d2" }] });
    await h.until(`${name}: running`, async () => (await h.actual(name))[0]?.c.state === "running", 2_000, 50);
    expect(Date.now() - written).toBeLessThan(2_000);
    const s = await h.until(`${name}: status running`, async () => {
      const st = await h.status(name);
      return st?.state === "running" ? st : undefined;
    }, 5_000);
    expect(s.pods[0]).toMatchObject({ state: "running", lastError: "" });
    expect(s.pods[0]!.containers[0]!.id).toBe(id);

    // A restart of the exited container (restart policy) does not wait for a marker: the files
    // are in it already. The marker is gone, and the container is restarted anyway.
    await h.store.delete(`${h.markerPrefix}${id}`);
    await h.cluster.stop(created!.c, { timeoutSeconds: 5 });
    const restarted = await h.until(`${name}: restarted`, async () => {
      const st = await h.status(name);
      return st?.pods[0]?.restartCount === 1 && st.pods[0].state === "running" ? st : undefined;
    }, 15_000);
    expect(restarted.pods[0]!.containers[0]!.id).toBe(id);
    expect((await h.actual(name)).map((a) => [a.c.id, a.c.state])).toEqual([[id, "running"]]);
  });

  it("a spec update waits for the new container's secrets without counting the wait as a failed runtime check", async () => {
    const name = h.name("secretsroll");
    const files = (id: string) => writeMarker(id, { podGroup: name, files: [{ path: "config.yaml", digest: "d1" }] });
    await h.put(groupSpec(name, { container: { secretFiles: ["config.yaml"] } }));
    const [v1] = await h.until(`${name}: v1 created`, async () => {
      const a = await h.actual(name);
      return a.length === 1 ? a : undefined;
    });
    await files(v1!.c.id);
    await h.converged(name, 1, 1, 10_000);

    await h.updatePod(name, (pod) => (pod.containers[0]!.env = ["V=2"]));
    const [v2] = await h.until(`${name}: v2 created`, async () => {
      const a = await h.actual(name);
      return a.length === 1 && a[0]!.version === 2 ? a : undefined;
    }, 15_000);
    // Longer than the runtime check (1 s) and the update wait, and a pass since: still waiting,
    // not halted (a created container is never a failed check, however long it waits).
    await h.waitedAndLooked(name, Date.now(), 3_000, async () => {
      expect((await h.actual(name)).map((a) => [a.c.id, a.c.state])).toEqual([[v2!.c.id, "created"]]);
    });
    expect((await h.actual(name)).map((a) => [a.c.id, a.c.state])).toEqual([[v2!.c.id, "created"]]);
    const waiting = (await h.status(name))!;
    expect(waiting.state).not.toBe("failed");
    expect(waiting.pods[0]).toMatchObject({ state: "pending", lastError: "waiting for secret files", version: 2 });

    await files(v2!.c.id);
    await h.converged(name, 1, 2, 10_000);
  });

  it("starts a group without secret files as before, with no marker at all", async () => {
    const name = h.name("nosecrets");
    await h.put(groupSpec(name, { numInstances: 2 }));
    await h.converged(name, 2, 1, 15_000);
  });
});
