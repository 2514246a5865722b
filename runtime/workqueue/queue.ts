// The reconcile work queue: client-go's queue semantics (dedup, one worker per key, adds during
// processing coalesce into one rerun) with controller-runtime's priority-queue model (one entry per
// key, either ready or waiting), plus priority aging so low-priority keys cannot starve.
//
// Every key known to the queue is in exactly one of these places:
//   ready       entry in `ready` heap (and `entries`)        can be handed out now
//   waiting     entry in `waiting` heap (and `entries`)      due at entry.readyAt, one timer armed
//   parked      entry only in `entries`, key in `processing` re-added while a worker holds it
//   processing  key in `processing`, no entry                held by exactly one worker
// Node runs this single-threaded, so each public method moves keys between these places atomically.
import { realClock, type Clock, type TimerHandle } from "../clock.ts";
import { ExponentialBackoff, type BackoffOptions } from "./backoff.ts";
import { WorkQueueArgumentError } from "./errors.ts";
import { IndexedHeap } from "./heap.ts";
import type { QueueCounters, WorkQueueMetricsProvider } from "./metrics.ts";

export interface AddOptions {
  /** Higher is handed out first. Default 0; merged adds keep the max. */
  priority?: number;
  /** Do not hand the key out before this many ms from now. <= 0 means now; merged adds keep the earliest. */
  afterMs?: number;
}

export interface WorkQueueOptions {
  /** Names the queue in metrics (labels `name` and `controller`) and errors. */
  name: string;
  clock?: Clock;
  /** Back-off for addRateLimited(). */
  backoff?: BackoffOptions;
  /**
   * Waiting this many ms raises a ready key's effective priority by 1. Default 100: a -100
   * (initial list, resync) key ranks with fresh priority-0 keys after 10 s. Infinity disables aging.
   */
  agingMsPerPriority?: number;
  metrics?: WorkQueueMetricsProvider;
}

export type GetResult<K> = { shutdown: false; key: K; priority: number } | { shutdown: true };

export const workQueueDefaults = { agingMsPerPriority: 100 } as const;

const READY = 0;
const WAITING = 1;
const PARKED = 2;
type EntryState = typeof READY | typeof WAITING | typeof PARKED;

/** Node clamps longer setTimeout delays to 1 ms; a longer wait re-arms when the timer fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const SHUTDOWN: GetResult<never> = Object.freeze({ shutdown: true });

class Entry<K> {
  heapIndex = -1;
  /** Ready heap key: priority * agingMsPerPriority - readyAt (or priority alone without aging). */
  score = 0;
  /** Order of becoming ready (or of being added, while waiting): the tie-breaker in both heaps. */
  seq = 0;
  state: EntryState = READY;

  constructor(
    readonly key: K,
    /** Max of the priorities of the adds merged into this entry. */
    public priority: number,
    /** Min of the due times of the adds merged into this entry (clock ms). */
    public readyAt: number,
  ) {}
}

interface Waiter<K> {
  resolve: (r: GetResult<K>) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

// Aging (see agingMsPerPriority): at time t a ready entry ranks by p + (t - readyAt) / A. For two
// entries the comparison p1 + (t - r1)/A > p2 + (t - r2)/A does not depend on t, so ordering by the
// fixed score p*A - readyAt is exact at every instant and a plain heap suffices. Ties: earlier seq.
function readyBefore<K>(a: Entry<K>, b: Entry<K>): boolean {
  return a.score > b.score || (a.score === b.score && a.seq < b.seq);
}

function dueBefore<K>(a: Entry<K>, b: Entry<K>): boolean {
  return a.readyAt < b.readyAt || (a.readyAt === b.readyAt && a.seq < b.seq);
}

// Bad input throws before any state changes.
function checkArgs(key: unknown, priority: number, afterMs: number): void {
  if (typeof key !== "string") throw new WorkQueueArgumentError("key", `must be a string, got ${typeof key}`);
  if (!Number.isFinite(priority)) throw new WorkQueueArgumentError("priority", `must be a finite number, got ${priority}`);
  if (!Number.isFinite(afterMs)) throw new WorkQueueArgumentError("afterMs", `must be a finite number, got ${afterMs}`);
}

export class WorkQueue<K extends string = string> {
  readonly name: string;
  private readonly clock: Clock;
  private readonly backoff: ExponentialBackoff<K>;
  private readonly agingMsPerPriority: number;
  private readonly counters: QueueCounters | undefined;

