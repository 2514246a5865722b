import { Registry, register as globalRegistry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock } from "../../../runtime/clock.ts";
import { PrometheusWorkQueueMetrics, WorkQueue } from "../../../runtime/workqueue/index.ts";
import { take } from "./helpers.ts";

const NAMES = [
  "workqueue_depth",
  "workqueue_adds_total",
  "workqueue_queue_duration_seconds",
  "workqueue_work_duration_seconds",
  "workqueue_unfinished_work_seconds",
  "workqueue_longest_running_processor_seconds",
  "workqueue_retries_total",
];

/** The value of one series, from the registry's JSON view (which runs every collect()). */
async function value(registry: Registry, metric: string, labels: Record<string, string | number>): Promise<number | undefined> {
  const all = await registry.getMetricsAsJSON();
  const m = all.find((x) => x.name === metric.replace(/_(bucket|sum|count)$/, ""));
  const v = m?.values.find(
    (x) =>
      (x as { metricName?: string }).metricName === (metric === m.name ? undefined : metric) &&
      Object.entries(labels).every(([k, l]) => (x.labels as Record<string, unknown>)[k] === l) &&
      Object.keys(x.labels).length === Object.keys(labels).length,
  );
  return v?.value;
}

function setup() {
  const registry = new Registry();
  const clock = new FakeClock(10_000);
  const metrics = PrometheusWorkQueueMetrics.for(registry);
  const q = new WorkQueue({ name: "pods", clock, metrics });
  return { registry, clock, metrics, q };
}

