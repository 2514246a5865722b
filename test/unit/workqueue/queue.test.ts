import { describe, expect, it } from "vitest";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";
import { WorkQueue, WorkQueueArgumentError } from "../../../runtime/workqueue/index.ts";
import { drain, take, track } from "./helpers.ts";

function newQueue(clock = new FakeClock(1_000)) {
  return { clock, q: new WorkQueue({ name: "test", clock, backoff: { jitter: "none" } }) };
}

describe("WorkQueue: client-go semantics", () => {
  it("dedups: a key added many times is queued once", async () => {
    const { q } = newQueue();
    q.add("a");
    q.add("b");
    q.add("a");
    q.add("a");
    expect(q.len()).toBe(2);
    expect(await drain(q)).toEqual(["a", "b"]);
    expect(q.len()).toBe(0);
  });

  it("never hands a key to two workers: re-adding a key in processing parks it until done()", async () => {
    const { q } = newQueue();
    q.add("a");
    const first = await take(q);
    expect(first.key).toBe("a");
    q.add("a");
    q.add("a", { priority: 5 });
    expect(q.len()).toBe(0);
    const second = track(q.get());
    await flushMicrotasks();
    expect(second.state).toBe("pending");
    expect(q.snapshot()).toMatchObject({ ready: [], parked: ["a"], processing: ["a"] });

    q.done("a");
    await flushMicrotasks();
    // Requeued exactly once, carrying the merged priority, and straight to the waiting worker.
    expect(second.value).toEqual({ shutdown: false, key: "a", priority: 5 });
    expect(q.len()).toBe(0);
    q.done("a");
    expect(q.snapshot()).toMatchObject({ ready: [], parked: [], processing: [] });
  });

  it("requeues a key re-added during processing exactly once, even after many adds", async () => {
    const { q } = newQueue();
    q.add("a");
    await take(q);
    for (let i = 0; i < 10; i++) q.add("a");
    q.done("a");
    expect(q.len()).toBe(1);
    expect(await drain(q)).toEqual(["a"]);
    expect(q.len()).toBe(0);
  });

  it("ignores done() of a key it never handed out, and a second done()", async () => {
    const { q } = newQueue();
    q.add("a");
    q.done("a"); // queued, not processing: nothing happens
    q.done("zzz");
    expect(q.snapshot()).toMatchObject({ ready: ["a"], processing: [] });
    await take(q);
    q.done("a");
    q.done("a");
    expect(q.snapshot()).toMatchObject({ ready: [], processing: [], parked: [] });
  });

  it("wakes a waiting get() when a key is added, oldest waiter first", async () => {
    const { q } = newQueue();
    const w1 = track(q.get());
    const w2 = track(q.get());
    await flushMicrotasks();
    expect([w1.state, w2.state]).toEqual(["pending", "pending"]);
    q.add("a");
    await flushMicrotasks();
    expect(w1.value).toEqual({ shutdown: false, key: "a", priority: 0 });
    expect(w2.state).toBe("pending");
    q.add("b");
    await flushMicrotasks();
    expect(w2.value).toEqual({ shutdown: false, key: "b", priority: 0 });
  });
});

describe("WorkQueue: shutdown", () => {
  it("ignores adds, still hands out ready keys, then says shutdown to every get()", async () => {
    const { q, clock } = newQueue();
    q.add("a");
    q.add("b");
    q.add("later", { afterMs: 100 });
    q.shutDown();
    expect(q.shuttingDown()).toBe(true);
    q.add("c");
    q.addRateLimited("d");
    expect(q.numRequeues("d")).toBe(0);
    expect(await drain(q)).toEqual(["a", "b"]);
    // The delayed key is dropped and its timer cancelled.
    expect(clock.pendingTimers()).toBe(0);
    clock.advance(1_000);
    expect(await q.get()).toEqual({ shutdown: true });
    expect(await q.get()).toEqual({ shutdown: true });
  });

  it("releases every waiting get() with shutdown", async () => {
    const { q } = newQueue();
    const waiters = [track(q.get()), track(q.get()), track(q.get())];
    await flushMicrotasks();
    expect(waiters.map((w) => w.state)).toEqual(["pending", "pending", "pending"]);
    q.shutDown();
    await flushMicrotasks();
    expect(waiters.map((w) => w.value)).toEqual([{ shutdown: true }, { shutdown: true }, { shutdown: true }]);
  });

  it("drops a key re-added while processing: nothing becomes ready after shutdown", async () => {
    const { q } = newQueue();
    q.add("a");
    await take(q);
    q.add("a");
    q.shutDown();
    q.done("a");
    expect(q.len()).toBe(0);
    expect(await q.get()).toEqual({ shutdown: true });
  });

  it("shutDownWithDrain waits for ready keys to be taken and every handed-out key to be done", async () => {
    const { q } = newQueue();
    q.add("a");
    q.add("b");
    const { key } = await take(q);
    const drained = track(q.shutDownWithDrain());
    await flushMicrotasks();
    expect(drained.state).toBe("pending");
    q.done(key);
    await flushMicrotasks();
    expect(drained.state).toBe("pending"); // "b" is still ready
    const last = await take(q);
    await flushMicrotasks();
    expect(drained.state).toBe("pending"); // "b" is processing
    q.done(last.key);
    await flushMicrotasks();
    expect(drained.state).toBe("resolved");
    expect(await q.get()).toEqual({ shutdown: true });
  });

  it("shutDownWithDrain resolves at once when idle, and rejects when its signal aborts", async () => {
    const { q } = newQueue();
    await q.shutDownWithDrain();
    const busy = newQueue().q;
    busy.add("a");
    await take(busy);
    const ac = new AbortController();
    const drained = track(busy.shutDownWithDrain(ac.signal));
    ac.abort(new Error("gave up"));
    await flushMicrotasks();
    expect(drained.state).toBe("rejected");
    expect((drained.reason as Error).message).toBe("gave up");
    expect(busy.shuttingDown()).toBe(true);
  });
});

