import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";
import { LeaderElector, LeadershipLostError } from "../../../runtime/leaderelection.ts";
import { Manager, type Runnable } from "../../../runtime/manager.ts";
import { FakeListWatch } from "./fake-listwatch.ts";

/** A runnable that records its terms and runs until aborted. */
class Recorder implements Runnable {
  readonly terms: AbortSignal[] = [];
  constructor(
    readonly name: string,
    private readonly log: string[],
  ) {}
  async start(signal: AbortSignal): Promise<void> {
    this.terms.push(signal);
    this.log.push(`${this.name} start`);
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    this.log.push(`${this.name} stop`);
  }
}

function world(recampaign: boolean) {
  const clock = new FakeClock(1_000_000);
  const store = new FakeListWatch();
  store.now = () => clock.now();
  const elector = new LeaderElector({ store, key: "/leader", identity: "me", clock, recampaign });
  const log: string[] = [];
  const manager = new Manager({ name: "m", elector, clock });
  const leaderOnly = new Recorder("controller", log);
  const always = new Recorder("events-cache", log);
  manager.add(leaderOnly).add(always, { leaderOnly: false });
  const loseLease = () => {
    for (const lease of store.leases.values()) lease.expiresAt = clock.now();
  };
  return { clock, store, elector, manager, leaderOnly, always, log, loseLease };
}

