// Informer: a local, always-converging cache of one key prefix, plus change notifications.
//
// The cycle is client-go's reflector, adapted to etcd revisions:
//   1. list the prefix at one revision R (paginated; every page after the first is pinned at R,
//      so the pages form one snapshot);
//   2. replace the cache with the snapshot: the first time by emitting adds, later by a diff
//      against the cache (add/update for what changed, delete with finalStateUnknown for what
//      vanished: the delete itself was never seen, only its absence);
//   3. watch from R + 1, applying events to the cache in revision order, until the watch fails,
//      compaction cancels it, or it goes silent for longer than the liveness deadline;
//   4. back off (800 ms .. 30 s, jittered, reset after 2 min healthy) and go to 1.
//
// Why a full relist on every watch failure rather than resuming from our own revision: the etcd3
// client's errors are opaque (a compaction cancel is not reliably distinguishable from a broken
// stream; docs/store.md, "EtcdStore and the etcd3 package"), and a relist + diff is correct whatever happened in between. The cost is
// a paginated range read; the back-off bounds how often it can happen.
//
// The informer never stops on its own: list failures, watch failures, decode failures and
// throwing handlers are logged and counted, and the loop continues until stop().
import { Registry } from "prom-client";
import { Backoff, type BackoffOptions } from "./backoff.ts";
import { realClock, type Clock } from "./clock.ts";
import { withDeadline } from "./deadline.ts";
import { isCompactedError, type KeyValueLike, type ListWatchSource, type WatchEventLike } from "./listwatch.ts";
import { silentLogger, type Logger } from "./log.ts";
import { collectedGauge, counter, gauge } from "./metrics.ts";

export interface AddMeta {
  /** True for adds that come from the first list (controller-runtime's IsInInitialList). */
  isInInitialList: boolean;
}

export interface DeleteMeta {
  /**
   * True when the delete was inferred from a relist (the key vanished while the watch was down),
   * so `obj` is the last state the cache saw, not necessarily the final one (client-go's
   * DeletedFinalStateUnknown).
   */
  finalStateUnknown: boolean;
}

/** Notifications run synchronously, after the cache already reflects the change. Keep them cheap. */
export interface EventHandler<T> {
  onAdd?(obj: T, key: string, meta: AddMeta): void;
  onUpdate?(oldObj: T, newObj: T, key: string): void;
  onDelete?(obj: T, key: string, meta: DeleteMeta): void;
}

export type RelistReason = "compacted" | "watch-error" | "liveness";

export interface InformerOptions<T> {
  /** Names the informer in logs and metric labels. */
  name: string;
  source: ListWatchSource;
  prefix: string;
  /**
   * Turns a stored value into the cached object. A throw means "not a valid object": the key is
   * left out of the cache (a delete is emitted if it was cached), counted in
   * informer_decode_errors_total, and the informer carries on. decode receives the whole kv, so it
   * can keep kv.modRevision in the object for later compare-and-swap writes.
   */
  decode: (kv: KeyValueLike) => T;
  clock?: Clock;
  log?: Logger;
  /** Where the informer_* metrics go (default: a private registry nobody scrapes). */
  registry?: Registry;
  /**
   * Keys per list page (default 5000). Each page is one round trip, and etcd counts the rest of
   * the range on every page, so small pages cost: syncing 10,000 keys took ~63 ms in pages of
   * 1000 against ~48 ms in pages of 5000 and ~45 ms in one read (bench/informer.ts setup). 5000
   * keeps a page of typical specs (0.2 to 2 KB) to a few MB.
   */
  pageSize?: number;
  /** Deadline for one list page or one revision() call (default 30 s). */
  requestTimeoutMs?: number;
  /** When the watch has been silent this long, ask the store for a progress notification (default 5 s). */
  progressIntervalMs?: number;
  /**
   * When the watch has been silent this long despite those requests, treat it as broken (default
   * 30 s; Infinity disables the check). The store must deliver *something* within it on a healthy
   * quiet watch: an answer to requestProgress(), or a periodic progress notification. etcd before
   * 3.4.31 / 3.5.13 cannot answer progress requests safely (EtcdStore then ignores them), so it must
   * run with --experimental-watch-progress-notify-interval below this (scripts/services uses 5 s);
   * otherwise every quiet watch would be relisted each time the deadline passes.
   */
  livenessTimeoutMs?: number;
  backoff?: BackoffOptions;
  /** Source of randomness for back-off jitter (tests pass a constant). */
  random?: () => number;
}

