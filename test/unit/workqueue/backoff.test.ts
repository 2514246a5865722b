import { describe, expect, it } from "vitest";
import { FakeClock } from "../../../runtime/clock.ts";
import { ExponentialBackoff, WorkQueueArgumentError } from "../../../runtime/workqueue/index.ts";
import { mulberry32 } from "./helpers.ts";

describe("ExponentialBackoff", () => {
  it("defaults: 50 ms doubling per failure, capped at 5 min", () => {
    const b = new ExponentialBackoff({ clock: new FakeClock(), jitter: "none" });
    const delays = Array.from({ length: 16 }, () => b.next("k"));
    expect(delays.slice(0, 5)).toEqual([50, 100, 200, 400, 800]);
    expect(delays[12]).toBe(204_800);
    expect(delays[13]).toBe(300_000);
    expect(delays[15]).toBe(300_000);
    expect(b.failures("k")).toBe(16);
    expect(b.failures("other")).toBe(0);
  });

  it("stays at the cap for any number of failures (no overflow)", () => {
    const b = new ExponentialBackoff({ clock: new FakeClock(), jitter: "none", baseMs: 1, maxMs: 1_000, forgetAfterMs: Infinity });
    let last = 0;
    for (let i = 0; i < 2_000; i++) last = b.next("k");
    expect(last).toBe(1_000);
    expect(b.failures("k")).toBe(2_000);
  });

  it("full jitter stays within [0, ceiling) and spreads keys", () => {
    const b = new ExponentialBackoff({ clock: new FakeClock(), random: mulberry32(7) });
    const first: number[] = [];
    for (let k = 0; k < 1_000; k++) {
      const key = `k${k}`;
      for (let f = 0; f < 20; f++) {
        const ceiling = Math.min(300_000, 50 * 2 ** f);
        const d = b.next(key);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThan(ceiling);
        if (f === 0) first.push(d);
      }
    }
    // Uniform on [0, 50): the mean is near 25 and the keys do not retry in lockstep.
    const mean = first.reduce((s, d) => s + d, 0) / first.length;
    expect(mean).toBeGreaterThan(22);
    expect(mean).toBeLessThan(28);
    expect(new Set(first.map((d) => Math.floor(d))).size).toBe(50);
  });

  it("forget() resets a key and only that key", () => {
    const b = new ExponentialBackoff({ clock: new FakeClock(), jitter: "none" });
    b.next("a");
    b.next("a");
    b.next("b");
    b.forget("a");
    expect(b.failures("a")).toBe(0);
    expect(b.next("a")).toBe(50);
    expect(b.failures("b")).toBe(1);
  });

  it("auto-forgets a key that stays quiet for forgetAfterMs after its last scheduled retry", () => {
    const clock = new FakeClock();
    const b = new ExponentialBackoff({ clock, jitter: "none", baseMs: 100, maxMs: 10_000, forgetAfterMs: 1_000 });
    b.next("k"); // retry due at 100
    expect(b.next("k")).toBe(200); // retry due at 200, forgotten from 1_200 on
    clock.advance(1_199);
    expect(b.failures("k")).toBe(2);
    expect(b.next("k")).toBe(400); // failed again in time: keeps growing; due at 1_599, forget at 2_599
    clock.advance(1_399);
    expect(b.failures("k")).toBe(3);
    clock.advance(1);
    expect(b.failures("k")).toBe(0);
    expect(b.next("k")).toBe(100);
  });

  it("a key retrying at the cap is not auto-forgotten between its own retries", () => {
    const clock = new FakeClock();
    const b = new ExponentialBackoff({ clock, jitter: "none", baseMs: 100, maxMs: 5_000, forgetAfterMs: 1_000 });
    let d = 0;
    for (let i = 0; i < 10; i++) {
      d = b.next("k");
      clock.advance(d + 900); // the retry runs at d and fails again 900 ms later
    }
    expect(d).toBe(5_000);
    expect(b.failures("k")).toBe(10);
  });

  it("forgets keys that failed once and vanished, so memory does not grow", () => {
    const clock = new FakeClock();
    const b = new ExponentialBackoff({ clock, jitter: "none", baseMs: 10, maxMs: 100, forgetAfterMs: 1_000 });
    for (let i = 0; i < 10_000; i++) {
      b.next(`gone-${i}`);
      clock.advance(1);
    }
    // Only keys that failed in the last maxMs + forgetAfterMs can still be remembered.
    const remembered = Array.from({ length: 10_000 }, (_, i) => b.failures(`gone-${i}`)).filter((f) => f > 0).length;
    expect(remembered).toBeLessThanOrEqual(1_100);
    expect((b as unknown as { records: Map<string, unknown> }).records.size).toBeLessThanOrEqual(1_100);
  });

  it("rejects bad options with WorkQueueArgumentError", () => {
    expect(() => new ExponentialBackoff({ baseMs: 0 })).toThrow(WorkQueueArgumentError);
    expect(() => new ExponentialBackoff({ baseMs: 100, maxMs: 50 })).toThrow(/backoff.maxMs/);
    expect(() => new ExponentialBackoff({ jitter: "half" as "full" })).toThrow(/backoff.jitter/);
    expect(() => new ExponentialBackoff({ forgetAfterMs: 0 })).toThrow(/backoff.forgetAfterMs/);
  });
});
