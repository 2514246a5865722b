import { describe, expect, it } from "vitest";
import { FakeClock } from "../../../runtime/clock.ts";
import { WorkQueue } from "../../../runtime/workqueue/index.ts";
import { drain, take } from "./helpers.ts";

describe("WorkQueue: priorities", () => {
  it("hands out higher priority first, FIFO within a priority", async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ name: "p", clock });
    q.add("low-1", { priority: -100 });
    q.add("mid-1");
    q.add("high-1", { priority: 10 });
    q.add("mid-2");
    q.add("low-2", { priority: -100 });
    q.add("high-2", { priority: 10 });
    q.add("mid-3", { priority: 0 });
    expect(await drain(q)).toEqual(["high-1", "high-2", "mid-1", "mid-2", "mid-3", "low-1", "low-2"]);
  });

  it("an add with a higher priority raises a ready key; a lower one does not lower it", async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ name: "p", clock });
    q.add("a");
    q.add("b");
    q.add("c");
    q.add("c", { priority: 1 });
    q.add("a", { priority: -50 });
    expect(await take(q)).toEqual({ key: "c", priority: 1 });
    expect(await take(q)).toEqual({ key: "a", priority: 0 });
  });

  it("FIFO within a priority follows readyAt: a delayed key ranks by when it became due", async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ name: "p", clock });
    q.add("delayed", { afterMs: 10 });
    clock.advance(5);
    q.add("early");
    clock.advance(10);
    q.add("late");
    expect(await drain(q)).toEqual(["early", "delayed", "late"]);
  });

  it("ages waiting keys: a key gains 1 priority per agingMsPerPriority it has been ready", async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ name: "p", clock, agingMsPerPriority: 100 });
    q.add("old-low", { priority: -1 });
    clock.advance(50);
    q.add("fresh-0"); // at t=50 old-low is worth -1 + 0.5 < 0
    expect((await take(q)).key).toBe("fresh-0");
    q.done("fresh-0");
    clock.advance(101);
    q.add("fresh-0b"); // at t=151 old-low is worth -1 + 1.51 > 0
    expect((await take(q)).key).toBe("old-low");
  });

  it("without aging, priority wins whatever the wait", async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ name: "p", clock, agingMsPerPriority: Infinity });
    q.add("old-low", { priority: -1 });
    clock.advance(1_000_000);
    q.add("fresh-0");
    expect(await drain(q)).toEqual(["fresh-0", "old-low"]);
  });
});

describe("WorkQueue: starvation", () => {
  // One worker takes 1 ms per key while a flood adds 2 fresh priority-0 keys per ms, so the queue
  // never empties. A priority -100 key arrives at t = lowAt. With aging A ms per priority it ranks
  // like a priority-0 key that became ready at lowAt + 100*A, so exactly the keys that became
  // ready before then are ahead of it: FLOOD * (lowAt + 100*A) of them, drained at WORKER keys/ms.
  const FLOOD_PER_MS = 2;
  const WORKER_PER_MS = 1;
  const LOW_AT = 1_000;

  async function handOutTime(agingMsPerPriority: number, horizonMs: number): Promise<number | undefined> {
    const clock = new FakeClock(0);
    const q = new WorkQueue({ name: "flood", clock, agingMsPerPriority });
    let n = 0;
    for (let t = 0; t < horizonMs; t++) {
      for (let i = 0; i < FLOOD_PER_MS; i++) q.add(`flood-${n++}`);
      if (t === LOW_AT) q.add("low", { priority: -100 });
      for (let i = 0; i < WORKER_PER_MS; i++) {
        const r = await q.get();
        if (r.shutdown) throw new Error("unexpected shutdown");
        q.done(r.key);
        if (r.key === "low") return t;
      }
      clock.advance(1);
    }
    return undefined;
  }

  it("hands the low-priority key out within the bound computed from agingMsPerPriority", async () => {
    const aging = 100;
    const catchUpAt = LOW_AT + 100 * aging;
    const bound = (FLOOD_PER_MS * catchUpAt) / WORKER_PER_MS;
    const at = await handOutTime(aging, 3 * bound);
    expect(at).toBeDefined();
    // Not before it has aged to par with fresh keys (priority still means something)...
    expect(at!).toBeGreaterThanOrEqual(catchUpAt);
    // ...and no later than the backlog that outranked it takes to drain.
    expect(at!).toBeLessThanOrEqual(bound);
  });

  it("starves it without aging (the bound above is what aging buys)", async () => {
    const bound = (FLOOD_PER_MS * (LOW_AT + 100 * 100)) / WORKER_PER_MS;
    expect(await handOutTime(Infinity, 3 * bound)).toBeUndefined();
  });
});