  /** One entry per queued key (ready, waiting or parked): this map is what dedups adds. */
  private readonly entries = new Map<K, Entry<K>>();
  private readonly ready = new IndexedHeap<Entry<K>>(readyBefore);
  private readonly waiting = new IndexedHeap<Entry<K>>(dueBefore);
  /** Keys handed out and not yet done(), with their hand-out time (0 without metrics). */
  private readonly processing = new Map<K, number>();
  /** get() calls waiting for a key, oldest first. Non-empty only while `ready` is empty. */
  private readonly waiters: Waiter<K>[] = [];
  private readonly drainWaiters: (() => void)[] = [];
  private seq = 0;
  /** The one timer, armed at or before the earliest waiting entry's readyAt while any waits. */
  private timer: TimerHandle | undefined;
  private timerAt = Infinity;
  private shutdown = false;

  constructor(opts: WorkQueueOptions) {
    if (typeof opts?.name !== "string" || opts.name === "") {
      throw new WorkQueueArgumentError("name", "must be a non-empty string");
    }
    this.name = opts.name;
    this.clock = opts.clock ?? realClock;
    this.backoff = new ExponentialBackoff<K>({ ...opts.backoff, clock: this.clock });
    this.agingMsPerPriority = opts.agingMsPerPriority ?? workQueueDefaults.agingMsPerPriority;
    if (!(this.agingMsPerPriority > 0)) {
      throw new WorkQueueArgumentError("agingMsPerPriority", `must be > 0 (Infinity disables aging), got ${this.agingMsPerPriority}`);
    }
    this.counters = opts.metrics?.attach({
      name: this.name,
      readyPriorities: () => this.ready.values().map((e) => e.priority),
      processingStartTimes: () => this.processing.values(),
      now: () => this.clock.now(),
    });
  }

  /** Queue `key`, now or after `afterMs`. Ignored after shutDown(). */
  add(key: K, opts?: AddOptions): void {
    let priority = 0;
    let afterMs = 0;
    if (opts !== undefined) {
      if (opts.priority !== undefined) priority = opts.priority;
      if (opts.afterMs !== undefined) afterMs = opts.afterMs;
    }
    checkArgs(key, priority, afterMs);
    if (this.shutdown) return;
    const now = this.clock.now();
    const delayed = afterMs > 0;
    if (delayed && this.counters !== undefined) this.counters.retries++;
    const readyAt = delayed ? now + afterMs : now;

    const e = this.entries.get(key);
    if (e === undefined) {
      const entry = new Entry(key, priority, readyAt);
      this.entries.set(key, entry);
      // Never two workers per key: a key being processed waits, parked, for its done().
      if (this.processing.has(key)) entry.state = PARKED;
      else if (delayed) this.toWaiting(entry);
      else this.toReady(entry);
      return;
    }

    // One entry per key: merge into it. priority = max, readyAt = min.
    switch (e.state) {
      case READY:
        // A ready entry's readyAt is <= now <= readyAt, so only the priority can change, and a
        // delayed add never delays an already-ready key.
        if (priority > e.priority) {
          e.priority = priority;
          e.score = this.score(e);
          this.ready.update(e);
        }
        return;
      case WAITING: {
        if (priority > e.priority) e.priority = priority;
        const earlier = readyAt < e.readyAt;
        if (earlier) e.readyAt = readyAt;
        if (e.readyAt <= now) {
          // Due now (also when its timer is merely late): it leaves `waiting` in the same step it
          // enters `ready`, so it is never in both and never handed out twice.
          this.waiting.remove(e);
          if (this.waiting.size === 0) this.disarmTimer();
          this.toReady(e);
        } else if (earlier) {
          this.waiting.update(e);
          this.armTimer();
        }
        return;
      }
      case PARKED:
        if (priority > e.priority) e.priority = priority;
        if (readyAt < e.readyAt) e.readyAt = readyAt;
        return;
    }
  }

