// Randomized test: thousands of random operation sequences against the queue and against a plain
// reference model of its semantics, checking every invariant after each step. Seeded: a failure
// prints its seed and the operations that led to it; rerun one with WQ_SEED=<seed> WQ_SEQUENCES=1.
import { describe, expect, it } from "vitest";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";
import { WorkQueue, type GetResult } from "../../../runtime/workqueue/index.ts";
import { mulberry32 } from "./helpers.ts";

const BASE_SEED = Number(process.env.WQ_SEED ?? 20_260_801);
const SEQUENCES = Number(process.env.WQ_SEQUENCES ?? 2_000);
const STEPS = 150;
const KEYS = ["k0", "k1", "k2", "k3", "k4", "k5"];
const PRIORITIES = [-100, -1, 0, 0, 0, 1, 5];
const BACKOFF = { baseMs: 5, maxMs: 80, forgetAfterMs: 200 };

interface Worker {
  id: number;
  status: "idle" | "waiting" | "holding" | "stopped";
  key?: string;
  abort?: AbortController;
}

/** What the queue should hold, written as plainly as possible. */
class Model {
  now = 0;
  shutdown = false;
  /** Queued keys: one entry each, whatever their state. */
  readonly entries = new Map<string, { priority: number; readyAt: number }>();
  readonly processing = new Set<string>();
  /** Keys added since they were last handed out: each must be handed out eventually. */
  readonly pending = new Set<string>();
  readonly failures = new Map<string, { count: number; lastAt: number; forgetAt: number }>();

  constructor(readonly aging: number) {}

  ready(): string[] {
    return [...this.entries].filter(([k, e]) => !this.processing.has(k) && e.readyAt <= this.now).map(([k]) => k);
  }
  waiting(): string[] {
    return [...this.entries].filter(([k, e]) => !this.processing.has(k) && e.readyAt > this.now).map(([k]) => k);
  }
  parked(): string[] {
    return [...this.entries.keys()].filter((k) => this.processing.has(k));
  }
  score(key: string): number {
    const e = this.entries.get(key)!;
    return this.aging === Infinity ? e.priority : e.priority * this.aging - e.readyAt;
  }

  add(key: string, priority: number, afterMs: number): void {
    if (this.shutdown) return;
    const readyAt = afterMs > 0 ? this.now + afterMs : this.now;
    const e = this.entries.get(key);
    if (e === undefined) this.entries.set(key, { priority, readyAt });
    else this.entries.set(key, { priority: Math.max(e.priority, priority), readyAt: Math.min(e.readyAt, readyAt) });
    this.pending.add(key);
  }

  failureCount(key: string): number {
    const f = this.failures.get(key);
    if (f === undefined || this.now >= f.forgetAt) return 0;
    return f.count;
  }

  nextBackoff(key: string): number {
    const count = this.failureCount(key);
    const delay = Math.min(BACKOFF.maxMs, BACKOFF.baseMs * 2 ** count);
    this.failures.set(key, { count: count + 1, lastAt: this.now, forgetAt: this.now + delay + BACKOFF.forgetAfterMs });
    return delay;
  }

  doShutdown(): void {
    this.shutdown = true;
    // Waiting and parked keys are dropped by design; only ready keys are still handed out.
    for (const [k, e] of this.entries) {
      if (this.processing.has(k) || e.readyAt > this.now) {
        this.entries.delete(k);
        this.pending.delete(k);
      }
    }
  }
}

type Stats = { handOuts: number; orderedHandOuts: number; parked: number; aborted: number; shutdowns: number; drains: number };