interface Entry<T> {
  obj: T;
  modRevision: number;
}

interface Waiter {
  resolve(): void;
  reject(error: Error): void;
}

interface RevisionWaiter extends Waiter {
  revision: number;
}

export class CacheSyncTimeoutError extends Error {
  override readonly name = "CacheSyncTimeoutError";
  constructor(
    readonly informer: string,
    readonly timeoutMs: number,
  ) {
    super(`informer ${informer} did not sync within ${timeoutMs} ms`);
  }
}

/** The informer was stopped before what the caller waited for happened; it never will now. */
export class InformerStoppedError extends Error {
  override readonly name = "InformerStoppedError";
  constructor(readonly informer: string) {
    super(`informer ${informer} was stopped`);
  }
}

const relistReasons: readonly RelistReason[] = ["compacted", "watch-error", "liveness"];

export class Informer<T> {
  readonly name: string;
  readonly prefix: string;
  private readonly source: ListWatchSource;
  private readonly decode: (kv: KeyValueLike) => T;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly pageSize: number;
  private readonly requestTimeoutMs: number;
  private readonly progressIntervalMs: number;
  private readonly livenessTimeoutMs: number;
  private readonly backoff: Backoff;

  private cache = new Map<string, Entry<T>>();
  private readonly handlers = new Set<EventHandler<T>>();
  private synced = false;
  private syncWaiters: Waiter[] = [];
  private revisionWaiters: RevisionWaiter[] = [];
  /**
   * The next revision a watch must start from so that nothing is missed or seen twice. Invariant:
   * the cache reflects every change with revision < resumeRevision. It moves only forward: to
   * R + 1 after a list at R, to (last event's modRevision + 1) after a batch of events (all events
   * of one revision arrive in one batch, so this never splits a revision), and to (N + 1) after a
   * progress notification at N ("everything <= N was delivered").
   */
  private resume = 0;
  private lastListRevision = 0;
  private lastActivityAt: number;
  private stopController: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private stopped = false;

  private readonly metrics: {
    objects: ReturnType<typeof gauge<"name">>;
    relists: ReturnType<typeof counter<"name" | "reason">>;
    decodeErrors: ReturnType<typeof counter<"name">>;
    handlerErrors: ReturnType<typeof counter<"name">>;
    unregister: (() => void)[];
  };

  constructor(opts: InformerOptions<T>) {
    if (!opts.name) throw new TypeError("informer: name is required");
    if (!opts.prefix) throw new TypeError(`informer ${opts.name}: prefix is required (an empty prefix would cache the whole store)`);
    this.name = opts.name;
    this.prefix = opts.prefix;
    this.source = opts.source;
    this.decode = opts.decode;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.log ?? silentLogger).child({ informer: opts.name });
    this.pageSize = opts.pageSize ?? 5000;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.progressIntervalMs = opts.progressIntervalMs ?? 5_000;
    this.livenessTimeoutMs = opts.livenessTimeoutMs ?? 30_000;
    if (!(this.pageSize >= 1)) throw new RangeError(`informer ${opts.name}: pageSize must be >= 1`);
    if (!(this.livenessTimeoutMs > this.progressIntervalMs)) {
      throw new RangeError(`informer ${opts.name}: livenessTimeoutMs must exceed progressIntervalMs`);
    }
    this.backoff = new Backoff(this.clock, opts.backoff, opts.random);
    this.lastActivityAt = this.clock.now();

