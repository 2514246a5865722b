// Time, injected. The work queue, back-off, informer resync and leader election take a Clock so that
// their tests run on FakeClock in milliseconds of real time, deterministically.

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since an arbitrary epoch; monotonic for RealClock. */
  now(): number;
  /** Run `fn` once after `ms` milliseconds. */
  setTimer(ms: number, fn: () => void): TimerHandle;
  /** Resolve after `ms`; reject with the signal's reason if it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export class RealClock implements Clock {
  now(): number {
    return performance.now();
  }

  setTimer(ms: number, fn: () => void): TimerHandle {
    const t = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(t) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        clearTimeout(t);
        reject(signal?.reason);
      };
      const t = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, Math.max(0, ms));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

export const realClock: Clock = new RealClock();

interface FakeTimer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when told. Timers due at or before the new time fire in time order
 * (ties in creation order) during advance(); a timer created by a firing timer fires in the same
 * advance() if it is due.
 */
export class FakeClock implements Clock {
  private current: number;
  private seq = 0;
  private timers: FakeTimer[] = [];

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void): TimerHandle {
    const timer: FakeTimer = { at: this.current + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const handle = this.setTimer(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      const onAbort = () => {
        handle.cancel();
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Move time forward by `ms`, firing due timers in order. */
  advance(ms: number): void {
    const target = this.current + ms;
    while (this.fireNext(target));
    this.finishAdvance(target);
  }

  /** Advance by `ms`, letting promise callbacks run between timer firings. */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.current + ms;
    do await flushMicrotasks();
    while (this.fireNext(target));
    this.finishAdvance(target);
    await flushMicrotasks();
  }

  /** Fire the earliest timer due by `limit`, moving time to it; false when none is due. */
  private fireNext(limit: number): boolean {
    const next = this.nextDue(limit);
    if (!next) return false;
    this.current = Math.max(this.current, next.at);
    next.cancelled = true;
    next.fn();
    return true;
  }

  private finishAdvance(target: number): void {
    this.current = target;
    this.timers = this.timers.filter((t) => !t.cancelled);
  }

  /** Number of timers still armed. */
  pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  private nextDue(limit: number): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) {
      if (t.cancelled || t.at > limit) continue;
      if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/** Let every queued promise callback run (several turns, since callbacks queue callbacks). */
export async function flushMicrotasks(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}
