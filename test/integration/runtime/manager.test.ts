// Manager over real HTTP on 127.0.0.1 and the shared etcd: probes, metrics, a mounted route, and
// the documented stop order observed from the outside.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../../adapters/store/store.ts";
import { Controller } from "../../../runtime/controller.ts";
import { Informer } from "../../../runtime/informer.ts";
import { Manager } from "../../../runtime/manager.ts";
import { informerSource } from "../../../runtime/source.ts";
import { uniqueName } from "../../helpers/services.ts";
import { decodeObj, eventually, sharedEtcd, type Obj } from "./support.ts";

describe("Manager", () => {
  const factory = sharedEtcd();
  let store: Store;
  const prefix = `/test/${uniqueName("manager")}/`;

  beforeAll(async () => {
    store = await factory.open();
  });

  afterAll(async () => {
    await store.deletePrefix(prefix);
    await store.close();
  });

  it("serves /healthz, /readyz, /metrics and mounted routes; stops in order: no new work, abort reconciles, wait, informers, HTTP", async () => {
    const order: string[] = [];
    const manager = new Manager({ name: "test", http: { host: "127.0.0.1", port: 0 }, gracefulShutdownMs: 5_000 });
    const informer = new Informer<Obj>({ name: "items", source: store, prefix, decode: decodeObj, registry: manager.registry });
    const informerStop = informer.stop.bind(informer);
    informer.stop = async () => {
      order.push("informer stop");
      await informerStop();
    };
    let inFlight: AbortSignal | undefined;
    const controllerName = uniqueName("items");
    const controller = new Controller({
      name: controllerName,
      registry: manager.registry,
      watches: [informerSource(informer)],
      reconcile: async (key, ctx) => {
        if (!key.endsWith("slow")) return;
        inFlight = ctx.signal;
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
        order.push("reconcile aborted");
        // Clean-up after the abort takes a while; the manager must wait for it.
        await new Promise((r) => setTimeout(r, 300));
        order.push("reconcile returned");
      },
    });
    manager.addInformer(informer).add(controller);
    manager.app.get("/api/ping", (c) => c.text("pong"));
    await manager.start();
    const base = `http://127.0.0.1:${manager.address()!.port}`;
    const get = (path: string) => fetch(`${base}${path}`, { signal: AbortSignal.timeout(5_000) });

    expect((await get("/healthz")).status).toBe(200);
    const ready = await get("/readyz");
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ok", checks: { accepting: true, "informer:items": true } });
    expect(await (await get("/api/ping")).text()).toBe("pong");

    await store.put(`${prefix}slow`, "x");
    expect(await eventually(() => inFlight !== undefined, 10_000)).toBe(true);
    const metrics = await (await get("/metrics")).text();
    expect(metrics).toContain(`controller_runtime_active_workers{controller="${controllerName}"} 1`);
    expect(metrics).toContain(`controller_runtime_reconcile_total{controller="${controllerName}",result="success"} 0`);
    expect(metrics).toContain(`informer_objects{name="items"} 1`);
    expect(metrics).toContain(`workqueue_adds_total{name="${controllerName}",controller="${controllerName}"}`);

    const stopping = manager.stop();
    // While the in-flight reconcile winds down: not ready, no new API work, still live.
    await eventually(() => order.includes("reconcile aborted"), 2_000, 5);
    expect((await get("/readyz")).status).toBe(503);
    expect((await get("/api/ping")).status).toBe(503);
    expect((await get("/healthz")).status).toBe(200);
    await stopping;
    expect(order).toEqual(["reconcile aborted", "reconcile returned", "informer stop"]);
    expect(inFlight!.aborted).toBe(true);
    await expect(get("/healthz")).rejects.toThrow();
    expect(await manager.finished()).toEqual({ code: 0 });
  });

  it("fails start, stops what it started, and reports exit code 1 when informers do not sync in time", async () => {
    const manager = new Manager({ name: "nosync", http: { port: 0 }, cacheSyncTimeoutMs: 300 });
    const never = new Informer<Obj>({
      name: "never",
      prefix,
      decode: decodeObj,
      source: {
        list: () => Promise.reject(new Error("store unreachable")),
        watch: () => {
          throw new Error("unreachable");
        },
        revision: () => Promise.reject(new Error("unreachable")),
      },
    });
    manager.addInformer(never);
    await expect(manager.start()).rejects.toThrow(/did not sync within 300 ms/);
    const exit = await manager.finished();
    expect(exit.code).toBe(1);
    expect(manager.address()).toBeDefined();
    await expect(fetch(`http://127.0.0.1:${manager.address()!.port}/healthz`)).rejects.toThrow();
  });
});
