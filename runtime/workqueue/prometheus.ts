// Work queue metrics in a prom-client Registry, with controller-runtime's names and labels so its
// dashboards and alerts apply unchanged (labels `name` and `controller` both carry the queue name,
// as controller-runtime sets them; depth adds `priority`).
//
// Nothing here runs on the queue's hot path: the queue bumps plain numbers in QueueCounters and
// every prom-client metric pulls from them in its collect() callback at scrape time. (prom-client's
// own observe() costs ~270 ns and inc() ~120 ns per call with labels; the queue does three of them
// per key otherwise.)
import { Counter, Gauge, Histogram, type MetricType, type Registry } from "prom-client";
import {
  durationBucketsSeconds,
  QueueCounters,
  type DurationHistogram,
  type WorkQueueMetricsProvider,
  type WorkQueueMetricsSource,
} from "./metrics.ts";

type QueueLabel = "name" | "controller";
type QueueLabels = Record<QueueLabel, string>;

interface QueueSeries {
  readonly labels: QueueLabels;
  readonly counters: QueueCounters;
  /** The live queue of this name (the latest to attach). */
  source: WorkQueueMetricsSource;
  /** Counter values already passed to prom-client. */
  reportedAdds: number;
  reportedRetries: number;
  /** Priorities ever exported for depth, so a drained priority reads 0 instead of vanishing. */
  readonly priorities: Set<number>;
}

// prom-client's typings declare MetricType as a numeric enum; at runtime it is the string.
const HISTOGRAM_TYPE = "histogram" as unknown as MetricType;

/**
 * A prom-client Histogram whose buckets are counted by the queues (DurationHistogram) and read at
 * scrape time. Never call observe() on it; it would be ignored.
 */
class QueueDurationHistogram extends Histogram<QueueLabel> {
  constructor(
    private readonly metricName: string,
    private readonly helpText: string,
    registry: Registry,
    private readonly series: () => Iterable<[QueueLabels, DurationHistogram]>,
  ) {
    super({ name: metricName, help: helpText, labelNames: ["name", "controller"], buckets: [...durationBucketsSeconds], registers: [registry] });
  }

  override async get(): ReturnType<Histogram<QueueLabel>["get"]> {
    return this.export();
  }

  /** The Registry's text exposition calls this in preference to get(). */
  async getForPromString(): ReturnType<Histogram<QueueLabel>["get"]> {
    return this.export();
  }

  /** Registry.resetMetrics(): zero the counts. */
  override reset(): void {
    // The base constructor calls reset() before `series` is assigned; there is nothing to zero yet.
    if (this.series === undefined) return;
    for (const [, h] of this.series()) {
      h.counts.fill(0);
      h.sum = 0;
      h.count = 0;
    }
  }

  private export(): Awaited<ReturnType<Histogram<QueueLabel>["get"]>> {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const [labels, h] of this.series()) {
      let cumulative = 0;
      durationBucketsSeconds.forEach((le, i) => {
        cumulative += h.counts[i]!;
        values.push({ labels: { ...labels, le }, value: cumulative, metricName: `${this.metricName}_bucket` });
      });
      values.push({ labels: { ...labels, le: "+Inf" }, value: h.count, metricName: `${this.metricName}_bucket` });
      values.push({ labels: { ...labels }, value: h.sum, metricName: `${this.metricName}_sum` });
      values.push({ labels: { ...labels }, value: h.count, metricName: `${this.metricName}_count` });
    }
    // `collect` is required by the typings only; the counts are already current.
    return { name: this.metricName, help: this.helpText, type: HISTOGRAM_TYPE, aggregator: "sum", values, collect: () => undefined };
  }
}

const providers = new WeakMap<Registry, PrometheusWorkQueueMetrics>();

export class PrometheusWorkQueueMetrics implements WorkQueueMetricsProvider {
  private readonly queues = new Map<string, QueueSeries>();
  private readonly adds: Counter<QueueLabel>;
  private readonly retries: Counter<QueueLabel>;
  private readonly depth: Gauge<QueueLabel | "priority">;
  private readonly unfinished: Gauge<QueueLabel>;
  private readonly longest: Gauge<QueueLabel>;
  private readonly queueDuration: Histogram<QueueLabel>;
  private readonly workDuration: Histogram<QueueLabel>;

