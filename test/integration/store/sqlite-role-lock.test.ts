// One process per role on an embedded store (docs/store.md, "One process per role"): the OS lock
// held by a real process refuses a second at once and names it; kill -9 frees it; the next holder
// learns who held it before, and its elector takes a leader key such a holder left at once.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { acquireRoleLock, RoleLockFileError, StoreRoleLockedError } from "../../../adapters/store/sqlite-role-lock.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { ElectedCompactor } from "../../../runtime/compactor.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { pollUntil } from "../../helpers/poll.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-role-lock-"));
const lockModule = fileURLToPath(new URL("../../../adapters/store/sqlite-role-lock.ts", import.meta.url));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A real process that takes the lock as `identity` and holds it until killed. */
function holder(db: string, identity: string) {
  const code =
    `const { acquireRoleLock } = await import(${JSON.stringify(lockModule)}); ` +
    `try { acquireRoleLock(${JSON.stringify(db)}, "orchestrator", ${JSON.stringify(identity)}); console.log("held"); setInterval(() => {}, 1000); } ` +
    `catch (e) { console.log("refused " + e.name + ": " + e.message); process.exit(3); }`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  return {
    child,
    held: () => pollUntil("the child to hold the lock", async () => out.includes("held"), 20_000, 20),
    answered: () => pollUntil("the child to hold or be refused", async () => /held|refused/.test(out), 20_000, 20),
    out: () => out,
    exited,
  };
}

describe("the role lock of an embedded store", () => {
  it("refuses a second holder at once, naming the file and the holder's pid; kill -9 frees it", async () => {
    const db = join(dir, "state.db");
    const first = holder(db, "first:1");
    await first.held();
    const started = Date.now();
    let error: unknown;
    try {
      acquireRoleLock(db, "orchestrator", "second:2");
    } catch (e) {
      error = e;
    }
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(error).toBeInstanceOf(StoreRoleLockedError);
    expect((error as Error).message).toContain(`sqlite://${db} is in use as orchestrator by process ${first.child.pid} (lock file ${db}.orchestrator.lock)`);
    expect(statSync(`${db}.orchestrator.lock`).mode & 0o777).toBe(0o600);
    // Another role on the same file is another lock.
    acquireRoleLock(db, "secret-sync", "second:2").release();

    first.child.kill("SIGKILL");
    await first.exited;
    const lock = acquireRoleLock(db, "orchestrator", "third:3");
    expect([...lock.previousHolders]).toEqual(["first:1"]);
    // In this process too, the lock is one holder's, and refusing a second does not drop it
    // (POSIX locks go when any descriptor of the file closes): another process is still refused.
    expect(() => acquireRoleLock(db, "orchestrator", "fourth:4")).toThrow(/by this process/);
    const other = holder(db, "fifth:5");
    await other.answered();
    await other.exited;
    expect(other.out()).toContain(`refused StoreRoleLockedError: sqlite://${db} is in use as orchestrator by process ${process.pid}`);
    expect(JSON.parse(readFileSync(`${db}.orchestrator.lock.holders`, "utf8"))).toMatchObject({ pid: process.pid, identities: ["third:3", "first:1"] });
    // The lock file itself is never written: nothing in it for a crash to damage.
    expect(statSync(`${db}.orchestrator.lock`).size).toBe(0);
    lock.release();
  });

  it("gives the lock to exactly one of two processes starting at the same moment", async () => {
    const db = join(dir, "race.db");
    const both = [holder(db, "a:1"), holder(db, "b:2")];
    await Promise.all(both.map((h) => h.answered()));
    const outs = both.map((h) => h.out());
    expect(outs.filter((o) => o.includes("held"))).toHaveLength(1);
    expect(outs.filter((o) => o.includes("refused StoreRoleLockedError"))).toHaveLength(1);
    for (const h of both) h.child.kill("SIGKILL");
    await Promise.all(both.map((h) => h.exited));
  });

  it("names a damaged lock file and says it is safe to delete, instead of a bare SQLite error", () => {
    const db = join(dir, "damaged.db");
    writeFileSync(`${db}.orchestrator.lock`, Buffer.alloc(4096, 0x5a));
    let error: unknown;
    try {
      acquireRoleLock(db, "orchestrator", "x:1").release();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RoleLockFileError);
    expect((error as Error).message).toContain(`cannot take the role lock ${db}.orchestrator.lock`);
    expect((error as Error).message).toContain("safe to delete it");
    rmSync(`${db}.orchestrator.lock`);
    acquireRoleLock(db, "orchestrator", "x:1").release();
  });

  it("lets the elector take a leader key its gone holder left at once, not after the lease", async () => {
    const path = join(dir, "election.db");
    const key = "/platform/orchestrator/leader";
    const crashed = new SqliteStore({ path });
    const old = new LeaderElector({ store: crashed, key, identity: "old:1" });
    let oldLeads = false;
    old.start({ onStartedLeading: () => (oldLeads = true), onStoppedLeading: () => {} });
    await pollUntil("the old elector to lead", async () => oldLeads, 10_000, 10);
    // Its process dies: the store closes without a revoke; the 15 s lease stays behind.
    const stopping = old.stop();
    await crashed.close();
    await stopping.catch(() => {});
    const store = new SqliteStore({ path });
    expect((await store.get(key))?.value).toBe("old:1");
    const started = Date.now();
    const next = new LeaderElector({ store, key, identity: "new:2", goneHolders: new Set(["old:1"]) });
    let leadsAt = 0;
    next.start({ onStartedLeading: () => (leadsAt = Date.now()), onStoppedLeading: () => {} });
    await pollUntil("the new elector to lead", async () => leadsAt > 0, 10_000, 10);
    expect(leadsAt - started).toBeLessThan(2_000);
    const kv = await store.get(key);
    expect(kv?.value).toBe("new:2");
    await next.stop();
    await store.close();
  });

  it("one compactor for two processes on one store", async () => {
    const path = join(dir, "compactor.db");
    const compacts = [0, 0];
    const stores = [new SqliteStore({ path }), new SqliteStore({ path, pollIntervalMs: 20 })];
    const abort = new AbortController();
    const runs = stores.map((store, i) => {
      const counted = {
        revision: () => store.revision(),
        compact: async (revision: number) => {
          compacts[i]!++;
          return store.compact(revision);
        },
        grantLease: (ttl: number) => store.grantLease(ttl),
        txn: store.txn.bind(store),
        get: store.get.bind(store),
        list: store.list.bind(store),
        watch: store.watch.bind(store),
      };
      return new ElectedCompactor({ store: counted, identity: `p${i}`, intervalMs: 20, retentionMs: 40 }).start(abort.signal);
    });
    // Writes keep coming, so every round has a newer revision to compact to.
    const writer = setInterval(() => void stores[1]!.put("/platform/x", String(Date.now())).catch(() => {}), 10);
    await pollUntil("some compactions", async () => compacts[0]! + compacts[1]! >= 5, 10_000, 20);
    clearInterval(writer);
    abort.abort();
    await Promise.all(runs);
    expect(compacts.filter((n) => n > 0)).toHaveLength(1);
    for (const s of stores) await s.close();
  });
});
