// A node the controller cannot reach: its containers are unknown, not missing. The controller sees
// engine n2 through a unix-socket proxy that the test cuts and restores (the real engine keeps
// running for everyone else); assertions read both engines directly.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, connect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupSpec, Harness, services } from "./harness.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-pg-proxy-"));
const proxyPath = join(dir, "n2.sock");
const target = services.engines.n2!.replace(/^unix:\/\//, "");
const sockets = new Set<Socket>();
let server: Server | undefined;

async function openProxy(): Promise<void> {
  server = createServer((client) => {
    const upstream = connect(target);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server!.listen(proxyPath, r));
}

async function cutProxy(): Promise<void> {
  const s = server;
  server = undefined;
  if (!s) return;
  const closed = new Promise((r) => s.close(r));
  for (const sock of sockets) sock.destroy();
  await closed;
}

const h = new Harness({ controllerCluster: `n1=${services.engines.n1},n2=unix://${proxyPath}` });

beforeAll(async () => {
  await openProxy();
  await h.start();
});

afterAll(async () => {
  if (!server) await openProxy();
  await h.cleanup();
  await cutProxy();
  rmSync(dir, { recursive: true, force: true });
});

describe("unreachable node", () => {
  it("keeps the node's pods (marked unknown), never redeploys them elsewhere, and picks up again when the node is back", async () => {
    const name = h.name("nodedown");
    await h.put(groupSpec(name, { numInstances: 2 }));
    const before = await h.converged(name, 2, 1);
    const onN2 = before.find((a) => a.c.node === "n2")!;
    expect(onN2).toBeDefined();

    await cutProxy();
    const s = await h.until("marked unreachable", async () => {
      const st = await h.status(name);
      return st?.pods.find((p) => p.instanceNo === onN2.instance)?.lastError.includes("unreachable") ? st : undefined;
    }, 15_000);
    expect(s.pods.find((p) => p.instanceNo === onN2.instance)).toMatchObject({ state: "running", node: "n2" }); // last known
    expect(s.state).toBe("degraded");
    // Scale up meanwhile: new instances go to the node that is reachable only.
    await h.patch(name, (g) => (g.numInstances = 3));
    await h.until("instance 3 on n1", async () => (await h.actual(name)).some((a) => a.instance === 3 && a.c.node === "n1" && a.c.state === "running"));
    // A refresh or more (2.5 s, the refresh is 2 s) and a pass since: nothing may replace the unknown pod.
    await h.waitedAndLooked(name, Date.now(), 2_500);
    const during = await h.actual(name);
    expect(during.map((a) => [a.instance, a.c.node, a.c.id]).slice(0, 2)).toEqual(before.map((a) => [a.instance, a.c.node, a.c.id]));
    expect(during).toHaveLength(3);

    await openProxy();
    const after = await h.converged(name, 3, 1, 30_000);
    expect(after.slice(0, 2).map((a) => a.c.id)).toEqual(before.map((a) => a.c.id));
    expect((await h.status(name))!.pods.every((p) => p.lastError === "")).toBe(true);
  });

  it("a removal waits for the node to confirm, then finishes", async () => {
    const name = h.name("rmdown");
    await h.put(groupSpec(name, { numInstances: 2 }));
    const before = await h.converged(name, 2, 1);
    expect(before.map((a) => a.c.node).sort()).toEqual(["n1", "n2"]);
    await cutProxy();
    await h.until("n2 unreachable", async () => (await h.status(name))?.pods.some((p) => p.lastError.includes("unreachable")), 15_000);

    await h.patch(name, (g) => (g.deleting = true));
    const s = await h.until("waiting for n2", async () => {
      const st = await h.status(name);
      return st?.state === "removing" && st.lastError.includes("waiting for node n2") ? st : undefined;
    }, 15_000);
    expect(s.pods.map((p) => p.state)).toEqual(["removed"]); // n1's pod is gone already
    expect((await h.actual(name)).map((a) => a.c.node)).toEqual(["n2"]);

    await openProxy();
    await h.until("keys gone", async () => !(await h.store.get(h.keys.podGroup(name))), 30_000);
    expect(await h.actual(name)).toEqual([]);
  });
});
