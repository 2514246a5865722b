// The reconcile work queue: see docs/runtime-workqueue.md.
export { WorkQueue, workQueueDefaults, type AddOptions, type GetResult, type WorkQueueOptions } from "./queue.ts";
export { ExponentialBackoff, backoffDefaults, type BackoffOptions } from "./backoff.ts";
export {
  QueueCounters,
  DurationHistogram,
  durationBucketsSeconds,
  type WorkQueueMetricsProvider,
  type WorkQueueMetricsSource,
} from "./metrics.ts";
export { PrometheusWorkQueueMetrics } from "./prometheus.ts";
export { WorkQueueArgumentError } from "./errors.ts";