  /**
   * The provider for `registry`, created on first use. One per registry because prom-client
   * refuses a second metric of the same name; every queue attached shares the same metrics.
   */
  static for(registry: Registry): PrometheusWorkQueueMetrics {
    let p = providers.get(registry);
    if (p === undefined) {
      p = new PrometheusWorkQueueMetrics(registry);
      providers.set(registry, p);
    }
    return p;
  }

  private constructor(registry: Registry) {
    const registers = [registry];
    const labelNames = ["name", "controller"] as const;
    this.depth = new Gauge({
      name: "workqueue_depth",
      help: "Current depth of workqueue by workqueue and priority",
      labelNames: ["name", "controller", "priority"],
      registers,
      collect: () => this.collectDepth(),
    });
    this.adds = new Counter({
      name: "workqueue_adds_total",
      help: "Total number of adds handled by workqueue",
      labelNames,
      registers,
      collect: () => this.collectCounters(),
    });
    this.retries = new Counter({
      name: "workqueue_retries_total",
      help: "Total number of retries handled by workqueue",
      labelNames,
      registers,
      collect: () => this.collectCounters(),
    });
    this.queueDuration = new QueueDurationHistogram(
      "workqueue_queue_duration_seconds",
      "How long in seconds an item stays in workqueue before being requested",
      registry,
      () => this.histograms((c) => c.queueDuration),
    );
    this.workDuration = new QueueDurationHistogram(
      "workqueue_work_duration_seconds",
      "How long in seconds processing an item from workqueue takes.",
      registry,
      () => this.histograms((c) => c.workDuration),
    );
    this.unfinished = new Gauge({
      name: "workqueue_unfinished_work_seconds",
      help:
        "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
        "Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
      labelNames,
      registers,
      // Computed together with longest-running, see collectProcessing().
      collect: () => this.collectProcessing(),
    });
    this.longest = new Gauge({
      name: "workqueue_longest_running_processor_seconds",
      help: "How many seconds has the longest running processor for workqueue been running.",
      labelNames,
      registers,
      collect: () => this.collectProcessing(),
    });
  }

  attach(source: WorkQueueMetricsSource): QueueCounters {
    const existing = this.queues.get(source.name);
    if (existing !== undefined) {
      existing.source = source;
      return existing.counters;
    }
    const labels: QueueLabels = { name: source.name, controller: source.name };
    const q: QueueSeries = {
      labels,
      counters: new QueueCounters(),
      source,
      reportedAdds: 0,
      reportedRetries: 0,
      priorities: new Set(),
    };
    this.queues.set(source.name, q);
    // Every series exists from the start at 0, so rate() and absent() work from t0.
    this.adds.inc(labels, 0);
    this.retries.inc(labels, 0);
    this.unfinished.set(labels, 0);
    this.longest.set(labels, 0);
    q.priorities.add(0);
    this.depth.set({ ...labels, priority: "0" }, 0);
    return q.counters;
  }

  private *histograms(pick: (c: QueueCounters) => DurationHistogram): Iterable<[QueueLabels, DurationHistogram]> {
    for (const q of this.queues.values()) yield [q.labels, pick(q.counters)];
  }

  private collectCounters(): void {
    for (const q of this.queues.values()) {
      const { adds, retries } = q.counters;
      if (adds > q.reportedAdds) this.adds.inc(q.labels, adds - q.reportedAdds);
      if (retries > q.reportedRetries) this.retries.inc(q.labels, retries - q.reportedRetries);
      q.reportedAdds = adds;
      q.reportedRetries = retries;
    }
  }

  private collectDepth(): void {
    for (const q of this.queues.values()) {
      const byPriority = new Map<number, number>();
      for (const p of q.source.readyPriorities()) byPriority.set(p, (byPriority.get(p) ?? 0) + 1);
      for (const p of byPriority.keys()) q.priorities.add(p);
      for (const p of q.priorities) this.depth.set({ ...q.labels, priority: String(p) }, byPriority.get(p) ?? 0);
    }
  }

  private collectProcessing(): void {
    for (const q of this.queues.values()) {
      const now = q.source.now();
      let total = 0;
      let oldest = 0;
      for (const startedAt of q.source.processingStartTimes()) {
        const age = Math.max(0, now - startedAt) / 1000;
        total += age;
        if (age > oldest) oldest = age;
      }
      this.unfinished.set(q.labels, total);
      this.longest.set(q.labels, oldest);
    }
  }
}
