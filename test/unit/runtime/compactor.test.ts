import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";
import { StoreCompactor } from "../../../runtime/compactor.ts";
import { FakeCompactedError } from "./fake-listwatch.ts";

describe("StoreCompactor", () => {
  it("keeps `retentionMs` of history: compacts to the newest revision sampled at least that long ago", async () => {
    const clock = new FakeClock();
    let revision = 100;
    const compacted: number[] = [];
    let failNext: Error | undefined;
    const store = {
      revision: async () => revision,
      compact: async (r: number) => {
        if (failNext) {
          const e = failNext;
          failNext = undefined;
          throw e;
        }
        compacted.push(r);
      },
    };
    const registry = new Registry();
    const compactor = new StoreCompactor({ store, retentionMs: 10 * 60_000, intervalMs: 60_000, clock, registry });
    const stop = new AbortController();
    const running = compactor.start(stop.signal);
    // One minute = 10 revisions; samples at t = 0, 1, 2, ... min hold 100, 110, 120, ...
    for (let minute = 1; minute <= 12; minute++) {
      revision += 10;
      await clock.advanceAsync(60_000);
    }
    // At t = 10 min the t = 0 sample (100) became old enough, at 11 min 110, at 12 min 120.
    expect(compacted).toEqual([100, 110, 120]);
    // Someone compacted further already: not an error.
    failNext = new FakeCompactedError(500);
    revision += 10;
    await clock.advanceAsync(60_000);
    // A real failure is counted and retried with the next sample.
    failNext = new Error("etcd down");
    revision += 10;
    await clock.advanceAsync(60_000);
    revision += 10;
    await clock.advanceAsync(60_000);
    expect(compacted).toEqual([100, 110, 120, 150]);
    const m = await registry.getSingleMetric("store_compactions_total")?.get();
    expect(m?.values.find((v) => v.labels.result === "success")?.value).toBe(5);
    expect(m?.values.find((v) => v.labels.result === "error")?.value).toBe(1);
    stop.abort();
    await running;
    await flushMicrotasks();
    expect(clock.pendingTimers()).toBe(0);
  });
});
