// Leader election and fencing over the shared etcd (short TTLs for test speed). Whole manager
// processes are SIGKILLed and SIGTERMed; fencing is checked in-process with a deposed elector.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { fencedStore, FencedWriteArgumentError, NotLeaderError } from "../../../adapters/store/fenced.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { eventually } from "./support.ts";

const fixture = fileURLToPath(new URL("./fixtures/elected-manager.ts", import.meta.url));
const TTL_MS = 3_000;

interface Line {
  event: string;
  key?: string;
  port?: number;
  at: number;
}

class ManagerProcess {
  readonly lines: Line[] = [];
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;
  private stderr = "";

  constructor(
    readonly identity: string,
    prefix: string,
    endpoints: string[],
  ) {
    this.child = spawn(process.execPath, ["--import", "tsx", fixture], {
      env: { ...process.env, ETCD_ENDPOINTS: endpoints.join(","), PREFIX: prefix, IDENTITY: identity },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let buffer = "";
    this.child.stdout!.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      let i: number;
      while ((i = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        if (line.trim()) this.lines.push({ ...(JSON.parse(line) as Omit<Line, "at">), at: Date.now() });
      }
    });
    this.child.stderr!.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }

  async waitFor(event: string, timeoutMs: number, after = 0): Promise<Line> {
    const found = () => this.lines.find((l) => l.event === event && l.at >= after);
    const ok = await eventually(() => found() !== undefined, timeoutMs, 20);
    if (!ok) throw new Error(`${this.identity}: no ${event} within ${timeoutMs} ms; stderr: ${this.stderr.slice(-1500)}`);
    return found()!;
  }

  count(event: string): number {
    return this.lines.filter((l) => l.event === event).length;
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }
}

describe("leader election across manager processes", () => {
  const { etcdEndpoints } = loadServices();
  const prefix = `/test/${uniqueName("election")}/`;
  let store: Store;
  const children: ManagerProcess[] = [];

  beforeAll(async () => {
    store = new EtcdStore({ endpoints: etcdEndpoints });
  });

  afterAll(async () => {
    for (const c of children) c.kill("SIGKILL");
    await Promise.all(children.map((c) => c.exited));
    await store.deletePrefix(prefix);
    await store.close();
  });

  const spawnManager = (identity: string) => {
    const c = new ManagerProcess(identity, prefix, etcdEndpoints);
    children.push(c);
    return c;
  };

  it("runs controllers only on the leader, fails over within the lease TTL after SIGKILL, and at once after SIGTERM", async () => {
    const a = spawnManager("a");
    await a.waitFor("leading", 20_000);
    const b = spawnManager("b");
    await b.waitFor("http", 20_000);
    await new Promise((r) => setTimeout(r, 500)); // b has campaigned and is following

    // Only the leader reconciles.
    await store.put(`${prefix}items/one`, "1");
    await store.put(`${prefix}items/two`, "2");
    expect(await eventually(async () => (await store.get(`${prefix}done/two`))?.value === "a", 10_000)).toBe(true);
    expect((await store.get(`${prefix}done/one`))?.value).toBe("a");
    expect(b.count("leading")).toBe(0);
    expect(b.count("reconciled")).toBe(0);

    // SIGKILL the leader: no revoke, so b must wait for etcd to expire the lease (<= TTL after the
    // last keep-alive, which was at most TTL/3 before the kill).
    const killedAt = Date.now();
    a.kill("SIGKILL");
    const bLeads = await b.waitFor("leading", 10_000);
    const failoverMs = bLeads.at - killedAt;
    expect(failoverMs).toBeLessThan(TTL_MS + 1_000);
    // The new leader resyncs from its warm cache: it reconciles every item again, under its own fence.
    expect(await eventually(async () => (await store.get(`${prefix}done/one`))?.value === "b", 10_000)).toBe(true);
    await store.put(`${prefix}items/three`, "3");
    expect(await eventually(async () => (await store.get(`${prefix}done/three`))?.value === "b", 10_000)).toBe(true);

    // Clean shutdown revokes the lease: a watching follower takes over at once, not after a TTL.
    const c = spawnManager("c");
    await c.waitFor("http", 20_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(c.count("leading")).toBe(0);
    const termAt = Date.now();
    b.kill("SIGTERM");
    expect(await b.exited).toBe(0);
    const exitedAt = Date.now();
    const cLeads = await c.waitFor("leading", 10_000, termAt);
    expect(cLeads.at - exitedAt).toBeLessThan(1_000);
    expect(cLeads.at - termAt).toBeLessThan(TTL_MS);
    // b ended its term before it exited (controllers stopped, then the lease was revoked).
    expect(b.lines.find((l) => l.event === "term-ended")!.at).toBeLessThanOrEqual(exitedAt);
  });
});

describe("fenced writes", () => {
  const { etcdEndpoints } = loadServices();
  const prefix = `/test/${uniqueName("fence")}/`;
  const key = `${prefix}leader`;
  let store: Store;

  beforeAll(async () => {
    store = new EtcdStore({ endpoints: etcdEndpoints });
  });

  afterAll(async () => {
    await store.deletePrefix(prefix);
    await store.close();
  });

  it("a leader's writes go through; a compare failure stays an ordinary {succeeded:false}", async () => {
    const elector = new LeaderElector({ store, key, identity: "solo", ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 });
    elector.start({ onStartedLeading: () => {}, onStoppedLeading: () => {} });
    expect(await eventually(() => elector.state() === "leading", 5_000)).toBe(true);
    const fenced = fencedStore(store, () => elector.fence());
    const put = await fenced.put(`${prefix}x`, "1");
    expect(put.succeeded).toBe(true);
    const conflict = await fenced.put(`${prefix}x`, "2", { expect: [{ key: `${prefix}x`, target: "modRevision", equals: 1 }] });
    expect(conflict.succeeded).toBe(false);
    expect((await store.get(`${prefix}x`))?.value).toBe("1");
    expect((await fenced.txn([], [{ type: "put", key: `${prefix}y`, value: "y" }])).succeeded).toBe(true);
    await expect(fenced.txn([], [], [{ type: "delete", key: `${prefix}y` }])).rejects.toBeInstanceOf(FencedWriteArgumentError);
    expect((await fenced.deletePrefix(`${prefix}y`)).succeeded).toBe(true);
    expect(await store.get(`${prefix}y`)).toBeNull();
    await elector.stop();
    // Released: no fence, so nothing is even attempted.
    await expect(fenced.put(`${prefix}x`, "3")).rejects.toBeInstanceOf(NotLeaderError);
    expect((await store.get(`${prefix}x`))?.value).toBe("1");
  });

  it("a deposed leader (its client closed without revoking) steps down before the new leader is elected, and its stale fence is refused", async () => {
    const clientA = new EtcdStore({ endpoints: etcdEndpoints, callTimeoutMs: 500 });
    const events: { who: string; what: string; at: number }[] = [];
    const a = new LeaderElector({ store: clientA, key, identity: "a", ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 });
    a.start({
      onStartedLeading: () => events.push({ who: "a", what: "lead", at: Date.now() }),
      onStoppedLeading: (i) => void events.push({ who: "a", what: i.kind, at: Date.now() }),
    });
    expect(await eventually(() => a.state() === "leading", 5_000)).toBe(true);
    const staleFence = a.fence()!;
    const b = new LeaderElector({ store, key, identity: "b", ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 });
    b.start({
      onStartedLeading: () => events.push({ who: "b", what: "lead", at: Date.now() }),
      onStoppedLeading: () => {},
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(b.state()).toBe("following");

    // A's process "freezes": its connection is gone, its lease is not revoked.
    await clientA.close();
    expect(await eventually(() => b.state() === "leading", TTL_MS + 2_000)).toBe(true);
    const aLost = events.find((e) => e.who === "a" && e.what === "lost");
    const bLead = events.find((e) => e.who === "b" && e.what === "lead");
    expect(aLost).toBeDefined();
    expect(aLost!.at).toBeLessThan(bLead!.at);
    expect(a.fence()).toBeNull();

    // A write carrying A's old fence (a write that was already on its way) is refused by etcd.
    const deposed = fencedStore(store, () => staleFence);
    await expect(deposed.put(`${prefix}z`, "from-a")).rejects.toBeInstanceOf(NotLeaderError);
    await expect(deposed.delete(`${prefix}x`)).rejects.toBeInstanceOf(NotLeaderError);
    expect(await store.get(`${prefix}z`)).toBeNull();
    // The new leader's writes go through.
    const current = fencedStore(store, () => b.fence());
    expect((await current.put(`${prefix}z`, "from-b")).succeeded).toBe(true);
    expect(b.fence()!.createRevision).toBeGreaterThan(staleFence.createRevision);
    await a.stop();
    await b.stop();
  });
});

describe("leader election on the embedded store", () => {
  it("elects one fenced leader among processes sharing a SQLite file, and fences out the deposed one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-election-sqlite-"));
    const path = join(dir, "state.db");
    // Two SqliteStore instances on one file stand for two processes (capstan up started twice on
    // one data directory, or a restart overlapping the old process's drain).
    const storeA = new SqliteStore({ path });
    const storeB = new SqliteStore({ path, pollIntervalMs: 50 });
    const key = "/platform/test/leader";
    const timings = { ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 };
    const a = new LeaderElector({ store: storeA, key, identity: "a", ...timings });
    const b = new LeaderElector({ store: storeB, key, identity: "b", ...timings });
    try {
      a.start({ onStartedLeading: () => {}, onStoppedLeading: () => {} });
      expect(await eventually(() => a.state() === "leading", 5_000)).toBe(true);
      b.start({ onStartedLeading: () => {}, onStoppedLeading: () => {} });
      expect(await eventually(() => b.state() === "following", 5_000)).toBe(true);
      await new Promise((r) => setTimeout(r, 1_500)); // several of b's retry periods
      expect(a.state()).toBe("leading");
      expect(b.state()).toBe("following");

      const fenceA = a.fence()!;
      expect((await fencedStore(storeA, () => a.fence()).put("/platform/test/x", "from-a")).succeeded).toBe(true);
      await a.stop(); // revokes: b takes over at once
      expect(await eventually(() => b.state() === "leading", 2_000)).toBe(true);
      expect(b.fence()!.createRevision).toBeGreaterThan(fenceA.createRevision);
      await expect(fencedStore(storeA, () => fenceA).put("/platform/test/x", "stale")).rejects.toBeInstanceOf(NotLeaderError);
      expect((await fencedStore(storeB, () => b.fence()).put("/platform/test/x", "from-b")).succeeded).toBe(true);
      expect((await storeA.get("/platform/test/x"))?.value).toBe("from-b");
    } finally {
      await a.stop();
      await b.stop();
      await storeA.close();
      await storeB.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("leader election on the embedded store", () => {
  it("a follower takes over at once on release, although compaction removed the leader key's own revision", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-election-"));
    const store = new SqliteStore({ path: join(dir, "state.db") });
    try {
      const key = "/platform/test/compacted-leader";
      // A retry period far above the asserted takeover time: only the watch can be that fast.
      const timings = { ttlSeconds: 15, renewDeadlineMs: 10_000, retryPeriodMs: 5_000 };
      const a = new LeaderElector({ store, key, identity: "a", ...timings });
      a.start({ onStartedLeading: () => {}, onStoppedLeading: () => {} });
      expect(await eventually(() => a.state() === "leading", 5_000)).toBe(true);
      for (let i = 0; i < 5; i++) await store.put(`/platform/test/other/${i}`, "x");
      await store.compact(await store.revision()); // a long-lived leader: its key's revision is history
      let tookOverAt = 0;
      const b = new LeaderElector({ store, key, identity: "b", ...timings });
      b.start({ onStartedLeading: () => (tookOverAt = Date.now()), onStoppedLeading: () => {} });
      expect(await eventually(() => b.state() === "following", 5_000)).toBe(true);
      await new Promise((r) => setTimeout(r, 300)); // B is watching the key
      const releasedAt = Date.now();
      await a.stop(); // revokes the lease: the key is deleted
      expect(await eventually(() => tookOverAt > 0, 6_000, 10)).toBe(true);
      expect(tookOverAt - releasedAt).toBeLessThan(1_000);
      await b.stop();
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a leader key without a lease", () => {
  // Written by something other than an elector (an older Capstan, a hand-made put): it would never
  // expire, so without a takeover no process could ever lead again.
  it("is taken over in place on both stores, and the new leader's fence holds", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-election-"));
    const stores: Store[] = [new SqliteStore({ path: join(dir, "state.db") }), new EtcdStore({ endpoints: loadServices().etcdEndpoints })];
    try {
      for (const store of stores) {
        const key = `/platform/test/${uniqueName("orphan-leader")}`;
        await store.put(key, "an-old-process");
        const orphan = (await store.get(key))!;
        expect(orphan.lease).toBeUndefined();
        const a = new LeaderElector({ store, key, identity: "a", ttlSeconds: 3, renewDeadlineMs: 2_000, retryPeriodMs: 500 });
        a.start({ onStartedLeading: () => {}, onStoppedLeading: () => {} });
        expect(await eventually(() => a.state() === "leading", 5_000)).toBe(true);
        const now = (await store.get(key))!;
        expect(now.value).toBe("a");
        expect(now.lease).toBeDefined();
        expect(now.createRevision).toBe(orphan.createRevision);
        const fenced = fencedStore(store, () => a.fence());
        expect((await fenced.put(`${key}-data`, "x")).succeeded).toBe(true);
        await a.stop(); // revokes the lease: the key is gone, not left behind again
        expect(await store.get(key)).toBeNull();
        await store.delete(`${key}-data`);
      }
    } finally {
      for (const store of stores) await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
