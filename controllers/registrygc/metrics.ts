// The Registry-GC controller's metrics (docs/registry-gc.md, "Metrics"), in the process's registry
// next to the runtime's own.
import type { Counter, Gauge, Histogram, Registry } from "prom-client";
import { counter, gauge, histogram } from "../../runtime/metrics.ts";
import type { GcReport } from "./collector.ts";

export class GcMetrics {
  readonly runs: Counter<"result">;
  private readonly duration: Histogram<"mode">;
  private readonly blobsDeleted: Counter<never>;
  private readonly bytesDeleted: Counter<never>;
  private readonly manifestsDeleted: Counter<never>;
  private readonly tagsDeleted: Counter<never>;
  private readonly pending: Gauge<never>;
  private readonly reclaimable: Gauge<never>;

  constructor(registry: Registry) {
    this.runs = counter(registry, { name: "registry_gc_runs_total", help: "Garbage collection runs finished, by result (done, failed).", labelNames: ["result"] });
    this.duration = histogram(registry, {
      name: "registry_gc_duration_seconds",
      help: "Duration of garbage collection runs, by mode (full, incremental).",
      labelNames: ["mode"],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
    });
    this.blobsDeleted = counter(registry, { name: "registry_gc_blobs_deleted_total", help: "Blobs deleted by garbage collection.", labelNames: [] });
    this.bytesDeleted = counter(registry, { name: "registry_gc_bytes_deleted_total", help: "Bytes of blobs deleted by garbage collection.", labelNames: [] });
    this.manifestsDeleted = counter(registry, { name: "registry_gc_manifests_deleted_total", help: "Untagged manifests deleted by garbage collection.", labelNames: [] });
    this.tagsDeleted = counter(registry, { name: "registry_gc_tags_deleted_total", help: "Tags removed by retention policies.", labelNames: [] });
    this.pending = gauge(registry, { name: "registry_gc_candidates_pending", help: "Unreferenced blobs the last run kept for a later one (touched or written within the grace).", labelNames: [] });
    this.reclaimable = gauge(registry, {
      name: "registry_gc_bytes_reclaimable",
      help: "Bytes the last run found it could delete now: what a dry run would delete, 0 after a run that deleted it.",
      labelNames: [],
    });
  }

  observe(report: GcReport, seconds: number): void {
    this.runs.inc({ result: "done" });
    this.duration.observe({ mode: report.mode }, seconds);
    this.pending.set(report.pending);
    if (report.dryRun) {
      this.reclaimable.set(report.bytesDeleted);
      return;
    }
    this.reclaimable.set(0);
    this.blobsDeleted.inc(report.blobsDeleted);
    this.bytesDeleted.inc(report.bytesDeleted);
    this.manifestsDeleted.inc(report.manifestsDeleted.length);
    this.tagsDeleted.inc(report.tagsDeleted.length);
  }
}