describe("Manager with leader election", () => {
  it("runs leader-only runnables while leading; on loss aborts them and exits with code 1", async () => {
    const { clock, manager, leaderOnly, always, log, loseLease } = world(false);
    await manager.start();
    await flushMicrotasks();
    expect(log).toEqual(["events-cache start", "controller start"]);
    loseLease();
    await clock.advanceAsync(5_000); // the next renewal learns the lease is gone
    const exit = await manager.finished();
    expect(exit.code).toBe(1);
    expect(exit.code === 1 && exit.error).toBeInstanceOf(LeadershipLostError);
    expect(leaderOnly.terms[0]!.aborted).toBe(true);
    expect(always.terms[0]!.aborted).toBe(true);
    expect(log).toEqual(["events-cache start", "controller start", "controller stop", "events-cache stop"]);
  });

  it("with recampaign, stops the term's runnables, stays up, and starts them again on re-election", async () => {
    const { clock, manager, elector, leaderOnly, always, log, loseLease } = world(true);
    await manager.start();
    await flushMicrotasks();
    loseLease();
    await clock.advanceAsync(5_000);
    await clock.advanceAsync(2_000);
    expect(leaderOnly.terms).toHaveLength(2);
    expect(leaderOnly.terms[0]!.aborted).toBe(true);
    expect(leaderOnly.terms[1]!.aborted).toBe(false);
    expect(always.terms).toHaveLength(1);
    expect(elector.state()).toBe("leading");
    expect(log).toEqual(["events-cache start", "controller start", "controller stop", "controller start"]);
    await manager.stop();
    expect(await manager.finished()).toEqual({ code: 0 });
    expect(elector.state()).toBe("stopped");
  });

  it("with recampaign, starts no new term before every runnable of the last one has finished", async () => {
    const { clock, store } = world(true);
    const elector = new LeaderElector({ store, key: "/leader-slow", identity: "me", clock, recampaign: true });
    const manager = new Manager({ name: "m", elector, clock, gracefulShutdownMs: 1_000 });
    const log: string[] = [];
    let running = 0;
    // Like a Controller: refuses a second start while running, and drains for 5 s after its abort
    // (longer than the grace period).
    manager.add({
      name: "slow-controller",
      start: async (signal) => {
        if (running > 0) throw new Error("slow-controller is already running");
        running++;
        log.push(`start +${clock.now() - t0}`);
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        await clock.sleep(5_000);
        running--;
        log.push(`stop +${clock.now() - t0}`);
      },
    });
    const t0 = clock.now();
    await manager.start();
    await flushMicrotasks();
    for (const lease of store.leases.values()) lease.expiresAt = clock.now();
    for (let i = 0; i < 150; i++) await clock.advanceAsync(100); // renewal at +5 s finds the lease gone
    // Lost at +5 s; the runnable finished at +10 s; only then was the elector let campaign again.
    expect(log).toEqual(["start +0", "stop +10000", "start +10000"]);
    expect(elector.state()).toBe("leading");
    const stopping = manager.stop();
    await clock.advanceAsync(5_000);
    await stopping;
    expect(await manager.finished()).toEqual({ code: 0 });
  });

  it("with recampaign, a stop while waiting for the last term's runnables is still bounded by the grace period", async () => {
    const { clock, store } = world(true);
    const elector = new LeaderElector({ store, key: "/leader-stuck", identity: "me", clock, recampaign: true });
    const manager = new Manager({ name: "m", elector, clock, gracefulShutdownMs: 1_000 });
    manager.add({ name: "stuck", start: () => new Promise<void>(() => {}) }); // ignores its abort
    await manager.start();
    await flushMicrotasks();
    for (const lease of store.leases.values()) lease.expiresAt = clock.now();
    await clock.advanceAsync(5_000); // lost; the manager now waits for "stuck"
    expect(elector.state()).toBe("following");
    const stopping = manager.stop();
    await clock.advanceAsync(1_000);
    await stopping;
    expect(await manager.finished()).toEqual({ code: 0 });
    expect(elector.state()).toBe("stopped");
  });

  it("answers /readyz from its checks (without a server: Hono's app.request)", async () => {
    const { manager } = world(false);
    expect((await manager.app.request("/readyz")).status).toBe(503); // not started
    await manager.start();
    await flushMicrotasks();
    const res = await manager.app.request("/readyz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", checks: { accepting: true, "leader-election": true } });
    await manager.stop();
    expect((await manager.app.request("/readyz")).status).toBe(503);
    expect((await manager.app.request("/healthz")).status).toBe(200);
  });

  it("a readiness check added by a component holds /readyz at 503 until it passes, and is shown by name", async () => {
    const { manager } = world(false);
    let recorded = false;
    manager.addReadinessCheck("node-records", () => recorded);
    await manager.start();
    await flushMicrotasks();
    const before = await manager.app.request("/readyz");
    expect(before.status).toBe(503);
    expect(await before.json()).toMatchObject({ status: "unavailable", checks: { accepting: true, "leader-election": true, "node-records": false } });
    recorded = true;
    expect((await manager.app.request("/readyz")).status).toBe(200);
    await manager.stop();
  });

  it("a readiness check's string holds /readyz at 503 and is shown as the check's value", async () => {
    const { manager } = world(false);
    let check: boolean | string = "waiting for node records: n2";
    manager.addReadinessCheck("node-records", () => check);
    await manager.start();
    await flushMicrotasks();
    const before = await manager.app.request("/readyz");
    expect(before.status).toBe(503);
    expect(await before.json()).toMatchObject({ status: "unavailable", checks: { "node-records": "waiting for node records: n2" } });
    check = true;
    expect((await manager.app.request("/readyz")).status).toBe(200);
    await manager.stop();
  });

  it("each runnable waits on a signal of its own: a term of many runnables holds one listener on the term's signal", async () => {
    const { manager } = world(false);
    const signals: AbortSignal[] = [];
    for (let i = 0; i < 15; i++) {
      manager.add({
        name: `r${i}`,
        start: (signal) => {
          signals.push(signal);
          return new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
        },
      });
    }
    await manager.start();
    await flushMicrotasks();
    expect(new Set(signals).size).toBe(15);
    expect(signals.every((signal) => getEventListeners(signal, "abort").length === 1)).toBe(true);
    await manager.stop();
    expect(signals.every((signal) => signal.aborted)).toBe(true);
  });
});
