// Controller end to end over the shared etcd: informer -> work queue -> reconcile.
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../../adapters/store/store.ts";
import { Controller } from "../../../runtime/controller.ts";
import { Informer } from "../../../runtime/informer.ts";
import { informerSource } from "../../../runtime/source.ts";
import { uniqueName } from "../../helpers/services.ts";
import { decodeObj, eventually, putMany, sharedEtcd, type Obj } from "./support.ts";

async function metric(registry: Registry, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
}

describe("Controller over etcd", () => {
  const factory = sharedEtcd();
  let store: Store;
  const prefix = `/test/${uniqueName("controller")}/`;

  beforeAll(async () => {
    store = await factory.open();
  });

  afterAll(async () => {
    await store.deletePrefix(prefix);
    await store.close();
  });

  it("reconciles each written key once, and a burst of writes during a reconcile exactly once more, seeing the last value", async () => {
    const p = `${prefix}burst/`;
    const informer = new Informer<Obj>({ name: "burst", source: store, prefix: p, decode: decodeObj });
    const runs: { key: string; value: string | undefined }[] = [];
    let gate: Promise<void> | undefined;
    let blocked: (() => void) | undefined;
    const controller = new Controller({
      name: uniqueName("burst"),
      watches: [informerSource(informer)],
      maxConcurrentReconciles: 4,
      reconcile: async (key) => {
        runs.push({ key, value: informer.get(key)?.value });
        if (key === `${p}k0` && gate) {
          const g = gate;
          gate = undefined;
          blocked?.();
          await g;
        }
      },
    });
    informer.start();
    const stop = new AbortController();
    const running = controller.start(stop.signal);
    await informer.waitForSync();

    await putMany(store, Array.from({ length: 20 }, (_, i) => [`${p}k${i}`, "v0"]));
    expect(await eventually(() => runs.length >= 20, 10_000)).toBe(true);
    await new Promise((r) => setTimeout(r, 300)); // nothing more may come
    expect(runs).toHaveLength(20);
    expect(new Set(runs.map((r) => r.key)).size).toBe(20);

    // Hold k0's reconcile open, then write k0 ten times: one more reconcile, with the last value.
    let release!: () => void;
    gate = new Promise<void>((r) => (release = r));
    const isBlocked = new Promise<void>((r) => (blocked = r));
    await store.put(`${p}k0`, "v1");
    await isBlocked;
    let last = 0;
    for (let i = 2; i <= 11; i++) last = (await store.put(`${p}k0`, `v${i}`)).revision;
    await informer.waitForRevision(last);
    release();
    expect(await eventually(() => runs.length >= 22, 10_000)).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    const k0 = runs.filter((r) => r.key === `${p}k0`).map((r) => r.value);
    expect(k0).toEqual(["v0", "v1", "v11"]);
    stop.abort();
    await running;
    await informer.stop();
  });

  it("retries a failing key with growing back-off until it succeeds", async () => {
    const p = `${prefix}retry/`;
    const registry = new Registry();
    const name = uniqueName("retry");
    const informer = new Informer<Obj>({ name: "retry", source: store, prefix: p, decode: decodeObj, registry });
    const attempts: { attempt: number; at: number }[] = [];
    const controller = new Controller({
      name,
      registry,
      watches: [informerSource(informer)],
      queue: { backoff: { baseMs: 200, jitter: "none" } },
      reconcile: async (_key, ctx) => {
        attempts.push({ attempt: ctx.attempt, at: Date.now() });
        if (ctx.attempt < 4) throw new Error(`dependency not ready (attempt ${ctx.attempt})`);
      },
    });
    informer.start();
    const stop = new AbortController();
    const running = controller.start(stop.signal);
    await informer.waitForSync();
    await store.put(`${p}flaky`, "x");
    expect(await eventually(() => attempts.length >= 4, 10_000)).toBe(true);
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4]);
    const gaps = attempts.slice(1).map((a, i) => a.at - attempts[i]!.at);
    // 200, 400, 800 ms (no jitter), give or take timer slack.
    expect(gaps[0]).toBeGreaterThanOrEqual(190);
    expect(gaps[1]).toBeGreaterThanOrEqual(390);
    expect(gaps[2]).toBeGreaterThanOrEqual(790);
    expect(gaps[2]).toBeLessThan(1_500);
    expect(await metric(registry, "controller_runtime_reconcile_errors_total", { controller: name })).toBe(3);
    expect(await metric(registry, "controller_runtime_reconcile_total", { controller: name, result: "success" })).toBe(1);
    expect(await metric(registry, "workqueue_retries_total", { name })).toBe(3);
    stop.abort();
    await running;
    await informer.stop();
  });
});
