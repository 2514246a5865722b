import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";
import { Controller, ReconcileTimeoutError, type ControllerOptions } from "../../../runtime/controller.ts";
import { CacheSyncTimeoutError, Informer } from "../../../runtime/informer.ts";
import { TerminalError, type ReconcileContext, type Result } from "../../../runtime/result.ts";
import { informerSource, lowPriority, type Enqueue, type Source } from "../../../runtime/source.ts";
import { FakeListWatch } from "./fake-listwatch.ts";

/** A source the test drives by hand. */
class ManualSource implements Source {
  readonly name = "manual";
  enqueue: Enqueue | undefined;
  stopped = 0;
  start(enqueue: Enqueue) {
    this.enqueue = enqueue;
  }
  stop() {
    this.enqueue = undefined;
    this.stopped++;
  }
  add(key: string, priority = 0) {
    if (!this.enqueue) throw new Error("source not started");
    this.enqueue(key, { priority });
  }
}

type Reconcile = (key: string, ctx: ReconcileContext) => Promise<Result | void>;

function setup(reconcile: Reconcile, extra: Partial<ControllerOptions> = {}) {
  const clock = new FakeClock();
  const registry = new Registry();
  const source = new ManualSource();
  const controller = new Controller({
    name: "things",
    reconcile,
    watches: [source],
    clock,
    registry,
    queue: { backoff: { baseMs: 1_000, jitter: "none" } },
    ...extra,
  });
  const stop = new AbortController();
  const running = controller.start(stop.signal);
  return { clock, registry, source, controller, stop, running };
}

