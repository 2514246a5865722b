// bench:backup: `capstan backup` and `capstan restore` of a platform with 5,000 PodGroups on each
// store (docs/backup.md).
//
// Each store (a private etcd, a fresh SQLite file) is seeded with BENCH_BACKUP_GROUPS groups
// (default 5000): each a spec, a status and one pod-history record, as the API and the controller
// write them (sizes alike), 3 keys a group. Then, timed as the operator runs them (the whole
// command, process start included; and the command's own figure, from its output):
//   backup            capstan backup -store URL -o FILE
//   restore (empty)   capstan restore -store URL2 FILE into an empty store of the same kind (a lost store)
//   restore (same)    capstan restore into the store it came from, unchanged (the diff finds nothing to write)
//   cross             the etcd backup restored into SQLite (one portable format)
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore } from "../adapters/store/open.ts";
import type { Op, Store } from "../adapters/store/store.ts";
import { keys } from "../api/resources/keys.ts";
import { runCapstan } from "../test/helpers/capstan-process.ts";
import { startEtcd } from "../test/helpers/etcd-process.ts";
import { report } from "./lib/report.ts";

const groups = Number(process.env.BENCH_BACKUP_GROUPS ?? 5000);
if (!Number.isInteger(groups) || groups < 1) throw new Error(`BENCH_BACKUP_GROUPS must be a positive integer (got ${process.env.BENCH_BACKUP_GROUPS})`);
const dir = mkdtempSync(join(tmpdir(), "capstan-bench-backup-"));

function records(i: number): [string, string][] {
  const name = `bench${i % 50}.web${i}`;
  const now = new Date().toISOString();
  const pod = {
    namespace: `bench${i % 50}`,
    network: "bridge",
    version: 1,
    containers: [{ name: "web", image: "registry.example:5000/bench/web:1.4.2", command: ["/bin/sh", "-c", "exec ./serve --port 8080"], env: ["PORT=8080", `INSTANCE_GROUP=${name}`], memoryLimit: 64 << 20, cpuLimit: 0.25, ports: [{ containerPort: 8080 }] }],
  };
  const spec = { name, namespace: pod.namespace, numInstances: 2, restartPolicy: "always", pod, createdAt: now, updatedAt: now };
  const status = {
    state: "running",
    observedVersion: 1,
    lastError: "",
    updatedAt: now,
    pods: [1, 2].map((n) => ({ instanceNo: n, node: `n${n}`, containers: [{ id: `${i}`.padStart(12, "0").repeat(5) + "abcd", name: `${name}.v1-i${n}-d0`, state: "running", startedAt: now }], version: 1, driftCount: 0 })),
    internal: { restarts: {} },
  };
  return [
    [keys.podGroup(name), JSON.stringify(spec)],
    [keys.podGroupStatusOf(name), JSON.stringify(status)],
    [`${keys.podGroupHistory}${name}/1`, JSON.stringify({ version: 1, pod, storedAt: now })],
  ];
}

async function seed(store: Store): Promise<void> {
  let ops: Op[] = [];
  for (let i = 0; i < groups; i++) {
    for (const [key, value] of records(i)) ops.push({ type: "put", key, value });
    if (ops.length >= 60) {
      await store.txn([], ops);
      ops = [];
    }
  }
  if (ops.length > 0) await store.txn([], ops);
}

/** Run a capstan command; wall time (ms) and the "(N ms)" it printed. */
async function timed(args: string[]): Promise<{ wallMs: number; ownMs: number; out: string }> {
  const started = Date.now();
  const r = await runCapstan(args, {}, 600_000);
  const wallMs = Date.now() - started;
  if (r.code !== 0) throw new Error(`capstan ${args.join(" ")} failed (${r.code}): ${r.stderr}`);
  const out = r.stdout + r.stderr;
  const own = /\((?:\d+ bytes, )?(\d+) ms\)\s*$/.exec(out.trim());
  return { wallMs, ownMs: own ? Number(own[1]) : NaN, out: out.trim() };
}

const figures: Record<string, number> = { groups, keys: 3 * groups };
const notes: string[] = [];
const etcdA = await startEtcd();
const etcdB = await startEtcd();
try {
  const stores = {
    etcd: { url: `etcd://${etcdA.endpoint}`, empty: `etcd://${etcdB.endpoint}` },
    sqlite: { url: `sqlite://${dir}/a/state.db`, empty: `sqlite://${dir}/b/state.db` },
  };
  for (const [kind, { url, empty }] of Object.entries(stores)) {
    const store = openStore(url);
    const seedStart = Date.now();
    await seed(store);
    await store.close();
    console.log(`${kind}: seeded ${3 * groups} keys in ${Date.now() - seedStart} ms`);
    const file = join(dir, `${kind}.backup`);
    const backup = await timed(["backup", "-store", url, "-o", file]);
    const restoreEmpty = await timed(["restore", "-store", empty, file]);
    const restoreSame = await timed(["restore", "-store", url, file]);
    figures[`${kind}_backup_ms`] = backup.wallMs;
    figures[`${kind}_backup_own_ms`] = backup.ownMs;
    figures[`${kind}_backup_bytes`] = statSync(file).size;
    figures[`${kind}_restore_into_empty_ms`] = restoreEmpty.wallMs;
    figures[`${kind}_restore_into_empty_own_ms`] = restoreEmpty.ownMs;
    figures[`${kind}_restore_unchanged_ms`] = restoreSame.wallMs;
    notes.push(`${kind} backup: ${backup.out}`, `${kind} restore into an empty store: ${restoreEmpty.out}`, `${kind} restore unchanged: ${restoreSame.out}`);
  }
  const cross = await timed(["restore", "-store", `sqlite://${dir}/c/state.db`, join(dir, "etcd.backup")]);
  figures.etcd_backup_into_sqlite_ms = cross.wallMs;
  notes.push(`etcd backup restored into SQLite: ${cross.out}`);
} finally {
  await etcdA.stop();
  await etcdB.stop();
  rmSync(dir, { recursive: true, force: true });
}

const { met } = report({
  bench: "backup",
  figures,
  ratios: {},
  targets: [
    { name: "etcd_backup_ms", kind: "max", value: 30_000 },
    { name: "etcd_restore_into_empty_ms", kind: "max", value: 60_000 },
    { name: "sqlite_backup_ms", kind: "max", value: 30_000 },
    { name: "sqlite_restore_into_empty_ms", kind: "max", value: 60_000 },
  ],
  notes: [
    `${groups} PodGroups (spec, status, one history record each) on a private etcd and on a SQLite file; times are whole commands (process start included), *_own_ms what the command reports for its own work`,
    ...notes,
  ],
});
process.exitCode = met ? 0 : 1;
