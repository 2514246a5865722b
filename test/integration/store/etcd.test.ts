// EtcdStore behaviour beyond the shared contract: bounded failure against endpoints that refuse or
// never answer, and the etcd3 stream-cancel pitfall (closed watches must not poison the client).
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { StoreUnavailableError, WatchBrokenError } from "../../../adapters/store/errors.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { record, waitFor } from "./contract.ts";

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("EtcdStore against endpoints that fail", () => {
  let blackhole: Server;
  let blackholePort: number;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    // Accepts TCP connections and never answers: the HTTP/2 handshake never completes.
    blackhole = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => blackhole.listen(0, "127.0.0.1", resolve));
    blackholePort = (blackhole.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => blackhole.close(resolve));
  });

  it("fails fast with StoreUnavailableError when the port is closed", async () => {
    const store = new EtcdStore({ endpoints: [`127.0.0.1:${await closedPort()}`], callTimeoutMs: 1000 });
    const started = Date.now();
    await expect(store.get("/capstan-test/x")).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.put("/capstan-test/x", "1")).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(Date.now() - started).toBeLessThan(2500);
    await store.close();
  });

  it("gives up at the call deadline when the endpoint never answers, for calls and watches", async () => {
    const store = new EtcdStore({ endpoints: [`127.0.0.1:${blackholePort}`], callTimeoutMs: 800 });
    const started = Date.now();
    const error = await store.list("/capstan-test/").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toContain(`127.0.0.1:${blackholePort}`);
    expect(Date.now() - started).toBeLessThan(2500);

    const r = record(store, "/capstan-test/", 1);
    await waitFor("the watch to fail", () => r.errors.length > 0, 5000);
    expect(r.errors[0]).toBeInstanceOf(WatchBrokenError);
    await store.close();
  });
});

describe("EtcdStore on the shared etcd", () => {
  const prefix = `/capstan-test/${uniqueName("etcd")}/`;
  let store: EtcdStore;
  beforeAll(() => {
    store = new EtcdStore({ endpoints: loadServices().etcdEndpoints });
  });
  afterAll(async () => {
    await store.deletePrefix(prefix);
    await store.close();
  });

  it("stays healthy after many watches are closed (etcd3 counts a cancelled stream as a host failure)", async () => {
    // Three consecutive host "failures" open etcd3's circuit breaker, so close several watches
    // back to back with no successful call in between, then use the client.
    const from = (await store.revision()) + 1;
    const watches = Array.from({ length: 4 }, () => record(store, prefix, from));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await Promise.all(watches.map((w) => w.watch.close()));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await store.get(`${prefix}a`)).toBeNull();
    const r = record(store, prefix, from);
    const put = await store.put(`${prefix}a`, "1");
    await waitFor("the event", () => r.events.length === 1);
    expect(r.events[0]!.kv.modRevision).toBe(put.revision);
    expect(await store.get(`${prefix}a`)).toMatchObject({ value: "1" });
    await r.watch.close();
  });

  it("closing the store ends its watches without an error and refuses further calls", async () => {
    const other = new EtcdStore({ endpoints: loadServices().etcdEndpoints });
    const r = record(other, prefix, (await other.revision()) + 1);
    await other.close();
    await store.put(`${prefix}b`, "1");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(r.events).toEqual([]);
    expect(r.errors).toEqual([]);
    await expect(other.get(`${prefix}b`)).rejects.toThrow(/closed/);
  });
});
