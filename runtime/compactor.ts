// Store compaction, which we must own (docs/store.md, "Compaction: who compacts"): a bare etcd keeps every revision until its
// backend quota fills and it turns read-only. Like early kube-apiserver, the compactor keeps a
// time window of history (default 10 min): every interval it samples the store revision, and
// compacts to the newest sample that is at least `retentionMs` old. A watch that was down for less
// than the window resumes without a relist; a longer outage costs one relist (informer.ts).
//
// One compactor per store, not per component: several server processes may share a store (`capstan
// up` and a separate `capstan secrets`, the console, the registry), each with its own leader key.
// So ElectedCompactor runs the compactor under a store-wide leader key of its own
// (compactorLeaderKey), elected among every process on the store (runtime/elected.ts); add it as
// an always-running runnable (Manager.add(c, {leaderOnly: false})). Compacting to a revision someone else already
// compacted past is not an error here.
import { Registry } from "prom-client";
import { realClock, type Clock } from "./clock.ts";
import { withDeadline } from "./deadline.ts";
import { ElectedRunnables } from "./elected.ts";
import type { ElectionStore } from "./leaderelection.ts";
import { isCompactedError } from "./listwatch.ts";
import { silentLogger, type Logger } from "./log.ts";
import { counter, gauge } from "./metrics.ts";

export interface CompactableStore {
  revision(): Promise<number>;
  compact(revision: number): Promise<void>;
}

export interface StoreCompactorOptions {
  store: CompactableStore;
  /** History to keep (default 10 min). */
  retentionMs?: number;
  /** How often to sample the revision and maybe compact (default 1 min). */
  intervalMs?: number;
  /** Deadline per store call (default 30 s). */
  requestTimeoutMs?: number;
  clock?: Clock;
  log?: Logger;
  registry?: Registry;
}

export class StoreCompactor {
  readonly name = "store-compactor";
  private readonly store: CompactableStore;
  private readonly retentionMs: number;
  private readonly intervalMs: number;
  private readonly requestTimeoutMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly compactions: ReturnType<typeof counter<"result">>;
  private readonly compactedRevision: ReturnType<typeof gauge<never>>;

  constructor(opts: StoreCompactorOptions) {
    this.store = opts.store;
    this.retentionMs = opts.retentionMs ?? 10 * 60_000;
    this.intervalMs = opts.intervalMs ?? 60_000;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 30_000;
    if (!(this.retentionMs > 0) || !(this.intervalMs > 0)) {
      throw new RangeError("store compactor: retentionMs and intervalMs must be > 0");
    }
    this.clock = opts.clock ?? realClock;
    this.log = (opts.log ?? silentLogger).child({ runnable: this.name });
    const registry = opts.registry ?? new Registry();
    this.compactions = counter(registry, {
      name: "store_compactions_total",
      help: "Store compactions requested by this process, by result",
      labelNames: ["result"],
    });
    this.compactedRevision = gauge(registry, {
      name: "store_compacted_revision",
      help: "Revision of the last compaction this process made",
      labelNames: [],
    });
    for (const result of ["success", "error"]) this.compactions.inc({ result }, 0);
  }

  /** Sample and compact every interval until `signal` aborts. */
  async start(signal: AbortSignal): Promise<void> {
    const samples: { at: number; revision: number }[] = [];
    let compactedTo = 0;
    while (!signal.aborted) {
      try {
        const revision = await withDeadline(this.store.revision(), this.requestTimeoutMs, this.clock, "store revision", signal);
        const now = this.clock.now();
        samples.push({ at: now, revision });
        // The newest sample that has aged past the window; older ones are no longer needed.
        let target: number | undefined;
        while (samples.length > 0 && samples[0]!.at <= now - this.retentionMs) target = samples.shift()!.revision;
        if (target !== undefined && target > compactedTo) {
          await this.compact(target, signal);
          compactedTo = target;
        }
      } catch (e) {
        if (signal.aborted) break;
        this.log.warn({ err: e }, "compaction round failed; retrying next interval");
      }
      await this.clock.sleep(this.intervalMs, signal).catch(() => {});
    }
  }

  private async compact(revision: number, signal: AbortSignal): Promise<void> {
    try {
      await withDeadline(this.store.compact(revision), this.requestTimeoutMs, this.clock, "store compact", signal);
    } catch (e) {
      if (!isCompactedError(e)) {
        this.compactions.inc({ result: "error" });
        throw e;
      }
      this.log.debug({ revision, compactRevision: e.compactRevision }, "already compacted past this revision");
    }
    this.compactions.inc({ result: "success" });
    this.compactedRevision.set(revision);
    this.log.info({ revision }, "compacted");
  }
}

/** The store-wide key whose holder compacts: one compactor per store, whatever runs on it. */
export const compactorLeaderKey = "/platform/compactor/leader";

export interface ElectedCompactorOptions extends StoreCompactorOptions {
  store: CompactableStore & ElectionStore;
  /** Unique per process (the process's elector identity will do: the keys differ). */
  identity: string;
  /** Default compactorLeaderKey. */
  key?: string;
  /** Lease timings (the elector's defaults when absent). */
  lease?: { ttlSeconds: number; renewDeadlineMs: number; retryPeriodMs: number };
  /** Holders known to be gone (LeaderElectorOptions.goneHolders). */
  goneHolders?: ReadonlySet<string>;
}

/**
 * A StoreCompactor that runs only while this process holds the store-wide compactor key
 * (runtime/elected.ts: its own election, which campaigns again after a loss).
 */
export class ElectedCompactor extends ElectedRunnables {
  constructor(opts: ElectedCompactorOptions) {
    super({
      store: opts.store,
      key: opts.key ?? compactorLeaderKey,
      identity: opts.identity,
      name: "store-compactor",
      // Routine and store-wide: its election logs warnings only ("elected leader" stays the
      // process's own election's line; the compactor logs each compaction).
      ...(opts.log && { log: opts.log.child({}, { level: "warn" }) }),
      ...(opts.registry && { registry: opts.registry }),
      ...(opts.clock && { clock: opts.clock }),
      ...(opts.lease && { lease: opts.lease }),
      ...(opts.goneHolders && { goneHolders: opts.goneHolders }),
    });
    this.add(new StoreCompactor(opts));
  }
}
