// ReadYourWrites against a hand-driven cache: a read waits for this replica's writes of its id
// only, gives up after catchUpMs (the caller then reads the store), and forgets reached marks.
import { describe, expect, it } from "vitest";
import { ReadYourWrites, type RevisionedCache } from "../../../runtime/read-your-writes.ts";

class HandCache implements RevisionedCache {
  synced = true;
  revision = 0;
  private waiters: { revision: number; resolve(): void }[] = [];
  hasSynced = () => this.synced;
  cacheRevision = () => this.revision;
  waitForRevision = (revision: number, _signal?: AbortSignal, timeoutMs = 30_000): Promise<void> =>
    new Promise((resolve, reject) => {
      this.waiters.push({ revision, resolve });
      setTimeout(() => reject(new Error("timeout")), timeoutMs);
    });
  reach(revision: number): void {
    this.revision = revision;
    for (const w of this.waiters) if (w.revision <= revision) w.resolve();
  }
}

describe("ReadYourWrites", () => {
  it("is caught up with no writes noted once synced, and not before", async () => {
    const cache = new HandCache();
    const rw = new ReadYourWrites(cache, 50);
    expect(await rw.caughtUp("a")).toBe(true);
    cache.synced = false;
    expect(await rw.caughtUp("a")).toBe(false);
  });

  it("waits for this replica's write of the id, not for other ids' writes", async () => {
    const cache = new HandCache();
    const rw = new ReadYourWrites(cache, 1_000);
    rw.wrote("a", 5);
    rw.wrote("b", 9);
    const a = rw.caughtUp("a");
    cache.reach(5);
    expect(await a).toBe(true); // b's write at 9 is not waited for
    expect(await rw.caughtUp("c")).toBe(true);
    const all = rw.caughtUp();
    cache.reach(9);
    expect(await all).toBe(true);
  });

  it("answers false when the cache does not reach the write within catchUpMs", async () => {
    const cache = new HandCache();
    const rw = new ReadYourWrites(cache, 30);
    rw.wrote("a", 5);
    const started = performance.now();
    expect(await rw.caughtUp("a")).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    cache.reach(5);
    expect(await rw.caughtUp("a")).toBe(true);
  });

  it("after one wait timed out, does not wait again until the cache passes that revision", async () => {
    const cache = new HandCache();
    const rw = new ReadYourWrites(cache, 30);
    rw.wrote("a", 5);
    rw.wrote("b", 6);
    expect(await rw.caughtUp("a")).toBe(false); // waited 30 ms: the watch is down
    let started = performance.now();
    expect(await rw.caughtUp("b")).toBe(false); // no second wait while the cache is below 5
    expect(performance.now() - started).toBeLessThan(20);
    expect(await rw.caughtUp("c")).toBe(true); // nothing pending for c
    cache.reach(5);
    started = performance.now();
    expect(await rw.caughtUp("a")).toBe(true);
    const b = rw.caughtUp("b"); // past the stuck revision: waits again, and the cache gets there
    cache.reach(6);
    expect(await b).toBe(true);
    expect(performance.now() - started).toBeLessThan(25);
  });

  it("keeps only the newest mark of an id, and a reached mark no longer waits", async () => {
    const cache = new HandCache();
    const rw = new ReadYourWrites(cache, 30);
    rw.wrote("a", 8);
    rw.wrote("a", 6); // an older answer arriving late does not lower the mark
    cache.reach(7);
    expect(await rw.caughtUp("a")).toBe(false);
    cache.reach(8);
    expect(await rw.caughtUp("a")).toBe(true);
  });
});