/** Let promise callbacks run until `cond` holds (fails the test if it never does). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !cond(); i++) await flushMicrotasks();
  expect(cond()).toBe(true);
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
}

describe("Controller", () => {
  it("initialises every counter to 0 and publishes max concurrency", async () => {
    const { registry, stop, running } = setup(async () => {}, { maxConcurrentReconciles: 3 });
    for (const result of ["success", "error", "requeue_after"]) {
      expect(await value(registry, "controller_runtime_reconcile_total", { controller: "things", result })).toBe(0);
    }
    for (const name of [
      "controller_runtime_reconcile_errors_total",
      "controller_runtime_terminal_reconcile_errors_total",
      "controller_runtime_reconcile_panics_total",
      "controller_runtime_reconcile_timeouts_total",
      "controller_runtime_active_workers",
    ]) {
      expect(await value(registry, name, { controller: "things" }), name).toBe(0);
    }
    expect(await value(registry, "controller_runtime_max_concurrent_reconciles", { controller: "things" })).toBe(3);
    stop.abort();
    await running;
  });

  it("success forgets the key; the attempt number starts at 1", async () => {
    const attempts: number[] = [];
    const { source, registry, stop, running } = setup(async (_k, ctx) => {
      attempts.push(ctx.attempt);
    });
    await flushMicrotasks();
    source.add("a");
    await flushMicrotasks();
    expect(attempts).toEqual([1]);
    expect(await value(registry, "controller_runtime_reconcile_total", { result: "success" })).toBe(1);
    stop.abort();
    await running;
    expect(source.stopped).toBe(1);
  });

  it("an error requeues with per-key back-off and a growing attempt number, then success resets it", async () => {
    const attempts: number[] = [];
    const { source, clock, registry, stop, running } = setup(async (_k, ctx) => {
      attempts.push(ctx.attempt);
      if (ctx.attempt < 3) throw new Error("not yet");
    });
    await flushMicrotasks();
    source.add("a");
    await flushMicrotasks();
    expect(attempts).toEqual([1]);
    await clock.advanceAsync(999);
    expect(attempts).toEqual([1]); // base back-off 1 s, no jitter
    await clock.advanceAsync(1);
    expect(attempts).toEqual([1, 2]);
    await clock.advanceAsync(2_000); // doubled
    expect(attempts).toEqual([1, 2, 3]);
    expect(await value(registry, "controller_runtime_reconcile_errors_total")).toBe(2);
    expect(await value(registry, "controller_runtime_reconcile_total", { result: "error" })).toBe(2);
    expect(await value(registry, "controller_runtime_reconcile_total", { result: "success" })).toBe(1);
    source.add("a");
    await flushMicrotasks();
    expect(attempts).toEqual([1, 2, 3, 1]); // forgotten after success
    stop.abort();
    await running;
  });

  it("a TerminalError is not retried and is counted as terminal and as an error", async () => {
    let calls = 0;
    const { source, clock, registry, stop, running } = setup(async () => {
      calls++;
      throw new TerminalError("bad spec");
    });
    await flushMicrotasks();
    source.add("a");
    await clock.advanceAsync(3_600_000);
    expect(calls).toBe(1);
    expect(await value(registry, "controller_runtime_terminal_reconcile_errors_total")).toBe(1);
    expect(await value(registry, "controller_runtime_reconcile_errors_total")).toBe(1);
    stop.abort();
    await running;
  });

  it("requeueAfterMs forgets the back-off and runs the key again after the delay", async () => {
    const attempts: number[] = [];
    const { source, clock, registry, stop, running } = setup(async (_k, ctx) => {
      attempts.push(ctx.attempt);
      if (attempts.length === 1) throw new Error("first fails");
      if (attempts.length === 2) return { requeueAfterMs: 5_000 };
      return undefined;
    });
    await flushMicrotasks();
    source.add("a");
    await clock.advanceAsync(1_000);
    expect(attempts).toEqual([1, 2]);
    await clock.advanceAsync(4_999);
    expect(attempts).toEqual([1, 2]);
    await clock.advanceAsync(1);
    expect(attempts).toEqual([1, 2, 1]); // back-off was forgotten
    expect(await value(registry, "controller_runtime_reconcile_total", { result: "requeue_after" })).toBe(1);
    stop.abort();
    await running;
  });

  it("aborts a reconcile's signal at the timeout, counts it, and requeues the resulting error", async () => {
    let reason: unknown;
    let calls = 0;
    const { source, clock, registry, stop, running } = setup(
      (_k, ctx) =>
        new Promise((_resolve, reject) => {
          calls++;
          ctx.signal.addEventListener("abort", () => {
            reason = ctx.signal.reason;
            reject(ctx.signal.reason as Error);
          });
        }),
      { reconcileTimeoutMs: 10_000 },
    );
    await flushMicrotasks();
    source.add("a");
    await clock.advanceAsync(9_999);
    expect(reason).toBeUndefined();
    await clock.advanceAsync(1);
    expect(reason).toBeInstanceOf(ReconcileTimeoutError);
    expect(await value(registry, "controller_runtime_reconcile_timeouts_total")).toBe(1);
    expect(await value(registry, "controller_runtime_reconcile_errors_total")).toBe(1);
    await clock.advanceAsync(1_000);
    expect(calls).toBe(2); // requeued with back-off
    stop.abort();
    await running;
  });

  it("counts a synchronous throw as a panic and a rejection as an error; neither escapes", async () => {
    const { source, clock, registry, stop, running } = setup(((key: string) => {
      if (key === "sync") throw new Error("sync boom");
      return Promise.reject(new Error("async boom"));
    }) as Reconcile);
    await flushMicrotasks();
    source.add("sync");
    source.add("async");
    await flushMicrotasks();
    expect(await value(registry, "controller_runtime_reconcile_panics_total")).toBe(1);
    expect(await value(registry, "controller_runtime_reconcile_errors_total")).toBe(2);
    await clock.advanceAsync(1_000);
    expect(await value(registry, "controller_runtime_reconcile_errors_total")).toBe(4); // both retried
    stop.abort();
    await running;
  });

  it("never reconciles one key on two workers at once, and coalesces adds during a reconcile into one rerun", async () => {
    const inFlight = new Map<string, number>();
    let maxPerKey = 0;
    let maxTotal = 0;
    let total = 0;
    const runs = new Map<string, number>();
    const gates: (() => void)[] = [];
    const { source, stop, running } = setup(
      async (key) => {
        const n = (inFlight.get(key) ?? 0) + 1;
        inFlight.set(key, n);
        total++;
        maxPerKey = Math.max(maxPerKey, n);
        maxTotal = Math.max(maxTotal, total);
        runs.set(key, (runs.get(key) ?? 0) + 1);
        await new Promise<void>((r) => gates.push(r));
        inFlight.set(key, n - 1);
        total--;
      },
      { maxConcurrentReconciles: 8 },
    );
    await flushMicrotasks();
    const keys = ["k0", "k1", "k2"];
    for (const k of keys) source.add(k);
    await until(() => gates.length === 3);
    for (let round = 0; round < 4; round++) {
      // While every key is being reconciled, each gets 4 more adds: they must wait, and merge.
      for (const k of keys) for (let i = 0; i < 4; i++) source.add(k);
      await flushMicrotasks();
      expect(gates).toHaveLength(3);
      for (const open of gates.splice(0)) open();
      await until(() => gates.length === 3);
    }
    for (const open of gates.splice(0)) open();
    await flushMicrotasks();
    expect(maxPerKey).toBe(1);
    expect(maxTotal).toBe(3); // three keys in flight at once, on three of the eight workers
    // The first run, then exactly one rerun per round of 4 adds: 5 runs per key, not 17.
    for (const k of keys) expect(runs.get(k)).toBe(5);
    stop.abort();
    await running;
  });

  it("stop aborts in-flight reconciles, drops queued keys, and start() resolves once the reconcile has settled", async () => {
    let sawAbort = false;
    let settled = false;
    const started: string[] = [];
    const { source, stop, running } = setup(async (key, ctx) => {
      started.push(key);
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
      sawAbort = true;
      await Promise.resolve();
      settled = true;
    });
    await flushMicrotasks();
    source.add("a");
    source.add("b"); // queued behind a (one worker)
    await flushMicrotasks();
    let done = false;
    void running.then(() => (done = true));
    stop.abort();
    await running;
    expect(sawAbort).toBe(true);
    expect(settled).toBe(true);
    expect(done).toBe(true);
    expect(started).toEqual(["a"]);
  });

  it("starts workers only after its informers synced; initial-list keys go in at low priority", async () => {
    const store = new FakeListWatch();
    const clock = new FakeClock();
    for (const k of ["a", "b", "c"]) store.put(`/t/${k}`, "{}");
    const informer = new Informer({ name: "t", source: store, prefix: "/t/", decode: (kv) => kv.value, clock });
    const order: string[] = [];
    const enqueued: { key: string; priority: number | undefined }[] = [];
    const src = informerSource(informer, (_o, key) => [key.slice(3)]);
    // Record priorities on their way into the queue.
    const recording: Source = {
      ...src,
      start: (enqueue) =>
        src.start((key, o) => {
          enqueued.push({ key, priority: o?.priority });
          enqueue(key, o);
        }),
    };
    const controller = new Controller({ name: "t", watches: [recording], clock, reconcile: async (key) => void order.push(key) });
    const stop = new AbortController();
    const running = controller.start(stop.signal);
    await flushMicrotasks();
    expect(order).toEqual([]); // informer not started: not synced, no workers
    informer.start();
    await flushMicrotasks();
    expect(order).toEqual(["a", "b", "c"]);
    expect(enqueued.every((e) => e.priority === lowPriority)).toBe(true);
    store.put("/t/d", "{}");
    await flushMicrotasks();
    expect(enqueued.at(-1)).toEqual({ key: "d", priority: 0 });
    expect(order).toEqual(["a", "b", "c", "d"]);
    stop.abort();
    await running;
    await informer.stop();
  });

  it("fresh events overtake the initial list's backlog", async () => {
    const store = new FakeListWatch();
    const clock = new FakeClock();
    for (let i = 0; i < 5; i++) store.put(`/t/old${i}`, "{}");
    const informer = new Informer({ name: "t", source: store, prefix: "/t/", decode: (kv) => kv.value, clock });
    const order: string[] = [];
    let release: () => void = () => {};
    const controller = new Controller({
      name: "t",
      watches: [informerSource(informer)],
      clock,
      reconcile: async (key) => {
        order.push(key);
        if (order.length === 1) await new Promise<void>((r) => (release = r));
      },
    });
    const stop = new AbortController();
    const running = controller.start(stop.signal);
    informer.start();
    await flushMicrotasks();
    store.put("/t/new", "{}"); // arrives while old0 is being reconciled
    await flushMicrotasks();
    release();
    await flushMicrotasks();
    expect(order.slice(0, 2)).toEqual(["/t/old0", "/t/new"]);
    expect(order).toHaveLength(6);
    stop.abort();
    await running;
    await informer.stop();
  });

  it("fails start with CacheSyncTimeoutError when sources do not sync in time, and can start again later", async () => {
    const store = new FakeListWatch();
    const clock = new FakeClock();
    const informer = new Informer({ name: "t", source: store, prefix: "/t/", decode: (kv) => kv.value, clock });
    const controller = new Controller({
      name: "t",
      watches: [informerSource(informer)],
      clock,
      cacheSyncTimeoutMs: 1_000,
      reconcile: async () => {},
    });
    const first = controller.start(new AbortController().signal);
    const check = expect(first).rejects.toBeInstanceOf(CacheSyncTimeoutError);
    await clock.advanceAsync(1_000);
    await check;
    informer.start();
    const stop = new AbortController();
    const second = controller.start(stop.signal);
    await flushMicrotasks();
    stop.abort();
    await second;
    await informer.stop();
  });
});
