// Per-key retry back-off: jittered exponential, capped, forgotten on success or after a quiet spell.
//
// Deliberately no global token bucket (client-go's default MaxOf(exponential, 10 qps bucket)): the
// bucket is shared by every key and its reservations are never returned, so a bulk requeue of N keys
// waits N/10 s before the last one runs (kubernetes#104554: 10k keys, 16 min). Load on dependencies
// is bounded by worker concurrency instead. controller-runtime's priority queue dropped it too.
import { realClock, type Clock } from "../clock.ts";
import { WorkQueueArgumentError } from "./errors.ts";

export interface BackoffOptions {
  /** Delay ceiling for the first failure; doubles per consecutive failure. Default 50 ms. */
  baseMs?: number;
  /** Cap on the delay ceiling. Default 300_000 (5 min). */
  maxMs?: number;
  /**
   * "full" (default): the delay is uniform in [0, ceiling), so keys that failed together do not
   * retry together. "none": the delay is the ceiling itself.
   */
  jitter?: "full" | "none";
  /**
   * A key's failure count is forgotten when it has not failed again for this long after the retry
   * its last failure scheduled. Default 600_000 (10 min); Infinity disables it.
   */
  forgetAfterMs?: number;
  /** Source of uniform [0, 1) numbers for jitter. Default Math.random. */
  random?: () => number;
}

export const backoffDefaults = {
  baseMs: 50,
  maxMs: 300_000,
  jitter: "full",
  forgetAfterMs: 600_000,
} as const;

interface FailureRecord {
  failures: number;
  /** Clock time of the last failure: the map's iteration order is ascending in it. */
  lastAt: number;
  /** Forgotten from this clock time on, unless it fails again. */
  forgetAt: number;
}

export class ExponentialBackoff<K extends string = string> {
  private readonly clock: Clock;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly fullJitter: boolean;
  private readonly forgetAfterMs: number;
  private readonly random: () => number;
  // Insertion order = order of last failure, because next() deletes and re-inserts the key; the
  // clock is monotonic, so the first entry is always the longest quiet one (see sweep()).
  private readonly records = new Map<K, FailureRecord>();

  constructor(opts: BackoffOptions & { clock?: Clock } = {}) {
    this.clock = opts.clock ?? realClock;
    this.baseMs = opts.baseMs ?? backoffDefaults.baseMs;
    this.maxMs = opts.maxMs ?? backoffDefaults.maxMs;
    const jitter = opts.jitter ?? backoffDefaults.jitter;
    this.forgetAfterMs = opts.forgetAfterMs ?? backoffDefaults.forgetAfterMs;
    this.random = opts.random ?? Math.random;
    if (!(Number.isFinite(this.baseMs) && this.baseMs > 0)) {
      throw new WorkQueueArgumentError("backoff.baseMs", `must be a finite number > 0, got ${this.baseMs}`);
    }
    if (!(Number.isFinite(this.maxMs) && this.maxMs >= this.baseMs)) {
      throw new WorkQueueArgumentError("backoff.maxMs", `must be a finite number >= baseMs (${this.baseMs}), got ${this.maxMs}`);
    }
    if (jitter !== "full" && jitter !== "none") {
      throw new WorkQueueArgumentError("backoff.jitter", `must be "full" or "none", got ${String(jitter)}`);
    }
    if (!(this.forgetAfterMs > 0)) {
      throw new WorkQueueArgumentError("backoff.forgetAfterMs", `must be > 0 (Infinity to never auto-forget), got ${this.forgetAfterMs}`);
    }
    if (typeof this.random !== "function") {
      throw new WorkQueueArgumentError("backoff.random", "must be a function returning numbers in [0, 1)");
    }
    this.fullJitter = jitter === "full";
  }

  /** Count a failure of `key` and return how long to wait before retrying it, in ms. */
  next(key: K): number {
    const now = this.clock.now();
    this.sweep(now);
    const failures = this.failuresAt(key, now);
    // 2 ** failures reaches Infinity after 1024 failures; min() turns that into maxMs.
    const ceiling = Math.min(this.maxMs, this.baseMs * 2 ** failures);
    const delay = this.fullJitter ? this.random() * ceiling : ceiling;
    this.records.delete(key);
    this.records.set(key, { failures: failures + 1, lastAt: now, forgetAt: now + delay + this.forgetAfterMs });
    return delay;
  }

  /** Clear `key`'s failure count: call after it succeeds. */
  forget(key: K): void {
    this.records.delete(key);
  }

  /** Consecutive failures counted for `key` and not yet forgotten. */
  failures(key: K): number {
    return this.failuresAt(key, this.clock.now());
  }

  private failuresAt(key: K, now: number): number {
    const r = this.records.get(key);
    if (r === undefined) return 0;
    if (now >= r.forgetAt) {
      this.records.delete(key);
      return 0;
    }
    return r.failures;
  }

  // Bounds memory for keys that fail and then vanish without a forget(): any record whose last
  // failure is older than maxMs + forgetAfterMs is forgotten whatever its delay was (delay <= maxMs).
  // Records are in lastAt order, so this only looks at the front: amortised O(1) per failure.
  private sweep(now: number): void {
    const horizon = now - this.maxMs - this.forgetAfterMs;
    for (const [key, r] of this.records) {
      if (r.lastAt > horizon) break;
      this.records.delete(key);
    }
  }
}