describe("WorkQueue: get(signal)", () => {
  it("rejects promptly when the signal aborts, and the aborted waiter gets no key", async () => {
    const { q } = newQueue();
    const ac = new AbortController();
    const aborted = track(q.get(ac.signal));
    const other = track(q.get());
    await flushMicrotasks();
    ac.abort(new Error("stop"));
    await flushMicrotasks();
    expect(aborted.state).toBe("rejected");
    expect((aborted.reason as Error).message).toBe("stop");
    q.add("a");
    await flushMicrotasks();
    expect(other.value).toEqual({ shutdown: false, key: "a", priority: 0 });
    expect(q.snapshot().waiters).toBe(0);
  });

  it("rejects at once with an already-aborted signal, without taking a ready key", async () => {
    const { q } = newQueue();
    q.add("a");
    await expect(q.get(AbortSignal.abort(new Error("no")))).rejects.toThrow("no");
    expect(q.len()).toBe(1);
  });

  it("an abort after the key was handed out changes nothing", async () => {
    const { q } = newQueue();
    const ac = new AbortController();
    const w = track(q.get(ac.signal));
    q.add("a");
    ac.abort();
    await flushMicrotasks();
    expect(w.value).toEqual({ shutdown: false, key: "a", priority: 0 });
    expect(q.snapshot().processing).toEqual(["a"]);
  });
});