async function runSequence(seed: number): Promise<Stats> {
  const rand = mulberry32(seed);
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const aging = pick([100, 1, Infinity]);
  const clock = new FakeClock(0);
  const q = new WorkQueue({ name: "model", clock, agingMsPerPriority: aging, backoff: { ...BACKOFF, jitter: "none" } });
  const model = new Model(aging);
  const workers: Worker[] = Array.from({ length: 1 + Math.floor(rand() * 4) }, (_, id) => ({ id, status: "idle" }));
  const trace: string[] = [];
  // Results in the order the queue resolved them (promise callbacks run in resolution order).
  const results: { worker: Worker; result?: GetResult<string>; rejected?: boolean }[] = [];
  const stats = { handOuts: 0, orderedHandOuts: 0, parked: 0, aborted: 0, shutdowns: 0, drains: 0 };
  let drain: { resolved: boolean } | undefined;
  let sawShutdown = false;

  const fail = (msg: string): never => {
    throw new Error(`seed ${seed} (aging ${aging}, ${workers.length} workers): ${msg}\n  last ops: ${trace.slice(-25).join("; ")}`);
  };
  const sameSet = (what: string, actual: string[], expected: string[]) => {
    if (new Set(actual).size !== actual.length) fail(`${what} has duplicates: ${actual}`);
    const a = [...actual].sort().join(",");
    const e = [...expected].sort().join(",");
    if (a !== e) fail(`${what} is [${a}], model says [${e}]`);
  };

  const get = (w: Worker, withSignal: boolean) => {
    w.abort = withSignal ? new AbortController() : undefined;
    w.status = "waiting";
    q.get(w.abort?.signal).then(
      (result) => results.push({ worker: w, result }),
      () => results.push({ worker: w, rejected: true }),
    );
  };

  // Apply the queue's hand-outs to the model, checking each is legal. `ordered`: no clock advance
  // happened in this step, so the key must be a best-scoring ready key at the moment it went out.
  const settle = async (ordered: boolean) => {
    await flushMicrotasks(3);
    for (const { worker: w, result, rejected } of results.splice(0)) {
      if (rejected) {
        if (w.status !== "waiting" || !w.abort?.signal.aborted) fail(`worker ${w.id} rejected without an abort`);
        w.status = "idle";
        stats.aborted++;
        continue;
      }
      if (result!.shutdown) {
        if (!model.shutdown) fail(`worker ${w.id} told shutdown before shutDown()`);
        if (model.ready().length > 0) fail(`worker ${w.id} told shutdown with ready keys ${model.ready()}`);
        sawShutdown = true;
        w.status = "stopped";
        continue;
      }
      const { key, priority } = result!;
      if (sawShutdown) fail(`handed out ${key} after a get() already said shutdown`);
      const ready = model.ready();
      if (!ready.includes(key)) fail(`handed out ${key}, which is not ready (ready: ${ready})`);
      if (workers.some((o) => o.status === "holding" && o.key === key)) fail(`${key} handed to two workers`);
      if (priority !== model.entries.get(key)!.priority) fail(`${key} priority ${priority}, model ${model.entries.get(key)!.priority}`);
      stats.handOuts++;
      if (ordered) {
        stats.orderedHandOuts++;
        const best = Math.max(...ready.map((k) => model.score(k)));
        if (model.score(key) !== best) fail(`handed out ${key} (score ${model.score(key)}) while a ready key scores ${best}`);
      }
      model.entries.delete(key);
      model.processing.add(key);
      model.pending.delete(key);
      w.status = "holding";
      w.key = key;
    }
  };

  const check = () => {
    const s = q.snapshot();
    sameSet("ready", s.ready, model.ready());
    sameSet("waiting", s.waiting, model.waiting());
    sameSet("parked", s.parked, model.parked());
    stats.parked += s.parked.length;
    sameSet("processing", s.processing, [...model.processing]);
    const held = workers.filter((w) => w.status === "holding").map((w) => w.key!);
    sameSet("keys held by workers", held, [...model.processing]);
    const both = s.ready.filter((k) => s.waiting.includes(k) || s.parked.includes(k));
    if (both.length > 0) fail(`keys both ready and waiting/parked: ${both}`);
    if (q.len() !== model.ready().length) fail(`len() ${q.len()}, model ${model.ready().length}`);
    const waitingWorkers = workers.filter((w) => w.status === "waiting").length;
    if (s.waiters !== waitingWorkers) fail(`queue has ${s.waiters} waiters, ${waitingWorkers} workers wait`);
    // No lost wake-up: a worker never waits while a key is ready.
    if (waitingWorkers > 0 && s.ready.length > 0) fail(`workers wait while ${s.ready} are ready`);
    const timers = clock.pendingTimers();
    if (timers !== (s.waiting.length > 0 ? 1 : 0)) fail(`${timers} timers armed for ${s.waiting.length} waiting keys`);
    for (const k of KEYS) {
      if (q.numRequeues(k) !== model.failureCount(k)) fail(`numRequeues(${k}) ${q.numRequeues(k)}, model ${model.failureCount(k)}`);
    }
    if (drain !== undefined) {
      const drained = model.ready().length === 0 && model.processing.size === 0;
      if (drain.resolved !== drained) fail(`drain resolved=${drain.resolved} but drained=${drained}`);
    }
  };

  for (let step = 0; step < STEPS; step++) {
    const r = rand();
    let ordered = true;
    const key = pick(KEYS);
    if (r < 0.3) {
      const priority = pick(PRIORITIES);
      const afterMs = rand() < 0.5 ? 0 : 1 + Math.floor(rand() * 100);
      trace.push(`add ${key} p${priority} +${afterMs}`);
      q.add(key, { priority, afterMs });
      model.add(key, priority, afterMs);
    } else if (r < 0.38) {
      const priority = pick(PRIORITIES);
      trace.push(`addRateLimited ${key} p${priority}`);
      q.addRateLimited(key, { priority });
      if (!model.shutdown) model.add(key, priority, model.nextBackoff(key));
    } else if (r < 0.58) {
      const w = pick(workers);
      if (w.status === "idle" || w.status === "stopped") {
        const withSignal = rand() < 0.3;
        trace.push(`get w${w.id}${withSignal ? " (signal)" : ""}`);
        get(w, withSignal);
      }
    } else if (r < 0.76) {
      const w = pick(workers);
      if (w.status === "holding") {
        trace.push(`done w${w.id} ${w.key}`);
        q.done(w.key!);
        model.processing.delete(w.key!);
        w.status = "idle";
        w.key = undefined;
      }
    } else if (r < 0.79) {
      if (!model.processing.has(key)) {
        trace.push(`done ${key} (not held)`);
        q.done(key);
      }
    } else if (r < 0.83) {
      trace.push(`forget ${key}`);
      q.forget(key);
      model.failures.delete(key);
    } else if (r < 0.97) {
      const ms = Math.floor(rand() * 60);
      trace.push(`advance ${ms}`);
      clock.advance(ms);
      model.now += ms;
      ordered = false;
    } else if (r < 0.99) {
      const w = workers.find((x) => x.status === "waiting" && x.abort !== undefined);
      if (w !== undefined) {
        trace.push(`abort w${w.id}`);
        w.abort!.abort(new Error("aborted"));
      }
    } else if (!model.shutdown) {
      if (rand() < 0.5) {
        trace.push("shutDown");
        stats.shutdowns++;
        q.shutDown();
      } else {
        trace.push("shutDownWithDrain");
        stats.drains++;
        const d = { resolved: false };
        drain = d;
        void q.shutDownWithDrain().then(() => (d.resolved = true));
      }
      model.doShutdown();
    }
    await settle(ordered);
    check();
  }

  // Quiesce: no more adds; workers finish, keep asking, and time passes beyond every delay.
  for (let round = 0; round < 50 && (model.pending.size > 0 || model.processing.size > 0); round++) {
    for (const w of workers) {
      if (w.status === "holding") {
        trace.push(`done w${w.id} ${w.key}`);
        q.done(w.key!);
        model.processing.delete(w.key!);
        w.status = "idle";
        w.key = undefined;
      }
    }
    for (const w of workers) if (w.status === "idle") get(w, false);
    await settle(true);
    check();
    trace.push("advance 200");
    clock.advance(200);
    model.now += 200;
    await settle(false);
    check();
  }
  // Every add was followed by a hand-out of its key (shutdown drops only waiting/parked keys).
  if (model.pending.size > 0) fail(`never handed out after their add: ${[...model.pending]}`);

  // Finally every worker, waiting or not, learns of the shutdown.
  q.shutDown();
  model.doShutdown();
  await settle(true);
  for (const w of workers) if (w.status === "idle") get(w, false);
  await settle(true);
  const stuck = workers.filter((w) => w.status === "waiting");
  if (stuck.length > 0) fail(`workers ${stuck.map((w) => w.id)} still waiting after shutdown`);
  return stats;
}

describe("WorkQueue against a reference model", () => {
  it(`holds every invariant over ${SEQUENCES} random sequences (seeds ${BASE_SEED}..${BASE_SEED + SEQUENCES - 1})`, async () => {
    const total: Stats = { handOuts: 0, orderedHandOuts: 0, parked: 0, aborted: 0, shutdowns: 0, drains: 0 };
    for (let i = 0; i < SEQUENCES; i++) {
      const s = await runSequence(BASE_SEED + i);
      for (const k of Object.keys(total) as (keyof Stats)[]) total[k] += s[k];
    }
    // The sequences reached every path the invariants are about (a run that never parked a key or
    // never shut down would prove little).
    const minimum = Math.ceil(SEQUENCES / 200);
    expect(total.handOuts).toBeGreaterThan(SEQUENCES * 10);
    expect(total.orderedHandOuts).toBeGreaterThan(SEQUENCES);
    for (const k of ["parked", "aborted", "shutdowns", "drains"] as const) expect(total[k]).toBeGreaterThanOrEqual(minimum);
  });
});