  /** Queue `key` after its back-off delay, counting a failure. Ignored after shutDown(). */
  addRateLimited(key: K, opts?: { priority?: number }): void {
    checkArgs(key, opts?.priority ?? 0, 0); // before next(), which counts a failure
    if (this.shutdown) return;
    const afterMs = this.backoff.next(key);
    // A full-jitter delay can come out as 0; it is still a rate-limited requeue.
    if (afterMs <= 0 && this.counters !== undefined) this.counters.retries++;
    this.add(key, { priority: opts?.priority, afterMs });
  }

  /** Reset `key`'s back-off (call after it succeeds). Does not remove it from the queue. */
  forget(key: K): void {
    this.backoff.forget(key);
  }

  numRequeues(key: K): number {
    return this.backoff.failures(key);
  }

  /**
   * The next key to process, highest effective priority first, or {shutdown: true} once the queue
   * is shut down and no ready key is left. The caller owns the key until done(key): call done in
   * a finally. Rejects with the signal's reason if `signal` aborts before a key is handed out.
   */
  get(signal?: AbortSignal): Promise<GetResult<K>> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const e = this.ready.pop();
    if (e !== undefined) return Promise.resolve(this.handOut(e));
    // After shutdown nothing can become ready again (adds ignored, waiting and parked dropped),
    // so an empty ready set means shutdown for this and every later get().
    if (this.shutdown) return Promise.resolve(SHUTDOWN);
    return new Promise<GetResult<K>>((resolve, reject) => {
      const waiter: Waiter<K> = { resolve, signal, onAbort: undefined };
      if (signal !== undefined) {
        waiter.onAbort = () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.waiters.push(waiter);
    });
  }

  /** Release `key` after processing. If it was re-added meanwhile it is queued again, once. Unknown keys are ignored. */
  done(key: K): void {
    const startedAt = this.processing.get(key);
    if (startedAt === undefined) return;
    this.processing.delete(key);
    const parked = this.entries.get(key);
    if (this.counters !== undefined || parked !== undefined) {
      const now = this.clock.now();
      if (this.counters !== undefined) this.counters.workDuration.observe(Math.max(0, now - startedAt) / 1000);
      // Adds while processing merged into one parked entry: requeue it exactly once, now or when due.
      if (parked !== undefined) {
        if (parked.readyAt <= now) this.toReady(parked);
        else this.toWaiting(parked);
      }
    }
    if (this.shutdown) this.checkDrained();
  }

  /** Number of keys ready to be handed out now. */
  len(): number {
    return this.ready.size;
  }

  /**
   * Stop the queue. From now on adds are ignored; keys already ready are still handed out by get();
   * keys waiting for a delay and keys re-added while processing are dropped (controllers are
   * level-triggered: the next start relists). When no ready key is left, every pending and future
   * get() returns {shutdown: true}.
   */
  shutDown(): void {
    if (this.shutdown) return;
    this.shutdown = true;
    this.disarmTimer();
    this.waiting.clear();
    for (const [key, e] of this.entries) if (e.state !== READY) this.entries.delete(key);
    // Waiters exist only while nothing is ready, so all of them are released.
    for (const w of this.waiters.splice(0)) this.settle(w, SHUTDOWN);
    this.checkDrained();
  }

