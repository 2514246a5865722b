// The portable backup format on both stores: a snapshot at one revision without leased keys, a
// refused damaged file, a restore packed within etcd's limits, and an etcd backup restored into SQLite.
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { applyRestore, BackupFormatError, RestoreConflictError, etcdApplyLimits, oneTransaction, readBackup, writeBackup } from "../../../adapters/store/backup.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Op } from "../../../adapters/store/store.ts";
import { planRestore } from "../../../cli/restore-plan.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-backup-"));
const etcd = new EtcdStore({ endpoints: loadServices().etcdEndpoints });
const prefix = `/${uniqueName("backup-test")}/`;

afterAll(async () => {
  await etcd.deletePrefix(prefix);
  await etcd.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("backup files", () => {
  it("hold every key under the prefix at one revision, without leased keys, in a private file", async () => {
    await etcd.put(`${prefix}a`, "1");
    await etcd.put(`${prefix}b`, "2");
    const lease = await etcd.grantLease(10);
    await etcd.put(`${prefix}leader`, "me", { lease: lease.id });
    const file = join(dir, "etcd.backup");
    const { header, keys } = await writeBackup(etcd, prefix, file);
    await etcd.put(`${prefix}c`, "after the backup");
    await lease.revoke();
    expect(keys).toBe(2);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const backup = readBackup(file);
    expect(backup.header).toMatchObject({ format: "capstan-backup", version: 1, prefix, revision: header.revision });
    expect([...backup.entries]).toEqual([
      [`${prefix}a`, "1"],
      [`${prefix}b`, "2"],
    ]);
  });

  it("refuses a file cut short or changed", () => {
    const file = join(dir, "etcd.backup");
    const lines = readFileSync(file, "utf8").split("\n");
    writeFileSync(join(dir, "cut"), lines.slice(0, -2).join("\n") + "\n");
    expect(() => readBackup(join(dir, "cut"))).toThrow(/cut short/);
    writeFileSync(join(dir, "changed"), lines.join("\n").replace('"value":"1"', '"value":"9"'));
    expect(() => readBackup(join(dir, "changed"))).toThrow(/checksum does not match/);
    expect(() => readBackup(join(dir, "missing"))).toThrow(BackupFormatError);
  });

  it("an etcd backup restores into SQLite, and a restore back is packed within etcd's transaction limits", async () => {
    const many: Op[] = Array.from({ length: 300 }, (_, i) => ({ type: "put", key: `${prefix}many/${String(i).padStart(3, "0")}`, value: `v${i}` }));
    for (let i = 0; i < many.length; i += 100) await etcd.txn([], many.slice(i, i + 100));
    const file = join(dir, "many.backup");
    await writeBackup(etcd, prefix, file);
    const backup = readBackup(file);
    const sqlite = new SqliteStore({ path: join(dir, "restored", "state.db") });
    const fresh = planRestore([], backup.entries, new Date().toISOString());
    const into = await applyRestore(sqlite, fresh.units, oneTransaction, fresh.expected);
    expect(into.transactions).toBe(1);
    expect((await sqlite.list(prefix)).items.map((kv) => [kv.key, kv.value])).toEqual([...backup.entries]);

    // Back into etcd, after changes there: within 64 ops a transaction, and the same keys again.
    await etcd.deletePrefix(`${prefix}many/`);
    await etcd.put(`${prefix}extra`, "x");
    await writeBackup(sqlite, prefix, join(dir, "sqlite.backup"));
    await sqlite.close();
    const back = readBackup(join(dir, "sqlite.backup"));
    const plan = planRestore((await etcd.list(prefix)).items, back.entries, new Date().toISOString());
    const out = await applyRestore(etcd, plan.units, etcdApplyLimits, plan.expected);
    expect(out.transactions).toBe(Math.ceil((plan.puts + plan.deletes) / etcdApplyLimits.maxOps));
    expect((await etcd.list(prefix)).items.map((kv) => [kv.key, kv.value])).toEqual([...back.entries]);

    // A key changed between the plan and the write: that transaction writes nothing.
    await etcd.put(`${prefix}extra`, "y");
    const stale = planRestore((await etcd.list(prefix)).items, back.entries, new Date().toISOString());
    await etcd.put(`${prefix}extra`, "z");
    await expect(applyRestore(etcd, stale.units, oneTransaction, stale.expected)).rejects.toThrow(RestoreConflictError);
    expect((await etcd.get(`${prefix}extra`))?.value).toBe("z");
  });
});