describe("work queue metrics", () => {
  it("registers controller-runtime's names in the given registry only, every series starting at 0", async () => {
    const { registry } = setup();
    const text = await registry.metrics();
    for (const name of NAMES) expect(text).toContain(`# TYPE ${name} `);
    expect(text).toContain('workqueue_adds_total{name="pods",controller="pods"} 0');
    expect(text).toContain('workqueue_retries_total{name="pods",controller="pods"} 0');
    expect(text).toContain('workqueue_depth{name="pods",controller="pods",priority="0"} 0');
    expect(text).toContain('workqueue_queue_duration_seconds_count{name="pods",controller="pods"} 0');
    expect(text).toContain('workqueue_queue_duration_seconds_bucket{name="pods",controller="pods",le="1e-8"} 0');
    expect(text).toContain('workqueue_queue_duration_seconds_bucket{name="pods",controller="pods",le="1000"} 0');
    expect(await globalRegistry.metrics()).not.toContain("workqueue_");
  });

  it("lets queues of different names share one registry, and registries stay apart", async () => {
    const { registry, clock, metrics, q } = setup();
    const other = new WorkQueue({ name: "services", clock, metrics: PrometheusWorkQueueMetrics.for(registry) });
    expect(PrometheusWorkQueueMetrics.for(registry)).toBe(metrics);
    const elsewhere = setup();
    q.add("a");
    other.add("x");
    other.add("y");
    expect(await value(registry, "workqueue_adds_total", { name: "pods", controller: "pods" })).toBe(1);
    expect(await value(registry, "workqueue_adds_total", { name: "services", controller: "services" })).toBe(2);
    expect(await value(elsewhere.registry, "workqueue_adds_total", { name: "pods", controller: "pods" })).toBe(0);
  });

  it("counts adds once per key that becomes ready, and retries for every delayed add", async () => {
    const { registry, clock, q } = setup();
    q.add("a");
    q.add("a"); // merged: not an add
    q.add("b", { afterMs: 100 });
    q.add("b", { afterMs: 50 }); // merged, but a retry
    q.addRateLimited("c");
    const labels = { name: "pods", controller: "pods" };
    expect(await value(registry, "workqueue_adds_total", labels)).toBe(1);
    expect(await value(registry, "workqueue_retries_total", labels)).toBe(3);
    clock.advance(100);
    expect(await value(registry, "workqueue_adds_total", labels)).toBe(3);
    expect(await value(registry, "workqueue_retries_total", labels)).toBe(3);
  });

  it("reports depth per priority, back to 0 when drained", async () => {
    const { registry, q } = setup();
    q.add("a");
    q.add("b", { priority: -100 });
    q.add("c", { priority: -100 });
    q.add("d", { afterMs: 10, priority: 5 }); // waiting: not depth
    const depth = (priority: string) => value(registry, "workqueue_depth", { name: "pods", controller: "pods", priority });
    expect(await depth("0")).toBe(1);
    expect(await depth("-100")).toBe(2);
    expect(await depth("5")).toBeUndefined();
    for (let i = 0; i < 3; i++) q.done((await take(q)).key);
    expect(await depth("0")).toBe(0);
    expect(await depth("-100")).toBe(0);
  });

  it("observes queue and work durations in client-go's buckets", async () => {
    const { registry, clock, q } = setup();
    const labels = { name: "pods", controller: "pods" };
    q.add("a");
    clock.advance(250);
    const { key } = await take(q);
    clock.advance(2_000);
    q.done(key);
    const bucket = (metric: string, le: number | string) => value(registry, `${metric}_bucket`, { ...labels, le });
    expect(await bucket("workqueue_queue_duration_seconds", 0.1)).toBe(0);
    expect(await bucket("workqueue_queue_duration_seconds", 1)).toBe(1);
    expect(await bucket("workqueue_queue_duration_seconds", "+Inf")).toBe(1);
    expect(await value(registry, "workqueue_queue_duration_seconds_sum", labels)).toBeCloseTo(0.25);
    expect(await bucket("workqueue_work_duration_seconds", 1)).toBe(0);
    expect(await bucket("workqueue_work_duration_seconds", 10)).toBe(1);
    expect(await value(registry, "workqueue_work_duration_seconds_count", labels)).toBe(1);
    expect(await value(registry, "workqueue_work_duration_seconds_sum", labels)).toBeCloseTo(2);
    // A delayed key's queue time counts from when it was due, not from the add.
    q.add("b", { afterMs: 5_000 });
    clock.advance(5_000);
    await take(q);
    expect(await value(registry, "workqueue_queue_duration_seconds_count", labels)).toBe(2);
    expect(await value(registry, "workqueue_queue_duration_seconds_sum", labels)).toBeCloseTo(0.25);
  });

  it("reports unfinished work and the longest-running processor from in-flight keys", async () => {
    const { registry, clock, q } = setup();
    const labels = { name: "pods", controller: "pods" };
    q.add("a");
    q.add("b");
    await take(q);
    clock.advance(3_000);
    const b = await take(q);
    clock.advance(1_000);
    expect(await value(registry, "workqueue_unfinished_work_seconds", labels)).toBeCloseTo(5);
    expect(await value(registry, "workqueue_longest_running_processor_seconds", labels)).toBeCloseTo(4);
    q.done("a");
    q.done(b.key);
    expect(await value(registry, "workqueue_unfinished_work_seconds", labels)).toBe(0);
    expect(await value(registry, "workqueue_longest_running_processor_seconds", labels)).toBe(0);
  });

  it("a queue restarted under the same name continues its series", async () => {
    const { registry, clock, metrics, q } = setup();
    q.add("a");
    expect(await value(registry, "workqueue_adds_total", { name: "pods", controller: "pods" })).toBe(1);
    q.shutDown();
    const again = new WorkQueue({ name: "pods", clock, metrics });
    again.add("b");
    again.add("c");
    expect(await value(registry, "workqueue_adds_total", { name: "pods", controller: "pods" })).toBe(3);
    expect(await value(registry, "workqueue_depth", { name: "pods", controller: "pods", priority: "0" })).toBe(2);
  });

  it("resetMetrics() zeroes the duration histograms too", async () => {
    const { registry, q } = setup();
    q.add("a");
    q.done((await take(q)).key);
    expect(await value(registry, "workqueue_work_duration_seconds_count", { name: "pods", controller: "pods" })).toBe(1);
    registry.resetMetrics();
    expect(await value(registry, "workqueue_work_duration_seconds_count", { name: "pods", controller: "pods" })).toBe(0);
  });
});
