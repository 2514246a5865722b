// Controller: sources -> work queue of keys -> N workers calling reconcile(key).
//
// controller-runtime's loop, with our Result contract (result.ts; docs/runtime.md, "Controller"):
// - start: start the sources, wait (bounded) until every source has synced, then run the workers;
// - a key is never reconciled by two workers at once, and changes that arrive while it is being
//   reconciled coalesce into one more run (the work queue keeps both invariants);
// - every get() is paired with done() in a finally, whatever the reconcile did;
// - a reconcile runs with an AbortSignal that fires on its timeout (default 60 s), on controller
//   stop, and on loss of leadership; a reconcile must honour it: the worker waits for the
//   reconcile to settle before it releases the key, because releasing it early would let a second
//   reconcile of the same key run concurrently with the first;
// - synchronous throws, rejected promises and TerminalErrors are all caught and counted; nothing a
//   reconcile does can crash the process through this loop.
//
// A controller can be started again after its start() has returned (a new leadership term): each
// run gets a fresh work queue, and its sources replay their state (informers replay their cache as
// initial-list adds), so nothing from a previous term is lost or needed.
import { randomUUID } from "node:crypto";
import { Registry } from "prom-client";
import { onAbort } from "./abort-fanout.ts";
import { realClock, type Clock } from "./clock.ts";
import { silentLogger, type Logger } from "./log.ts";
import { counter, gauge, histogram } from "./metrics.ts";
import { isTerminalError, type ReconcileContext, type Reconciler, type Result } from "./result.ts";
import type { EnqueueOptions, Source } from "./source.ts";
import { PrometheusWorkQueueMetrics, WorkQueue, type BackoffOptions as RetryBackoffOptions } from "./workqueue/index.ts";

export interface ControllerOptions {
  /** Names the controller in logs and in the `controller` metric label; unique per process. */
  name: string;
  reconcile: Reconciler;
  /** Where keys come from: informerSource(informer, map) and any other Source. */
  watches?: Source[];
  /** Workers, i.e. reconciles in flight at once (default 1, as controller-runtime). */
  maxConcurrentReconciles?: number;
  /** Per-reconcile deadline, delivered as an abort of ctx.signal (default 60 s). */
  reconcileTimeoutMs?: number;
  /** How long start() waits for the sources to sync before it fails (default 2 min). */
  cacheSyncTimeoutMs?: number;
  /** Retry back-off and priority aging of the work queue. */
  queue?: { backoff?: RetryBackoffOptions; agingMsPerPriority?: number };
  clock?: Clock;
  log?: Logger;
  registry?: Registry;
}

export class ReconcileTimeoutError extends Error {
  override readonly name = "ReconcileTimeoutError";
  constructor(
    readonly key: string,
    readonly timeoutMs: number,
  ) {
    super(`reconcile of ${key} exceeded ${timeoutMs} ms`);
  }
}

// controller-runtime's reconcile_time_seconds buckets (40 buckets, 5 ms .. 60 s).
const reconcileTimeBuckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0,
  2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

type ResultLabel = "success" | "error" | "requeue_after";

export class Controller {
  readonly name: string;
  private readonly reconcile: Reconciler;
  private readonly watches: Source[];
  private readonly workers: number;
  private readonly reconcileTimeoutMs: number;
  private readonly cacheSyncTimeoutMs: number;
  private readonly queueOptions: ControllerOptions["queue"];
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly queueMetrics: PrometheusWorkQueueMetrics;
  private queue: WorkQueue | undefined;
  private running = false;

  private readonly m: {
    total: ReturnType<typeof counter<"controller" | "result">>;
    errors: ReturnType<typeof counter<"controller">>;
    terminal: ReturnType<typeof counter<"controller">>;
    panics: ReturnType<typeof counter<"controller">>;
    timeouts: ReturnType<typeof counter<"controller">>;
    time: ReturnType<typeof histogram<"controller">>;
    maxConcurrent: ReturnType<typeof gauge<"controller">>;
    active: ReturnType<typeof gauge<"controller">>;
  };

