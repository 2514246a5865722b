// Reconnect back-off for list/watch and election retries: client-go's
// NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0): the delay doubles from `initialMs` up
// to `maxMs`, each delay is stretched by up to `jitter` x itself at random so that many clients
// that lost the same server do not come back in lock-step, and the sequence starts over once
// `resetAfterMs` has passed since the previous failure (the connection was healthy that long).
import type { Clock } from "./clock.ts";

export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  factor?: number;
  /** 0 = no jitter; 1 = each delay is uniformly in [d, 2d] (then capped at maxMs). */
  jitter?: number;
  resetAfterMs?: number;
}

export const defaultReconnectBackoff = {
  initialMs: 800,
  maxMs: 30_000,
  factor: 2,
  jitter: 1,
  resetAfterMs: 120_000,
} as const satisfies Required<BackoffOptions>;

export class Backoff {
  private readonly opts: Required<BackoffOptions>;
  private nextBaseMs: number;
  private lastFailureAt: number | undefined;

  constructor(
    private readonly clock: Clock,
    options: BackoffOptions = {},
    private readonly random: () => number = Math.random,
  ) {
    this.opts = { ...defaultReconnectBackoff, ...options };
    if (!(this.opts.initialMs > 0) || !(this.opts.maxMs >= this.opts.initialMs)) {
      throw new RangeError(`backoff: need 0 < initialMs <= maxMs (got ${this.opts.initialMs}, ${this.opts.maxMs})`);
    }
    this.nextBaseMs = this.opts.initialMs;
  }

  /** Record a failure and return how long to wait before the next attempt. */
  next(): number {
    const now = this.clock.now();
    if (this.lastFailureAt !== undefined && now - this.lastFailureAt > this.opts.resetAfterMs) {
      this.nextBaseMs = this.opts.initialMs;
    }
    this.lastFailureAt = now;
    const base = this.nextBaseMs;
    this.nextBaseMs = Math.min(this.opts.maxMs, base * this.opts.factor);
    return Math.min(this.opts.maxMs, base * (1 + this.random() * this.opts.jitter));
  }
}
