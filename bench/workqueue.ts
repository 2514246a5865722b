// Work queue throughput: keys per second through add -> get -> done, with 1 and 8 concurrent async
// workers, real clock, Prometheus metrics on. Baseline in the same run and the same harness: a bare
// async FIFO (array + Set dedup + waiter list), the least any async queue can do.
//
// One op = one key's full cycle: add(key), await get(), done(key). The producer adds a batch of
// BATCH distinct keys (one in ten at priority -100, as an initial list would), then yields a
// macrotask; the workers drain it, each awaiting one microtask per key as stand-in work, so with 8
// workers up to 8 keys are in processing at once.
//
// Run: npm run bench:workqueue   (WQ_OPS=200000 for a quick run)
import { Registry } from "prom-client";
import { report } from "./lib/report.ts";
import { PrometheusWorkQueueMetrics, WorkQueue } from "../runtime/workqueue/index.ts";

const OPS = Number(process.env.WQ_OPS ?? 1_000_000);
const BATCH = 1_000;
const DISTINCT_KEYS = 10_000;
const ROUNDS = 3;

const keys = Array.from({ length: DISTINCT_KEYS }, (_, i) => `default/pod-${i}`);

interface BenchQueue {
  add(key: string, opts?: { priority?: number }): void;
  get(): Promise<{ shutdown: false; key: string } | { shutdown: true }>;
  done(key: string): void;
  shutDown(): void;
}

/** The minimum an async work queue needs: FIFO order, dedup, and a way to wait when empty. */
class BareFifo implements BenchQueue {
  private items: string[] = [];
  private head = 0;
  private readonly queued = new Set<string>();
  private readonly waiters: ((r: { shutdown: false; key: string } | { shutdown: true }) => void)[] = [];
  private closed = false;

  add(key: string): void {
    if (this.closed || this.queued.has(key)) return;
    const w = this.waiters.shift();
    if (w !== undefined) return w({ shutdown: false, key });
    this.queued.add(key);
    this.items.push(key);
  }

  get(): Promise<{ shutdown: false; key: string } | { shutdown: true }> {
    if (this.head < this.items.length) {
      const key = this.items[this.head++]!;
      if (this.head === this.items.length) {
        this.items = [];
        this.head = 0;
      }
      this.queued.delete(key);
      return Promise.resolve({ shutdown: false, key });
    }
    if (this.closed) return Promise.resolve({ shutdown: true });
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(): void {}

  shutDown(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w({ shutdown: true });
  }
}

const nextMacrotask = () => new Promise<void>((resolve) => setImmediate(resolve));

async function run(queue: BenchQueue, workers: number, ops: number): Promise<number> {
  let processed = 0;
  const worker = async () => {
    for (;;) {
      const r = await queue.get();
      if (r.shutdown) return;
      await undefined; // the reconcile
      queue.done(r.key);
      processed++;
    }
  };
  const start = performance.now();
  const running = Array.from({ length: workers }, worker);
  let added = 0;
  while (added < ops) {
    const n = Math.min(BATCH, ops - added);
    for (let i = 0; i < n; i++, added++) {
      queue.add(keys[added % DISTINCT_KEYS]!, added % 10 === 0 ? { priority: -100 } : undefined);
    }
    await nextMacrotask();
  }
  while (processed < ops) await nextMacrotask();
  queue.shutDown();
  await Promise.all(running);
  const seconds = (performance.now() - start) / 1000;
  if (processed !== ops) throw new Error(`processed ${processed} of ${ops}`);
  return ops / seconds;
}

/** Best of ROUNDS, after a warm-up round, so JIT and GC noise count against no one. */
async function best(make: () => BenchQueue, workers: number): Promise<number> {
  await run(make(), workers, Math.min(OPS, 200_000));
  let top = 0;
  for (let r = 0; r < ROUNDS; r++) top = Math.max(top, await run(make(), workers, OPS));
  return top;
}

const registry = new Registry();
const metrics = PrometheusWorkQueueMetrics.for(registry);
let queues = 0;
const withMetrics = () => new WorkQueue({ name: `bench${queues++}`, metrics });
const withoutMetrics = () => new WorkQueue({ name: "bench-no-metrics" });

const baseline1 = await best(() => new BareFifo(), 1);
const queue1 = await best(withMetrics, 1);
const baseline8 = await best(() => new BareFifo(), 8);
const queue8 = await best(withMetrics, 8);
const queue1NoMetrics = await best(withoutMetrics, 1);

// The metrics must be real: every op above was counted and shows up in a scrape.
const scrape = await registry.metrics();
const adds = [...scrape.matchAll(/^workqueue_adds_total\{[^}]*\} (\d+)$/gm)].reduce((s, m) => s + Number(m[1]), 0);
const expectedAdds = 2 * (Math.min(OPS, 200_000) + ROUNDS * OPS);
if (adds !== expectedAdds) throw new Error(`workqueue_adds_total says ${adds}, expected ${expectedAdds}`);

const { met } = report({
  bench: "workqueue",
  figures: {
    ops: OPS,
    ops_per_sec_1_worker: Math.round(queue1),
    ops_per_sec_8_workers: Math.round(queue8),
    ops_per_sec_1_worker_no_metrics: Math.round(queue1NoMetrics),
    baseline_ops_per_sec: Math.round(baseline1),
    baseline_ops_per_sec_8_workers: Math.round(baseline8),
    metrics_adds_counted: adds,
  },
  ratios: {
    baseline_over_workqueue_1_worker: baseline1 / queue1,
    baseline_over_workqueue_8_workers: baseline8 / queue8,
    no_metrics_over_metrics_1_worker: queue1NoMetrics / queue1,
  },
  targets: [{ name: "ops_per_sec_1_worker", kind: "min", value: 300_000 }],
  notes: [
    "op = one key through add -> await get -> done; best of 3 rounds after a warm-up",
    "baseline = bare async FIFO (array + Set dedup + waiters), same harness",
  ],
});
process.exitCode = met ? 0 : 1;