  /**
   * shutDown(), then resolve once every ready key has been handed out and every handed-out key is
   * done(). Workers must keep calling get() until it says shutdown. Rejects with the signal's
   * reason if `signal` aborts first (the queue stays shut down).
   */
  shutDownWithDrain(signal?: AbortSignal): Promise<void> {
    this.shutDown();
    if (this.isDrained()) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.drainWaiters.indexOf(onDrained);
        if (i >= 0) this.drainWaiters.splice(i, 1);
        reject(signal?.reason);
      };
      const onDrained = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.drainWaiters.push(onDrained);
    });
  }

  shuttingDown(): boolean {
    return this.shutdown;
  }

  /** A copy of which keys are where, for tests and debugging. O(n). */
  snapshot(): { ready: K[]; waiting: K[]; parked: K[]; processing: K[]; waiters: number } {
    const parked: K[] = [];
    for (const e of this.entries.values()) if (e.state === PARKED) parked.push(e.key);
    return {
      ready: this.ready.values().map((e) => e.key),
      waiting: this.waiting.values().map((e) => e.key),
      parked,
      processing: [...this.processing.keys()],
      waiters: this.waiters.length,
    };
  }

  private score(e: Entry<K>): number {
    const a = this.agingMsPerPriority;
    // Without aging, priority alone; FIFO within it comes from seq.
    return a === Infinity ? e.priority : e.priority * a - e.readyAt;
  }

  private toReady(e: Entry<K>): void {
    e.state = READY;
    e.seq = this.seq++;
    e.score = this.score(e);
    if (this.counters !== undefined) this.counters.adds++;
    this.ready.push(e);
    // Keep "waiters only while nothing is ready": the best ready entry goes to the oldest waiter.
    if (this.waiters.length > 0) this.settle(this.waiters.shift()!, this.handOut(this.ready.pop()!));
  }

  private toWaiting(e: Entry<K>): void {
    e.state = WAITING;
    e.seq = this.seq++;
    this.waiting.push(e);
    this.armTimer();
  }

  private handOut(e: Entry<K>): GetResult<K> {
    this.entries.delete(e.key);
    let now = 0;
    if (this.counters !== undefined) {
      now = this.clock.now();
      this.counters.queueDuration.observe(Math.max(0, now - e.readyAt) / 1000);
    }
    this.processing.set(e.key, now);
    return { shutdown: false, key: e.key, priority: e.priority };
  }

  private settle(w: Waiter<K>, r: GetResult<K>): void {
    if (w.onAbort !== undefined) w.signal!.removeEventListener("abort", w.onAbort);
    w.resolve(r);
  }

  // One timer for the whole waiting heap, armed for its earliest entry. An entry that leaves early
  // (re-added without delay) may leave the timer armed too early: it then fires, finds nothing due
  // and re-arms, one wake-up and no polling.
  private armTimer(): void {
    const top = this.waiting.peek();
    if (top === undefined || this.timerAt <= top.readyAt) return;
    this.timer?.cancel();
    this.timerAt = top.readyAt;
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, top.readyAt - this.clock.now()));
    this.timer = this.clock.setTimer(delay, this.onTimer);
  }

  private disarmTimer(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock.now();
    // Move everything due at once, so waiters get the best of them rather than the first due.
    let top = this.waiting.peek();
    const due: Entry<K>[] = [];
    while (top !== undefined && top.readyAt <= now) {
      this.waiting.pop();
      due.push(top);
      top = this.waiting.peek();
    }
    if (due.length > 0) this.promote(due);
    // Also re-arms when a real timer fired a fraction of a ms early (top not yet due).
    this.armTimer();
  };

  private promote(due: Entry<K>[]): void {
    if (this.waiters.length === 0) {
      for (const e of due) this.toReady(e);
      return;
    }
    // Waiters are present, so ready is empty: fill it first, then serve waiters best-first.
    const held = this.waiters.splice(0);
    for (const e of due) this.toReady(e);
    for (const w of held) {
      const e = this.ready.pop();
      if (e === undefined) {
        this.waiters.push(w);
        continue;
      }
      this.settle(w, this.handOut(e));
    }
  }

  private isDrained(): boolean {
    return this.processing.size === 0 && this.ready.size === 0;
  }

  private checkDrained(): void {
    if (this.drainWaiters.length === 0 || !this.isDrained()) return;
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }
}