describe("WorkQueue: delayed adds", () => {
  it("hands a delayed key out when it is due, not before", async () => {
    const { q, clock } = newQueue();
    q.add("a", { afterMs: 100 });
    expect(q.len()).toBe(0);
    expect(q.snapshot().waiting).toEqual(["a"]);
    const w = track(q.get());
    clock.advance(99);
    await flushMicrotasks();
    expect(w.state).toBe("pending");
    clock.advance(1);
    await flushMicrotasks();
    expect(w.value).toEqual({ shutdown: false, key: "a", priority: 0 });
  });

  it("merges adds of a waiting key: readyAt is the earliest, priority the highest", async () => {
    const { q, clock } = newQueue();
    q.add("a", { afterMs: 500, priority: 1 });
    q.add("a", { afterMs: 200, priority: -5 });
    q.add("a", { afterMs: 900, priority: 3 });
    expect(q.snapshot().waiting).toEqual(["a"]);
    clock.advance(199);
    expect(q.len()).toBe(0);
    clock.advance(1);
    expect(q.len()).toBe(1);
    expect(await take(q)).toEqual({ key: "a", priority: 3 });
    q.done("a");
    clock.advance(1_000);
    expect(q.len()).toBe(0); // the later adds did not leave a second entry behind
  });

  it("an immediate add of a waiting key makes it ready now and it runs once", async () => {
    const { q, clock } = newQueue();
    q.add("a", { afterMs: 100 });
    q.add("a");
    expect(q.snapshot()).toMatchObject({ ready: ["a"], waiting: [] });
    expect(clock.pendingTimers()).toBe(0);
    expect(await drain(q)).toEqual(["a"]);
    clock.advance(200);
    expect(q.len()).toBe(0);
  });

  it("a delayed add never delays a key that is already ready", async () => {
    const { q, clock } = newQueue();
    q.add("a");
    q.add("a", { afterMs: 1_000 });
    expect(q.snapshot()).toMatchObject({ ready: ["a"], waiting: [] });
    expect(clock.pendingTimers()).toBe(0);
    expect(await drain(q)).toEqual(["a"]);
    clock.advance(2_000);
    expect(q.len()).toBe(0);
  });

  it("a delayed add during processing is honoured after done()", async () => {
    const { q, clock } = newQueue();
    q.add("a");
    await take(q);
    q.add("a", { afterMs: 100 });
    clock.advance(30);
    q.done("a");
    expect(q.snapshot()).toMatchObject({ waiting: ["a"], ready: [] });
    clock.advance(69);
    expect(q.len()).toBe(0);
    clock.advance(1);
    expect(q.len()).toBe(1);
  });

  it("keeps one timer, armed for the earliest waiting key", () => {
    const { q, clock } = newQueue();
    const fired: string[] = [];
    q.add("c", { afterMs: 300 });
    q.add("a", { afterMs: 100 });
    q.add("b", { afterMs: 200 });
    expect(clock.pendingTimers()).toBe(1);
    clock.advance(100);
    fired.push(...q.snapshot().ready);
    expect(clock.pendingTimers()).toBe(1);
    clock.advance(100);
    expect(q.len()).toBe(2);
    clock.advance(100);
    expect(q.len()).toBe(3);
    expect(fired).toEqual(["a"]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it("handles delays beyond setTimeout's 2^31-1 ms limit by re-arming", () => {
    const requested: number[] = [];
    const clock = new (class extends FakeClock {
      override setTimer(ms: number, fn: () => void) {
        requested.push(ms);
        return super.setTimer(ms, fn);
      }
    })();
    const q = new WorkQueue({ name: "far", clock });
    const limit = 2 ** 31 - 1;
    q.add("far", { afterMs: limit + 5_000 });
    expect(requested).toEqual([limit]);
    clock.advance(limit);
    expect(q.len()).toBe(0);
    expect(clock.pendingTimers()).toBe(1);
    clock.advance(4_999);
    expect(q.len()).toBe(0);
    clock.advance(1);
    expect(q.len()).toBe(1);
    expect(requested).toEqual([limit, 5_000]);
  });

  it("hands the best of several keys due together to a waiting worker", async () => {
    const { q, clock } = newQueue();
    q.add("low", { afterMs: 50, priority: -1 });
    q.add("high", { afterMs: 50, priority: 2 });
    const w = track(q.get());
    clock.advance(50);
    await flushMicrotasks();
    expect(w.value).toEqual({ shutdown: false, key: "high", priority: 2 });
  });
});

describe("WorkQueue: rate-limited adds", () => {
  it("delays by the key's back-off, which grows per failure and resets on forget()", async () => {
    const { q, clock } = newQueue();
    q.addRateLimited("a");
    expect(q.numRequeues("a")).toBe(1);
    clock.advance(49);
    expect(q.len()).toBe(0);
    clock.advance(1);
    await take(q);
    q.done("a");
    q.addRateLimited("a", { priority: 4 });
    expect(q.numRequeues("a")).toBe(2);
    clock.advance(99);
    expect(q.len()).toBe(0);
    clock.advance(1);
    expect(await take(q)).toEqual({ key: "a", priority: 4 });
    q.done("a");
    q.forget("a");
    expect(q.numRequeues("a")).toBe(0);
    q.addRateLimited("a");
    clock.advance(50);
    expect(q.len()).toBe(1);
  });
});

describe("WorkQueue: bad input", () => {
  it("throws WorkQueueArgumentError and changes nothing", () => {
    expect(() => new WorkQueue({ name: "" })).toThrow(WorkQueueArgumentError);
    expect(() => new WorkQueue({ name: "q", agingMsPerPriority: 0 })).toThrow(/agingMsPerPriority/);
    expect(() => new WorkQueue({ name: "q", backoff: { baseMs: -1 } })).toThrow(/backoff.baseMs/);
    const { q } = newQueue();
    expect(() => q.add("a", { priority: Number.NaN })).toThrow(/priority/);
    expect(() => q.add("a", { afterMs: Infinity })).toThrow(/afterMs/);
    expect(() => q.add(42 as unknown as string)).toThrow(/key/);
    expect(() => q.addRateLimited("a", { priority: Number.NaN })).toThrow(/priority/);
    expect(q.numRequeues("a")).toBe(0);
    expect(q.snapshot()).toMatchObject({ ready: [], waiting: [] });
  });
});
