// What a work queue reports, split by cost: the hot path only bumps plain numbers (QueueCounters);
// anything that needs a walk over the queue (depth per priority, age of in-flight work) is read
// from a WorkQueueMetricsSource at scrape time. A provider turns both into exported metrics; see
// prometheus.ts for the prom-client one.

/** Read-only views of one queue, called at scrape time, never on the hot path. */
export interface WorkQueueMetricsSource {
  readonly name: string;
  /** The priority of every ready key, one value per key. */
  readyPriorities(): Iterable<number>;
  /** The clock time (ms) each key being processed was handed out. */
  processingStartTimes(): Iterable<number>;
  /** The queue's clock, in ms. */
  now(): number;
}

export interface WorkQueueMetricsProvider {
  /**
   * Called once by each queue at construction. A second queue with the same name (a controller
   * restarted in-process) takes over the name: its counts continue the same series.
   */
  attach(source: WorkQueueMetricsSource): QueueCounters;
}

/**
 * client-go's workqueue histogram buckets, ExponentialBuckets(10e-9, 10, 12): 10 ns to 1000 s, in
 * seconds. Written out so the exported `le` labels are exact decimals.
 */
export const durationBucketsSeconds: readonly number[] = [
  1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1000,
];

/** A histogram as plain counts: observe() is a few compares and adds, no labels or maps. */
export class DurationHistogram {
  /** counts[i]: observations in (bound[i-1], bound[i]]; the last slot is (1000 s, +Inf). */
  readonly counts = new Float64Array(durationBucketsSeconds.length + 1);
  sum = 0;
  count = 0;

  observe(seconds: number): void {
    let i = 0;
    const bounds = durationBucketsSeconds;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }
}

/** Cumulative counts of one named queue, bumped by the queue as things happen. */
export class QueueCounters {
  /** Keys that entered the ready set (merged adds of a key already queued are not counted). */
  adds = 0;
  /** Adds with a delay > 0: rate-limited requeues and delayed adds (counted even when merged). */
  retries = 0;
  /** Seconds from a key's readyAt to its hand-out. */
  readonly queueDuration = new DurationHistogram();
  /** Seconds from hand-out to done(). */
  readonly workDuration = new DurationHistogram();
}