    const registry = opts.registry ?? new Registry();
    const labels = { name: this.name };
    this.metrics = {
      objects: gauge(registry, { name: "informer_objects", help: "Objects in the informer cache", labelNames: ["name"] }),
      relists: counter(registry, {
        name: "informer_relists_total",
        help: "Relists after the initial list, by the reason the watch ended",
        labelNames: ["name", "reason"],
      }),
      decodeErrors: counter(registry, {
        name: "informer_decode_errors_total",
        help: "Stored values the decode function rejected (left out of the cache)",
        labelNames: ["name"],
      }),
      handlerErrors: counter(registry, {
        name: "informer_handler_errors_total",
        help: "Exceptions thrown by event handlers (caught; the informer carries on)",
        labelNames: ["name"],
      }),
      unregister: [
        collectedGauge(
          registry,
          {
            name: "informer_watch_lag_revisions",
            help: "Store revision minus the revision the cache reflects (includes writes to other prefixes until the next progress notification)",
            labelNames: ["name"],
          },
          async (g) => {
            if (!this.synced) return;
            const storeRevision = await withDeadline(this.source.revision(), 1_000, this.clock, "store revision");
            g.set(labels, Math.max(0, storeRevision - this.cacheRevision()));
          },
        ),
        collectedGauge(
          registry,
          {
            name: "informer_last_event_age_seconds",
            help: "Seconds since the watch last delivered anything (events or a progress notification)",
            labelNames: ["name"],
          },
          (g) => g.set(labels, (this.clock.now() - this.lastActivityAt) / 1000),
        ),
      ],
    };
    this.metrics.objects.set(labels, 0);
    this.metrics.decodeErrors.inc(labels, 0);
    this.metrics.handlerErrors.inc(labels, 0);
    for (const reason of relistReasons) this.metrics.relists.inc({ ...labels, reason }, 0);
  }

  /**
   * Register handlers. When the informer already holds objects they are replayed to this handler
   * as adds (isInInitialList: true), as client-go does, so a late handler misses nothing.
   * Returns a function that unregisters it.
   */
  addEventHandler(handler: EventHandler<T>): () => void {
    this.handlers.add(handler);
    if (handler.onAdd) {
      for (const [key, e] of this.cache) this.invoke(() => handler.onAdd?.(e.obj, key, { isInInitialList: true }));
    }
    return () => this.handlers.delete(handler);
  }

  /** Begin list + watch in the background. */
  start(): void {
    if (this.stopped) throw new Error(`informer ${this.name}: cannot start after stop`);
    if (this.loop) return;
    this.stopController = new AbortController();
    this.loop = this.run(this.stopController.signal);
  }

  /** Close the watch and end the loop. The cache stays readable. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopController?.abort(new Error(`informer ${this.name} stopped`));
    await this.loop;
    for (const unregister of this.metrics.unregister) unregister();
    // Rejected, not resolved: a read-your-own-writes caller must not go on to read a cache that
    // will never reach its revision.
    const error = new InformerStoppedError(this.name);
    for (const w of [...this.syncWaiters, ...this.revisionWaiters]) w.reject(error);
    this.syncWaiters = [];
    this.revisionWaiters = [];
  }

  /** True once the first list has been loaded into the cache (stays true across relists). */
  hasSynced(): boolean {
    return this.synced;
  }

  /**
   * Resolves when synced; rejects with CacheSyncTimeoutError after `timeoutMs`, the signal's
   * reason, or InformerStoppedError.
   */
  waitForSync(signal?: AbortSignal, timeoutMs = 120_000): Promise<void> {
    if (this.synced) return Promise.resolve();
    if (this.stopped) return Promise.reject(new InformerStoppedError(this.name));
    let waiter!: Waiter;
    const synced = new Promise<void>((resolve, reject) => this.syncWaiters.push((waiter = { resolve, reject })));
    return withDeadline(synced, timeoutMs, this.clock, `informer ${this.name} sync`, signal)
      .catch((e: unknown) => {
        if (e instanceof Error && e.name === "DeadlineExceededError") throw new CacheSyncTimeoutError(this.name, timeoutMs);
        throw e;
      })
      .finally(() => (this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter))); // a timed-out waiter must not pile up
  }

  /**
   * Resolves once the cache reflects every change up to `revision` (read-your-own-writes: pass the
   * revision a write returned, then read the cache). Rejects on timeout, abort or stop
   * (InformerStoppedError).
   */
  waitForRevision(revision: number, signal?: AbortSignal, timeoutMs = 30_000): Promise<void> {
    if (this.synced && this.cacheRevision() >= revision) return Promise.resolve();
    if (this.stopped) return Promise.reject(new InformerStoppedError(this.name));
    let waiter!: RevisionWaiter;
    const reached = new Promise<void>((resolve, reject) => this.revisionWaiters.push((waiter = { revision, resolve, reject })));
    return withDeadline(reached, timeoutMs, this.clock, `informer ${this.name} revision ${revision}`, signal).finally(
      () => (this.revisionWaiters = this.revisionWaiters.filter((w) => w !== waiter)), // a timed-out waiter must not pile up
    );
  }

  get(key: string): T | undefined {
    return this.cache.get(key)?.obj;
  }

  list(): T[] {
    return [...this.cache.values()].map((e) => e.obj);
  }

  keys(): string[] {
    return [...this.cache.keys()];
  }

  get size(): number {
    return this.cache.size;
  }

  /** The revision the cache reflects: every change at or below it has been applied (0 before sync). */
  cacheRevision(): number {
    return Math.max(0, this.resume - 1);
  }

  /** The revision of the last (re)list. */
  get lastSyncRevision(): number {
    return this.lastListRevision;
  }

  /** Every change below this revision is in the cache; the current watch continues from it. */
  get resumeRevision(): number {
    return this.resume;
  }

  private async run(signal: AbortSignal): Promise<void> {
    let reason: RelistReason | undefined; // undefined: the initial list
    while (!signal.aborted) {
      try {
        const snapshot = await this.listAll(signal);
        if (reason !== undefined) this.metrics.relists.inc({ name: this.name, reason });
        this.replace(snapshot.entries, snapshot.revision);
        const ended = await this.watchUntilBroken(signal);
        if (ended === "stopped") break;
        reason = ended;
      } catch (e) {
        if (signal.aborted) break;
        this.log.warn({ err: e, reason: reason ?? "initial" }, "list failed; retrying");
      }
      if (signal.aborted) break;
      const delay = this.backoff.next();
      this.log.info({ reason, delayMs: Math.round(delay) }, "relisting after back-off");
      await this.clock.sleep(delay, signal).catch(() => {});
    }
  }

  private async listAll(signal: AbortSignal): Promise<{ entries: Map<string, Entry<T>>; revision: number }> {
    const entries = new Map<string, Entry<T>>();
    let revision: number | undefined;
    let startAfter: string | undefined;
    for (;;) {
      const page = await withDeadline(
        this.source.list(this.prefix, {
          limit: this.pageSize,
          ...(revision !== undefined && { revision }),
          ...(startAfter !== undefined && { startAfter }),
        }),
        this.requestTimeoutMs,
        this.clock,
        `list ${this.prefix}`,
        signal,
      );
      revision ??= page.revision;
      for (const kv of page.items) {
        const obj = this.tryDecode(kv);
        if (obj !== undefined) entries.set(kv.key, { obj: obj.value, modRevision: kv.modRevision });
      }
      const last = page.items.at(-1);
      if (!page.more || last === undefined) break;
      startAfter = last.key;
    }
    return { entries, revision };
  }

  /** Swap in a snapshot read at `revision`, emitting what changed relative to the cache. */
  private replace(next: Map<string, Entry<T>>, revision: number): void {
    const previous = this.cache;
    this.cache = next;
    this.lastListRevision = revision;
    this.resume = revision + 1;
    this.metrics.objects.set({ name: this.name }, next.size);
    if (!this.synced) {
      this.synced = true;
      for (const [key, e] of next) this.emitAdd(e.obj, key, true);
      this.log.info({ revision, objects: next.size }, "synced");
      for (const w of this.syncWaiters.splice(0)) w.resolve();
    } else {
      let added = 0;
      let updated = 0;
      let deleted = 0;
      for (const [key, e] of next) {
        const old = previous.get(key);
        if (old === undefined) {
          added++;
          this.emitAdd(e.obj, key, false);
        } else if (old.modRevision !== e.modRevision) {
          updated++;
          this.emitUpdate(old.obj, e.obj, key);
        }
      }
      for (const [key, old] of previous) {
        if (next.has(key)) continue;
        deleted++;
        this.emitDelete(old.obj, key, true);
      }
      this.log.info({ revision, objects: next.size, added, updated, deleted }, "relisted");
    }
    this.releaseRevisionWaiters();
  }

  /** Watch from the resume revision; resolves with the reason once the watch is no longer usable. */
  private watchUntilBroken(signal: AbortSignal): Promise<RelistReason | "stopped"> {
    return new Promise<RelistReason | "stopped">((resolve) => {
      let finished = false;
      let tick: { cancel(): void } | undefined;
      let watch: { requestProgress(): void; close(): Promise<void> } | undefined;
      const finish = (reason: RelistReason | "stopped", error?: unknown) => {
        if (finished) return;
        finished = true;
        tick?.cancel();
        signal.removeEventListener("abort", onAbort);
        if (reason !== "stopped") {
          this.log.warn({ err: error, reason, resumeRevision: this.resume }, "watch ended");
        }
        watch?.close().catch(() => {});
        resolve(reason);
      };
      const onAbort = () => finish("stopped");
      signal.addEventListener("abort", onAbort, { once: true });

      this.lastActivityAt = this.clock.now();
      try {
        watch = this.source.watch(this.prefix, this.resume, {
          // Events or progress after finish() belong to a watch we abandoned: ignore them, the
          // relist that follows covers them.
          onEvents: (events) => {
            if (finished) return;
            this.lastActivityAt = this.clock.now();
            this.applyEvents(events);
          },
          onProgress: (revision) => {
            if (finished) return;
            this.lastActivityAt = this.clock.now();
            if (revision + 1 > this.resume) {
              this.resume = revision + 1;
              this.releaseRevisionWaiters();
            }
          },
          onError: (error) => finish(isCompactedError(error) ? "compacted" : "watch-error", error),
        });
      } catch (e) {
        finish("watch-error", e);
        return;
      }
      if (finished) {
        // onError ran synchronously inside watch(), before `watch` was assigned.
        watch.close().catch(() => {});
        return;
      }

      // Liveness: a stream can die without an error (half-open TCP, etcd3 #72/#153). When nothing
      // has arrived for progressIntervalMs we ask for a progress notification; when nothing has
      // arrived for livenessTimeoutMs the watch is declared broken.
      const check = () => {
        const silentMs = this.clock.now() - this.lastActivityAt;
        if (silentMs >= this.livenessTimeoutMs) {
          finish("liveness", new Error(`watch silent for ${silentMs} ms`));
          return;
        }
        if (silentMs >= this.progressIntervalMs) watch?.requestProgress();
        // requestProgress() may end the watch synchronously (its onError): finish() then cancelled
        // the tick that is running now, and a finished watch must not re-arm.
        if (!finished) tick = this.clock.setTimer(this.progressIntervalMs, check);
      };
      tick = this.clock.setTimer(this.progressIntervalMs, check);
    });
  }

  private applyEvents(events: WatchEventLike[]): void {
    for (const ev of events) {
      const key = ev.kv.key;
      const old = this.cache.get(key);
      // Defensive: a store that replays an event the cache already has (same or older revision)
      // must not produce a spurious update or move the cache backwards.
      if (old !== undefined && old.modRevision >= ev.kv.modRevision) continue;
      if (ev.type === "delete") {
        if (old === undefined) continue;
        this.cache.delete(key);
        this.emitDelete(old.obj, key, false);
        continue;
      }
      const decoded = this.tryDecode(ev.kv);
      if (decoded === undefined) {
        // The key no longer holds a valid object: the cache holds only decodable objects.
        if (old === undefined) continue;
        this.cache.delete(key);
        this.emitDelete(old.obj, key, false);
        continue;
      }
      this.cache.set(key, { obj: decoded.value, modRevision: ev.kv.modRevision });
      if (old === undefined) this.emitAdd(decoded.value, key, false);
      else this.emitUpdate(old.obj, decoded.value, key);
    }
    const last = events.at(-1);
    if (last !== undefined && last.kv.modRevision + 1 > this.resume) this.resume = last.kv.modRevision + 1;
    this.metrics.objects.set({ name: this.name }, this.cache.size);
    this.releaseRevisionWaiters();
  }

  private tryDecode(kv: KeyValueLike): { value: T } | undefined {
    try {
      return { value: this.decode(kv) };
    } catch (e) {
      this.metrics.decodeErrors.inc({ name: this.name });
      this.log.warn({ err: e, key: kv.key, modRevision: kv.modRevision }, "value does not decode; left out of the cache");
      return undefined;
    }
  }

  private releaseRevisionWaiters(): void {
    if (this.revisionWaiters.length === 0) return;
    const reached = this.cacheRevision();
    this.revisionWaiters = this.revisionWaiters.filter((w) => {
      if (w.revision > reached) return true;
      w.resolve();
      return false;
    });
  }

  private emitAdd(obj: T, key: string, isInInitialList: boolean): void {
    for (const h of this.handlers) if (h.onAdd) this.invoke(() => h.onAdd?.(obj, key, { isInInitialList }));
  }

  private emitUpdate(oldObj: T, newObj: T, key: string): void {
    for (const h of this.handlers) if (h.onUpdate) this.invoke(() => h.onUpdate?.(oldObj, newObj, key));
  }

  private emitDelete(obj: T, key: string, finalStateUnknown: boolean): void {
    for (const h of this.handlers) if (h.onDelete) this.invoke(() => h.onDelete?.(obj, key, { finalStateUnknown }));
  }

  private invoke(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.metrics.handlerErrors.inc({ name: this.name });
      this.log.error({ err: e }, "event handler threw; informer continues");
    }
  }
}
