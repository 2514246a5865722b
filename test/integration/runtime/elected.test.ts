// ElectedRunnables (runtime/elected.ts) on a real embedded store shared by two "processes": one
// term at a time for its key, whatever other election a process runs; writes fenced by its own
// lease; a runnable's failure fails it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { fencedStore, NotLeaderError } from "../../../adapters/store/fenced.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { ElectedRunnables } from "../../../runtime/elected.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { pollUntil } from "../../helpers/poll.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-elected-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const lease = { ttlSeconds: 2, renewDeadlineMs: 1_500, retryPeriodMs: 200 };

/** A runnable that counts how many of it run at once, and writes through `write` while it runs. */
function probe(running: { now: number; max: number }, write: () => Promise<unknown>) {
  return {
    name: "probe",
    async start(signal: AbortSignal): Promise<void> {
      running.now++;
      running.max = Math.max(running.max, running.now);
      await write();
      await new Promise<void>((r) => (signal.aborted ? r() : signal.addEventListener("abort", () => r(), { once: true })));
      running.now--;
    },
  };
}

describe("ElectedRunnables", () => {
  it("runs its runnables in one process at a time, fenced by its own key, beside another election", async () => {
    const path = join(dir, "one.db");
    const stores = [new SqliteStore({ path, pollIntervalMs: 20 }), new SqliteStore({ path, pollIntervalMs: 20 })];
    const running = { now: 0, max: 0 };
    // Process 0 also leads another key (its "orchestrator"): that lease must not fence this work.
    const other = new LeaderElector({ store: stores[0]!, key: "/t/other/leader", identity: "p0", ...lease });
    other.start({ onStartedLeading: () => {}, onStoppedLeading: () => {} });
    const abort = [new AbortController(), new AbortController()];
    const elected = stores.map((store, i) => {
      const e: ElectedRunnables = new ElectedRunnables({ store, key: "/t/work/leader", identity: `p${i}`, lease });
      const fenced = fencedStore(store, () => e.fence());
      return e.add(probe(running, () => fenced.put(`/t/work/by`, `p${i}`)));
    });
    const runs = elected.map((e, i) => e.start(abort[i]!.signal));
    await pollUntil("one term", async () => running.now === 1, 10_000, 20);
    await pollUntil("the other election", async () => other.state() === "leading", 10_000, 20);
    const leaderIndex = elected.findIndex((e) => e.state() === "leading");
    expect(elected.map((e) => e.state()).sort()).toEqual(["following", "leading"]);
    expect(elected[leaderIndex]!.fence()?.key).toBe("/t/work/leader");
    expect((await stores[0]!.get("/t/work/by"))?.value).toBe(`p${leaderIndex}`);

    // The leader stops: the other takes the term over, and the old one's fenced writes are refused.
    const staleFenced = fencedStore(stores[leaderIndex]!, () => elected[leaderIndex]!.fence());
    abort[leaderIndex]!.abort();
    await runs[leaderIndex];
    const next = 1 - leaderIndex;
    await pollUntil("the other takes over", async () => elected[next]!.state() === "leading", 10_000, 20);
    await pollUntil("its write", async () => (await stores[0]!.get("/t/work/by"))?.value === `p${next}`, 10_000, 20);
    await expect(staleFenced.put("/t/work/by", "stale")).rejects.toBeInstanceOf(NotLeaderError);
    expect(running.max).toBe(1);

    abort[next]!.abort();
    await runs[next];
    await other.stop();
    for (const s of stores) await s.close();
  });

  it("fails when a runnable fails during its term", async () => {
    const store = new SqliteStore({ path: join(dir, "two.db"), pollIntervalMs: 20 });
    const e = new ElectedRunnables({ store, key: "/t/fail/leader", identity: "p", lease });
    e.add({ name: "broken", start: () => Promise.reject(new Error("boom")) });
    await expect(e.start(new AbortController().signal)).rejects.toThrow("boom");
    expect(e.state()).toBe("stopped");
    await store.close();
  });
});
