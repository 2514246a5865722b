// When a pass wants to run again: every decision that has something due later (a GC time, the end
// of an update wait, a back-off, the next full refresh) adds its time, and the pass ends asking to
// be requeued at the earliest of them. Shared by the PodGroup and Dependency passes.
//
// Invariants, kept here: the requeue is never sooner than `asap` (1 ms), so a time already past
// runs the key again at once but never makes a zero or negative delay; and a time is never lost
// by being added late: result() reads every time added so far.
import type { Result } from "../../runtime/result.ts";

/** The shortest requeue: "again, at once". */
export const asap = 1;

export class Wakeups {
  private readonly times: number[] = [];

  /** Wall-clock ms at which the pass wants to run again. */
  add(...times: number[]): void {
    this.times.push(...times);
  }

  /** The Result that requeues at the earliest time added, counted from `now` (wall-clock ms). */
  result(now: number): Result {
    const at = Math.min(...this.times);
    return { requeueAfterMs: Math.max(asap, Math.ceil(at - now)) };
  }
}