  constructor(opts: ControllerOptions) {
    if (!opts.name) throw new TypeError("controller: name is required");
    this.name = opts.name;
    this.reconcile = opts.reconcile;
    this.watches = opts.watches ?? [];
    this.workers = opts.maxConcurrentReconciles ?? 1;
    this.reconcileTimeoutMs = opts.reconcileTimeoutMs ?? 60_000;
    this.cacheSyncTimeoutMs = opts.cacheSyncTimeoutMs ?? 120_000;
    if (!Number.isInteger(this.workers) || this.workers < 1) {
      throw new RangeError(`controller ${opts.name}: maxConcurrentReconciles must be an integer >= 1`);
    }
    if (!(this.reconcileTimeoutMs > 0)) throw new RangeError(`controller ${opts.name}: reconcileTimeoutMs must be > 0`);
    this.queueOptions = opts.queue;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.log ?? silentLogger).child({ controller: opts.name });
    const registry = opts.registry ?? new Registry();
    this.queueMetrics = PrometheusWorkQueueMetrics.for(registry);
    const c = ["controller"] as const;
    this.m = {
      total: counter(registry, {
        name: "controller_runtime_reconcile_total",
        help: "Total number of reconciliations per controller",
        labelNames: ["controller", "result"],
      }),
      errors: counter(registry, {
        name: "controller_runtime_reconcile_errors_total",
        help: "Total number of reconciliation errors per controller",
        labelNames: c,
      }),
      terminal: counter(registry, {
        name: "controller_runtime_terminal_reconcile_errors_total",
        help: "Total number of terminal reconciliation errors per controller",
        labelNames: c,
      }),
      panics: counter(registry, {
        name: "controller_runtime_reconcile_panics_total",
        help: "Total number of reconciliation panics (synchronous throws) per controller",
        labelNames: c,
      }),
      timeouts: counter(registry, {
        name: "controller_runtime_reconcile_timeouts_total",
        help: "Total number of reconciliation timeouts per controller",
        labelNames: c,
      }),
      time: histogram(registry, {
        name: "controller_runtime_reconcile_time_seconds",
        help: "Length of time per reconciliation per controller",
        labelNames: c,
        buckets: reconcileTimeBuckets,
      }),
      maxConcurrent: gauge(registry, {
        name: "controller_runtime_max_concurrent_reconciles",
        help: "Maximum number of concurrent reconciles per controller",
        labelNames: c,
      }),
      active: gauge(registry, {
        name: "controller_runtime_active_workers",
        help: "Number of currently used workers per controller",
        labelNames: c,
      }),
    };
    // Counters start at 0 so that rate() works from the first scrape (controller-runtime initMetrics).
    const l = { controller: this.name };
    for (const result of ["success", "error", "requeue_after"] satisfies ResultLabel[]) this.m.total.inc({ ...l, result }, 0);
    for (const k of ["errors", "terminal", "panics", "timeouts"] as const) this.m[k].inc(l, 0);
    this.m.maxConcurrent.set(l, this.workers);
    this.m.active.set(l, 0);
  }

  /**
   * Run until `signal` aborts. Resolves once every worker has exited, i.e. every in-flight
   * reconcile has settled (reconciles see the same abort through ctx.signal). Rejects, having
   * cleaned up, when the sources do not sync within cacheSyncTimeoutMs.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error(`controller ${this.name} is already running`);
    this.running = true;
    const queue = new WorkQueue({
      name: this.name,
      clock: this.clock,
      metrics: this.queueMetrics,
      ...(this.queueOptions?.backoff && { backoff: this.queueOptions.backoff }),
      ...(this.queueOptions?.agingMsPerPriority !== undefined && { agingMsPerPriority: this.queueOptions.agingMsPerPriority }),
    });
    this.queue = queue;
    const enqueue = (key: string, options?: EnqueueOptions) => queue.add(key, options);
    const onAbort = () => queue.shutDown();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      for (const source of this.watches) await source.start(enqueue);
      const syncing = this.watches.map((s) => s.waitForSync?.(signal, this.cacheSyncTimeoutMs));
      try {
        await Promise.all(syncing);
      } catch (e) {
        if (signal.aborted) return;
        this.log.error({ err: e }, "sources did not sync; controller not started");
        throw e;
      }
      if (signal.aborted) return;
      this.log.info({ workers: this.workers }, "starting workers");
      await Promise.all(Array.from({ length: this.workers }, () => this.worker(queue, signal)));
      this.log.info("all workers finished");
    } finally {
      signal.removeEventListener("abort", onAbort);
      queue.shutDown();
      for (const source of this.watches) {
        try {
          await source.stop();
        } catch (e) {
          this.log.warn({ err: e, source: source.name }, "source did not stop cleanly");
        }
      }
      this.queue = undefined;
      this.running = false;
    }
  }

  /** Put a key on the queue (ignored while the controller is not running). */
  enqueue(key: string, options?: EnqueueOptions): void {
    this.queue?.add(key, options);
  }

  private async worker(queue: WorkQueue, signal: AbortSignal): Promise<void> {
    for (;;) {
      const item = await queue.get();
      if (item.shutdown) return;
      try {
        // After stop, keys still queued are dropped, not reconciled with a dead signal: the work
        // is level-triggered and the next start (or the next leader) relists everything.
        if (signal.aborted) continue;
        await this.reconcileHandler(queue, item.key, item.priority, signal);
      } finally {
        queue.done(item.key);
      }
    }
  }

  private async reconcileHandler(queue: WorkQueue, key: string, priority: number, stop: AbortSignal): Promise<void> {
    const l = { controller: this.name };
    const reconcileAbort = new AbortController();
    // One listener on the controller's signal for all reconciles in flight (abort-fanout.ts).
    const unsubscribe = onAbort(stop, () => reconcileAbort.abort(stop.reason));
    let timedOut = false;
    const timer = this.clock.setTimer(this.reconcileTimeoutMs, () => {
      timedOut = true;
      reconcileAbort.abort(new ReconcileTimeoutError(key, this.reconcileTimeoutMs));
      this.log.warn({ key, timeoutMs: this.reconcileTimeoutMs }, "reconcile timed out; waiting for it to honour its signal");
    });
    const ctx: ReconcileContext = {
      signal: reconcileAbort.signal,
      log: this.log.child({ key, reconcileID: randomUUID() }),
      attempt: queue.numRequeues(key) + 1,
    };
    const startedAt = this.clock.now();
    this.m.active.inc(l);
    let result: Result | void = undefined;
    let failure: { error: unknown; panic: boolean } | undefined;
    try {
      let pending: Promise<Result | void>;
      try {
        pending = this.reconcile(key, ctx);
      } catch (error) {
        // A synchronous throw from a non-async reconciler: controller-runtime's "panic".
        failure = { error, panic: true };
        pending = Promise.resolve();
      }
      // Awaiting here is what keeps a rejection from becoming an unhandled rejection.
      if (!failure) result = await pending;
    } catch (error) {
      failure = { error, panic: false };
    } finally {
      timer.cancel();
      unsubscribe();
      this.m.active.dec(l);
      this.m.time.observe(l, (this.clock.now() - startedAt) / 1000);
    }
    if (timedOut) this.m.timeouts.inc(l);

    if (failure) {
      this.m.errors.inc(l);
      this.m.total.inc({ ...l, result: "error" });
      if (failure.panic) this.m.panics.inc(l);
      if (isTerminalError(failure.error)) {
        this.m.terminal.inc(l);
        ctx.log.error({ err: failure.error, attempt: ctx.attempt }, "reconcile failed terminally; not requeued");
        return;
      }
      ctx.log.error({ err: failure.error, attempt: ctx.attempt, panic: failure.panic }, "reconcile failed; requeued with back-off");
      queue.addRateLimited(key, { priority });
      return;
    }
    const after = result?.requeueAfterMs;
    if (after !== undefined && Number.isFinite(after) && after > 0) {
      queue.forget(key);
      queue.add(key, { afterMs: after, priority: result?.priority ?? priority });
      this.m.total.inc({ ...l, result: "requeue_after" });
      return;
    }
    queue.forget(key);
    this.m.total.inc({ ...l, result: "success" });
  }
}
