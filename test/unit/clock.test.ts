import { describe, expect, it } from "vitest";
import { FakeClock } from "../../runtime/clock.ts";

describe("FakeClock", () => {
  it("fires due timers in time order, ties in creation order, and only when advanced", () => {
    const clock = new FakeClock(1000);
    const fired: string[] = [];
    clock.setTimer(50, () => fired.push("b"));
    clock.setTimer(10, () => fired.push("a"));
    clock.setTimer(50, () => fired.push("c"));
    const cancelled = clock.setTimer(20, () => fired.push("x"));
    cancelled.cancel();
    clock.advance(49);
    expect(fired).toEqual(["a"]);
    expect(clock.now()).toBe(1049);
    clock.advance(1);
    expect(fired).toEqual(["a", "b", "c"]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it("fires a timer armed by a firing timer within the same advance when it is due", () => {
    const clock = new FakeClock();
    const at: number[] = [];
    clock.setTimer(5, () => {
      at.push(clock.now());
      clock.setTimer(5, () => at.push(clock.now()));
    });
    clock.advance(100);
    expect(at).toEqual([5, 10]);
  });

  it("sleep resolves on advance and rejects on abort", async () => {
    const clock = new FakeClock();
    let done = false;
    const p = clock.sleep(100).then(() => (done = true));
    await clock.advanceAsync(99);
    expect(done).toBe(false);
    await clock.advanceAsync(1);
    await p;
    expect(done).toBe(true);
    const ac = new AbortController();
    const q = clock.sleep(100, ac.signal);
    ac.abort(new Error("stop"));
    await expect(q).rejects.toThrow("stop");
    expect(clock.pendingTimers()).toBe(0);
  });
});
