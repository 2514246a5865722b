// SqliteStore behaviour beyond the shared contract: durability (close/reopen, SIGKILL), a second
// store on the same file seeing writes through its watch (the poll path), leases reaped at open,
// and compaction physically removing superseded history.
import { spawn } from "node:child_process";
import { chmod, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { StoreUnavailableError } from "../../../adapters/store/errors.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { record, waitFor } from "./contract.ts";

describe("SqliteStore", () => {
  let dir: string;
  let path: string;
  const open: SqliteStore[] = [];
  const openStore = (pollIntervalMs?: number) => {
    const store = new SqliteStore({ path, pollIntervalMs });
    open.push(store);
    return store;
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "capstan-sqlite-"));
    path = join(dir, "nested", "state.db");
  });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps its file private: a new directory 0700, the database 0600 even when it was 0644", async () => {
    const store = openStore();
    await store.put("/a", "1");
    expect((await stat(join(dir, "nested"))).mode & 0o777).toBe(0o700);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    await store.close();
    open.splice(0);
    await chmod(path, 0o644);
    openStore();
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it("keeps data, revision and history across close and reopen", async () => {
    const first = openStore();
    expect(await first.revision()).toBe(1);
    const r1 = await first.put("/a", "1");
    await first.put("/a", "2");
    await first.txn([], [{ type: "put", key: "/b", value: "1" }, { type: "put", key: "/c", value: "1" }]);
    const before = await first.revision();
    await first.close();

    const second = openStore();
    expect(await second.revision()).toBe(before);
    expect(await second.get("/a")).toMatchObject({ value: "2", createRevision: r1.revision, version: 2 });
    expect((await second.list("/", { revision: r1.revision })).items.map((kv) => kv.value)).toEqual(["1"]);
    expect((await second.put("/d", "1")).revision).toBe(before + 1);
  });

  it("keeps every acknowledged write when the writing process is killed", async () => {
    const fixture = fileURLToPath(new URL("./fixtures/sqlite-writer.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", fixture, path, "/k/"], { stdio: ["ignore", "pipe", "pipe"] });
    let acked = -1;
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      for (const line of chunk.split("\n").filter(Boolean)) acked = Number(line);
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const exited = new Promise((resolve) => child.on("exit", resolve));
    try {
      await waitFor(`the writer to acknowledge 100 puts (stderr: ${stderr})`, () => acked >= 100, 30_000);
    } finally {
      child.kill("SIGKILL");
      await exited;
    }
    const store = openStore();
    const { items } = await store.list("/k/");
    const stored = new Set(items.map((kv) => Number(kv.value)));
    for (let i = 0; i <= acked; i++) expect(stored.has(i)).toBe(true);
    expect(await store.revision()).toBeGreaterThanOrEqual(acked + 2);
  });

  it("shows a second store on the same file every write through its watch (poll path)", async () => {
    const writer = openStore();
    const reader = openStore(50);
    const from = (await reader.revision()) + 1;
    const r = record(reader, "/w/", from);
    const puts = [];
    for (let i = 0; i < 20; i++) puts.push((await writer.put(`/w/${i}`, String(i))).revision);
    const txn = await writer.txn(
      [],
      [
        { type: "put", key: "/w/x", value: "1" },
        { type: "delete", key: "/w/0" },
      ],
    );
    await writer.put("/elsewhere", "not watched");
    await waitFor("22 events on the other store", () => r.events.length >= 22, 5000);
    expect(r.events.slice(0, 20).map((e) => e.kv.modRevision)).toEqual(puts);
    const txnEvents = r.batches.flat().filter((e) => e.kv.modRevision === txn.revision);
    expect(txnEvents.map((e) => [e.type, e.kv.key])).toEqual([
      ["delete", "/w/0"],
      ["put", "/w/x"],
    ]);
    expect(r.batches.some((b) => b.filter((e) => e.kv.modRevision === txn.revision).length === 2)).toBe(true);

    // A progress request on a quiet watch is answered with the store's revision.
    r.watch.requestProgress();
    await waitFor("progress", () => r.progress.length > 0, 5000);
    expect(r.progress[0]).toBe(await writer.revision());
  });

  it("reaps leases that expired while no store had the file open", async () => {
    const first = openStore();
    const lease = await first.grantLease(1);
    const put = await first.put("/l/a", "1", { lease: lease.id });
    await first.close();
    await new Promise((resolve) => setTimeout(resolve, 1100));

    const second = openStore();
    expect(await second.get("/l/a")).toBeNull();
    const r = record(second, "/l/", put.revision + 1);
    await waitFor("the reaped key's delete event", () => r.events.length === 1);
    expect(r.events[0]).toMatchObject({ type: "delete", kv: { key: "/l/a" }, prevKv: { lease: lease.id } });
    await expect(lease.keepAliveOnce()).rejects.toThrow(/closed/);
    const again = await second.grantLease(1);
    expect(Number(again.id)).toBeGreaterThan(Number(lease.id)); // lease ids are never reused
  });

  it("waits out a lease TTL longer than setTimeout's limit without spinning, then expires it", async () => {
    const MAX_TIMER_MS = 2 ** 31 - 1; // Node runs a longer setTimeout after 1 ms
    const ttlMs = 30 * 24 * 3600 * 1000;
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] }); // these clamp as Node does
    try {
      const store = openStore();
      const lease = await store.grantLease(ttlMs / 1000);
      await store.put("/long/a", "1", { lease: lease.id });
      const arms = vi.spyOn(globalThis, "setTimeout");
      vi.advanceTimersByTime(10_000);
      expect(arms).not.toHaveBeenCalled(); // the expiry timer is not re-armed every millisecond
      vi.advanceTimersByTime(MAX_TIMER_MS - 10_000); // the longest timer fires: it re-arms, nothing more
      expect(arms).toHaveBeenCalledTimes(1);
      expect(await store.get("/long/a")).not.toBeNull();
      vi.advanceTimersByTime(ttlMs - MAX_TIMER_MS - 1);
      expect(await store.get("/long/a")).not.toBeNull();
      vi.advanceTimersByTime(1);
      expect(await store.get("/long/a")).toBeNull();
      await store.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it("waits for another connection's write lock without freezing the event loop, then writes", async () => {
    const store = openStore();
    await store.put("/busy/a", "0");
    const holder = new Database(path); // another writer on the same file, e.g. a second process
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    try {
      holder.exec("BEGIN IMMEDIATE"); // takes the write lock and keeps it
      const started = Date.now();
      const put = store.put("/busy/a", "1");
      const callBlockedMs = Date.now() - started;
      let settled = false;
      void put.finally(() => (settled = true)).catch(() => {});
      const ticksBefore = ticks;
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(callBlockedMs).toBeLessThan(100);
      expect(ticks - ticksBefore).toBeGreaterThan(10); // ~50 at 10 ms: the loop kept running
      expect(settled).toBe(false);
      holder.exec("COMMIT");
      expect((await put).succeeded).toBe(true);
      expect((await store.get("/busy/a"))?.value).toBe("1");

      // A lock held past WRITE_LOCK_WAIT_MS (5 s): the write gives up, typed.
      holder.exec("BEGIN IMMEDIATE");
      const giveUpStarted = Date.now();
      const ticksBeforeGiveUp = ticks;
      await expect(store.put("/busy/a", "2")).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(Date.now() - giveUpStarted).toBeGreaterThanOrEqual(5_000);
      expect(ticks - ticksBeforeGiveUp).toBeGreaterThan(100);
      holder.exec("ROLLBACK");
      expect((await store.put("/busy/a", "3")).succeeded).toBe(true);
    } finally {
      clearInterval(ticker);
      if (holder.inTransaction) holder.exec("ROLLBACK");
      holder.close();
    }
  });

  it("expires a lease whose timer fired while another connection held the write lock, once the lock is free", async () => {
    const store = openStore();
    const lease = await store.grantLease(1);
    await store.put("/busy/leased", "1", { lease: lease.id });
    const holder = new Database(path);
    try {
      holder.exec("BEGIN IMMEDIATE");
      await new Promise((resolve) => setTimeout(resolve, 1_300)); // the expiry timer fires meanwhile
      expect(await store.get("/busy/leased")).not.toBeNull();
      holder.exec("COMMIT");
      let gone = false;
      for (const until = Date.now() + 1_000; !gone && Date.now() < until; ) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        gone = (await store.get("/busy/leased")) === null;
      }
      expect(gone).toBe(true);
    } finally {
      if (holder.inTransaction) holder.exec("ROLLBACK");
      holder.close();
    }
  });

  it("compaction physically drops superseded history and keeps what reads at or above it need", async () => {
    const store = openStore();
    await store.put("/c/a", "1");
    await store.put("/c/a", "2");
    const r3 = await store.put("/c/a", "3");
    await store.put("/c/gone", "1");
    await store.delete("/c/gone");
    await store.put("/c/a", "4");
    await store.compact(r3.revision + 2); // the revision of the delete of /c/gone
    const db = new Database(path, { readonly: true });
    try {
      const history = () =>
        db.prepare("SELECT CAST(key AS TEXT) AS key, revision, deleted FROM log ORDER BY revision").all();
      // Kept: /c/a's newest row at or below the compact revision (a list there needs it), and the
      // tombstone *at* the compact revision (a watch from there must see that delete).
      expect(history()).toEqual([
        { key: "/c/a", revision: r3.revision, deleted: 0 },
        { key: "/c/gone", revision: r3.revision + 2, deleted: 1 },
        { key: "/c/a", revision: r3.revision + 3, deleted: 0 },
      ]);
      const atCompaction = await store.list("/c/", { revision: r3.revision + 2 });
      expect(atCompaction.items.map((kv) => [kv.key, kv.value])).toEqual([["/c/a", "3"]]);

      await store.compact(r3.revision + 3);
      expect(history()).toEqual([{ key: "/c/a", revision: r3.revision + 3, deleted: 0 }]);
    } finally {
      db.close();
    }
    await expect(store.compact((await store.revision()) + 1)).rejects.toBeInstanceOf(RangeError);
  });
});
