// The collector's pacing: full speed on an idle registry, rests while requests arrive.
import { describe, expect, it } from "vitest";
import { Pacer, RequestActivity } from "../../../controllers/registrygc/pacer.ts";

async function busyFor(ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) await Promise.resolve();
}

describe("Pacer", () => {
  it("never rests while no request arrives", async () => {
    const pacer = new Pacer({ activity: new RequestActivity(), workMs: 5, restMs: 200 });
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) {
      await busyFor(6);
      await pacer.pace();
    }
    expect(performance.now() - t0).toBeLessThan(150);
  });

  it("rests after each slice in which requests arrived, and an abort ends the rest", async () => {
    const activity = new RequestActivity();
    const pacer = new Pacer({ activity, workMs: 5, restMs: 100 });
    await busyFor(6);
    activity.seen();
    const t0 = performance.now();
    await pacer.pace();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    await busyFor(6);
    activity.seen();
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 10);
    const t1 = performance.now();
    await pacer.pace(abort.signal);
    expect(performance.now() - t1).toBeLessThan(80);
  });
});
