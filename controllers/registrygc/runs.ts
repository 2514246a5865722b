// The reconciler of GC runs (docs/registry-gc.md, "Runs"): a pending run record is carried out by
// the collector, with its progress and report written back into the record. A run found "running"
// was left by a registry that died or lost the lead in the middle of it: it is run again from the
// start, which is safe because every step of a run is idempotent (collector.ts).
//
// Keys are run ids; one worker, so runs never overlap. The collector's marks live in a
// CollectorState kept for one leadership term (a new term loads them from the store again, since
// another registry may have collected meanwhile).
import type { StorageDriver } from "../../adapters/blobstore/driver.ts";
import type { Store } from "../../adapters/store/store.ts";
import { gcKeys, keptRuns, RunOptions, type RunRecord } from "../../api/resources/registry-gc.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { Logger } from "../../runtime/log.ts";
import type { ReconcileContext, Result } from "../../runtime/result.ts";
import { TerminalError } from "../../runtime/result.ts";
import { collect, CollectorState, type GcProgress, type GcReport } from "./collector.ts";
import type { GcMetrics } from "./metrics.ts";
import { InUse } from "./in-use.ts";
import { pacedDriver, Pacer, type RequestActivity } from "./pacer.ts";
import { getPolicy } from "./policy.ts";

export interface RunReconcilerOptions {
  driver: StorageDriver;
  /** The FENCED store: a deposed leader's writes are refused. */
  store: Store;
  runs: Informer<RunRecord>;
  /** This process, as its leader identity names it. */
  identity: string;
  /** Changes with each leadership term (the fence's revision): a new term starts from the store. */
  term: () => number | undefined;
  metrics: GcMetrics;
  log: Logger;
  /** How often progress is written into the run record (default 1 s). */
  progressEveryMs?: number;
  /** The registry's requests: runs yield to them (pacer.ts). */
  activity?: RequestActivity;
}

export class RunReconciler {
  private state = new CollectorState();
  private stateTerm: number | undefined;

  constructor(private readonly o: RunReconcilerOptions) {}

  reconcile = async (id: string, ctx: ReconcileContext): Promise<Result | void> => {
    const { store, runs, metrics } = this.o;
    const cached = runs.get(gcKeys.run(id));
    if (cached === undefined) return;
    if (cached.state === "done" || cached.state === "failed") return this.prune();
    const term = this.o.term();
    if (term !== this.stateTerm) {
      this.state = new CollectorState();
      this.stateTerm = term;
    }
    const kv = await store.get(gcKeys.run(id));
    if (kv === null) return;
    let record = JSON.parse(kv.value) as RunRecord;
    if (record.state === "done" || record.state === "failed") return;
    let revision = kv.modRevision;
    const write = async (next: RunRecord): Promise<void> => {
      const r = await store.put(gcKeys.run(id), JSON.stringify(next), { expect: [{ key: gcKeys.run(id), target: "modRevision", equals: revision }] });
      if (!r.succeeded) throw new Error(`run ${id} was changed by someone else`);
      revision = r.revision;
      record = next;
    };
    await write({ ...record, state: "running", startedAt: new Date().toISOString(), runner: this.o.identity });
    ctx.log.info({ run: id, options: record.options }, "garbage collection run started");

    let lastProgress = 0;
    let progressWrite: Promise<void> = Promise.resolve();
    const onProgress = (p: GcProgress) => {
      const now = Date.now();
      if (now - lastProgress < (this.o.progressEveryMs ?? 1000) && p.phase !== "done") return;
      lastProgress = now;
      progressWrite = progressWrite.then(() => write({ ...record, progress: { ...p, at: new Date(now).toISOString() } })).catch(() => {});
    };
    const started = performance.now();
    let report: GcReport;
    try {
      const parsed = RunOptions.safeParse(record.options);
      if (!parsed.success) throw new TerminalError(`the run's options are not valid: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
      const options = parsed.data;
      let retention;
      if (options.policy !== undefined) {
        const policy = await getPolicy(store, options.policy);
        if (policy === null || !policy.ok) throw new TerminalError(`policy ${options.policy} ${policy === null ? "does not exist" : `is not valid: ${policy.problems.join("; ")}`}`);
        const inUse = await InUse.read(store);
        if (inUse.unreadable.length > 0) ctx.log.warn({ unreadable: inUse.unreadable.map((u) => u.key) }, "workload records that cannot be read: every image counts as in use");
        retention = { policy: policy.policy, inUse };
      }
      const pacer = this.o.activity ? new Pacer({ activity: this.o.activity }) : undefined;
      report = await collect({
        driver: pacer ? pacedDriver(this.o.driver, pacer, ctx.signal) : this.o.driver,
        ...(pacer && { pace: () => pacer.pace(ctx.signal) }),
        store,
        mode: options.mode,
        dryRun: options.dryRun,
        deleteUntagged: options.deleteUntagged,
        graceMs: options.graceSeconds * 1000,
        ...(options.untaggedGraceSeconds !== undefined && { untaggedGraceMs: options.untaggedGraceSeconds * 1000 }),
        state: this.state,
        log: ctx.log,
        signal: ctx.signal,
        onProgress,
        ...(retention !== undefined && { retention }),
      });
    } catch (err) {
      await progressWrite;
      // The marks in memory may be ahead of the store now: the next run loads them again.
      this.state = new CollectorState();
      metrics.runs.inc({ result: "failed" });
      if (ctx.signal.aborted) throw err; // stopped or deposed: the next leader runs it again
      const message = err instanceof Error ? err.message : String(err);
      await write({ ...record, state: "failed", finishedAt: new Date().toISOString(), error: message });
      ctx.log.error({ run: id, err }, "garbage collection run failed");
      return;
    }
    await progressWrite;
    metrics.observe(report, (performance.now() - started) / 1000);
    await write({ ...record, state: "done", finishedAt: new Date().toISOString(), progress: { phase: "done", done: report.blobsDeleted, total: report.candidates, at: new Date().toISOString() }, report });
    return this.prune();
  };

  /** Keep the newest `keptRuns` finished runs. */
  private async prune(): Promise<void> {
    const finished = this.o.runs
      .list()
      .filter((r) => r.state === "done" || r.state === "failed")
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    for (const r of finished.slice(0, Math.max(0, finished.length - keptRuns))) await this.o.store.delete(gcKeys.run(r.id));
  }
}
