import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";
import { LeaderElector, type StoppedLeading } from "../../../runtime/leaderelection.ts";
import { FakeListWatch } from "./fake-listwatch.ts";

const KEY = "/platform/test/leader";

function candidate(store: FakeListWatch, clock: FakeClock, identity: string, extra: { recampaign?: boolean } = {}) {
  const registry = new Registry();
  const elector = new LeaderElector({ store, key: KEY, identity, clock, registry, name: "test", ...extra });
  const events: string[] = [];
  let signal: AbortSignal | undefined;
  const stopped: StoppedLeading[] = [];
  elector.start({
    onStartedLeading: (s) => {
      signal = s;
      events.push("started");
    },
    onStoppedLeading: (info) => {
      stopped.push(info);
      events.push(`stopped:${info.kind}`);
    },
  });
  return {
    elector,
    events,
    stopped,
    registry,
    signal: () => signal,
    async status() {
      const m = await registry.getSingleMetric("leader_election_master_status")?.get();
      return m?.values[0]?.value;
    },
  };
}

function world() {
  const clock = new FakeClock(1_000_000);
  const store = new FakeListWatch();
  store.now = () => clock.now();
  return { clock, store };
}

describe("LeaderElector", () => {
  it("elects exactly one leader whose fence is the key's createRevision; the other follows", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    const b = candidate(store, clock, "b");
    await flushMicrotasks();
    expect(a.elector.state()).toBe("leading");
    expect(b.elector.state()).toBe("following");
    const kv = await store.get(KEY);
    expect(kv?.value).toBe("a");
    expect(a.elector.fence()).toEqual({ key: KEY, createRevision: kv?.createRevision });
    expect(b.elector.fence()).toBeNull();
    expect(await a.status()).toBe(1);
    expect(await b.status()).toBe(0);
    // Renewals keep it that way indefinitely.
    await clock.advanceAsync(120_000);
    expect(a.elector.state()).toBe("leading");
    expect(b.events).toEqual([]);
    await a.elector.stop();
    await b.elector.stop();
  });

  it("steps down at renewDeadline without a successful renewal, before the store expires the lease", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    const b = candidate(store, clock, "b");
    await flushMicrotasks();
    // Let one renewal succeed (sent at t0 + 5 s), then partition A from the store.
    const t0 = clock.now();
    await clock.advanceAsync(5_000);
    store.keepAliveGate = new Promise(() => {});
    store.revokeGate = new Promise(() => {});
    // The deadline counts from when the last successful renewal was sent: t0 + 5 s + 10 s.
    await clock.advanceAsync(9_999);
    expect(a.elector.state()).toBe("leading");
    expect(a.signal()?.aborted).toBe(false);
    await clock.advanceAsync(1);
    expect(clock.now() - t0).toBe(15_000);
    expect(a.elector.fence()).toBeNull();
    expect(a.signal()?.aborted).toBe(true);
    expect(a.stopped).toEqual([{ kind: "lost", reason: "no successful renewal for 10000 ms" }]);
    expect(a.elector.state()).toBe("stopped"); // recampaign is off by default
    expect(await a.status()).toBe(0);
    // A stepped down while its lease (renewed at t0 + 5 s, TTL 15 s) was still alive: nobody else
    // could have been elected yet.
    expect((await store.get(KEY))?.value).toBe("a");
    expect(b.elector.state()).toBe("following");
    // The lease expires at t0 + 20 s; B's next retry finds the key gone and takes over.
    await clock.advanceAsync(5_000 + 2_000);
    expect(b.elector.state()).toBe("leading");
    expect((await store.get(KEY))?.value).toBe("b");
    store.revokeGate = undefined; // the partition heals
    await a.elector.stop();
    await b.elector.stop();
  });

  it("counts the renew deadline from the lease grant when it learns late that its campaign won", async () => {
    const { clock, store } = world();
    // A's create-leader-key transaction is applied, but its answer never arrives; the read that
    // then finds the key (ours: the pending lease) is slow. A learns it leads 9.9 s after the grant.
    let loseTxnAnswer = true;
    let slowRead = false;
    const lossy = {
      grantLease: (ttl: number) => store.grantLease(ttl),
      watch: store.watch.bind(store),
      async txn(...args: Parameters<FakeListWatch["txn"]>) {
        const res = await store.txn(...args);
        if (!loseTxnAnswer) return res;
        loseTxnAnswer = false;
        slowRead = true;
        return new Promise<never>(() => {});
      },
      get: (key: string) => store.get(key),
      async list(prefix: string, options: { limit: number }) {
        if (slowRead) {
          slowRead = false;
          await clock.sleep(3_900);
        }
        return store.list(prefix, options);
      },
    };
    store.keepAliveGate = new Promise(() => {}); // and no renewal ever gets through
    const t0 = clock.now();
    const a = new LeaderElector({ store: lossy, key: KEY, identity: "a", clock });
    const timeline: string[] = [];
    a.start({
      onStartedLeading: () => {
        timeline.push(`a started +${clock.now() - t0}`);
      },
      onStoppedLeading: (info) => {
        timeline.push(`a stopped +${clock.now() - t0}: ${info.reason}`);
      },
    });
    await flushMicrotasks();
    const b = candidate(store, clock, "b");
    let overlap = false;
    for (let i = 0; i < 250; i++) {
      await clock.advanceAsync(100);
      if (a.state() === "leading" && b.elector.state() === "leading") overlap = true;
    }
    // The store expires the lease 15 s after the grant was sent; A must have stopped acting by the
    // grant + renewDeadline (10 s), not 10 s after it learned of its win.
    expect(timeline).toEqual(["a started +9900", "a stopped +10000: no successful renewal for 10000 ms"]);
    expect(overlap).toBe(false);
    expect(b.events[0]).toBe("started"); // B did take over (A's lease expired or was revoked)
    await a.stop();
    await b.elector.stop();
  });

  it("revokes its lease when it steps down on its renew deadline, so a watching follower takes over at once", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    const b = candidate(store, clock, "b");
    await flushMicrotasks();
    const t0 = clock.now();
    store.keepAliveGate = new Promise(() => {}); // keep-alives get no answer; the store is otherwise up
    await clock.advanceAsync(10_000); // A's renew deadline (its lease would live until t0 + 15 s)
    expect(a.stopped).toEqual([{ kind: "lost", reason: "no successful renewal for 10000 ms" }]);
    expect(clock.now() - t0).toBe(10_000);
    expect(b.elector.state()).toBe("leading");
    expect((await store.get(KEY))?.value).toBe("b");
    await a.elector.stop();
    await b.elector.stop();
  });

  it("steps down at once when the store says the lease is gone", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    const lease = [...store.leases.values()][0]!;
    lease.expiresAt = clock.now(); // the store expired it (say, after a long GC pause)
    await clock.advanceAsync(5_000); // next renewal
    expect(a.stopped).toEqual([{ kind: "lost", reason: "lease expired or revoked" }]);
    expect(a.signal()?.aborted).toBe(true);
    await a.elector.stop();
  });

  it("steps down when its key is deleted or re-created behind its back", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    store.del(KEY);
    store.put(KEY, "intruder");
    await clock.advanceAsync(5_000);
    expect(a.stopped[0]?.reason).toBe("leadership lost: leader key re-created by intruder");
    expect(a.elector.fence()).toBeNull();
    await a.elector.stop();
  });

  it("releases on stop: the lease is revoked and a watching follower takes over at once", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    const b = candidate(store, clock, "b");
    await flushMicrotasks();
    await clock.advanceAsync(500); // B is between retries, watching the key
    await a.elector.stop();
    expect(a.stopped).toEqual([{ kind: "released", reason: "stopped" }]);
    expect(a.elector.state()).toBe("stopped");
    await flushMicrotasks();
    // No clock advance needed: B saw the delete event instead of waiting for its 2 s retry.
    expect(b.elector.state()).toBe("leading");
    await b.elector.stop();
  });

  it("a follower of a long-lived leader takes over at once although the key's own revision is compacted", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    for (let i = 0; i < 5; i++) store.put(`/platform/other/${i}`, "x");
    store.compact(store.rev); // the leader key's modRevision + 1 is history now
    const b = candidate(store, clock, "b");
    await clock.advanceAsync(500); // B read the key and is watching it
    expect(b.elector.state()).toBe("following");
    await a.elector.stop();
    await flushMicrotasks();
    expect(b.elector.state()).toBe("leading"); // no retry period waited
    await b.elector.stop();
  });

  it("a follower whose watch breaks reads the key again, so a release it missed still ends the wait", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a");
    await flushMicrotasks();
    const b = candidate(store, clock, "b");
    await clock.advanceAsync(500);
    store.silent = true; // the delete event is lost...
    await a.elector.stop();
    await flushMicrotasks();
    expect(b.elector.state()).toBe("following");
    store.silent = false;
    store.breakWatches(); // ...and then the watch reports it broke
    await flushMicrotasks();
    expect(b.elector.state()).toBe("leading");
    await b.elector.stop();
  });

  it("campaigns again after a loss when recampaign is set", async () => {
    const { clock, store } = world();
    const a = candidate(store, clock, "a", { recampaign: true });
    await flushMicrotasks();
    const first = a.elector.fence();
    const lease = [...store.leases.values()][0]!;
    lease.expiresAt = clock.now();
    await clock.advanceAsync(5_000);
    // The expiry removed the key, so the new campaign wins at once: a new term, a new fence.
    expect(a.events).toEqual(["started", "stopped:lost", "started"]);
    expect(a.elector.state()).toBe("leading");
    expect(a.elector.fence()?.createRevision).toBeGreaterThan(first!.createRevision);
    await a.elector.stop();
  });

  it("rejects timings that cannot be safe", () => {
    const store = new FakeListWatch();
    expect(() => new LeaderElector({ store, key: KEY, identity: "x", ttlSeconds: 10, renewDeadlineMs: 10_000 })).toThrow(
      /shorter than the lease TTL/,
    );
    expect(() => new LeaderElector({ store, key: KEY, identity: "x", renewDeadlineMs: 2_000, retryPeriodMs: 2_000 })).toThrow(
      /1.2 x retryPeriodMs/,
    );
    expect(() => new LeaderElector({ store, key: KEY, identity: "x", ttlSeconds: 1 })).toThrow(/>= 2/);
  });
});
