// Registry garbage collection against distribution (docs/benchmarks.md; the collector is
// docs/registry-gc.md), in one run, everything on 127.0.0.1 under one temporary directory:
//
// (a) Full mark, dry run, on one tree of 27,000 blobs / 5,000 manifests / 1,000 repositories
//     written straight to disk in distribution's layout (bench/registry-gc/generate.ts; docs/
//     registry.md, "Layout"; seeded, so every run has the same tree): Debian's
//     `docker-registry garbage-collect --dry-run CONFIG` (distribution 2.8.2, a process) against
//     Capstan's collect({mode: "full", dryRun: true, graceMs: 0}) on a FilesystemDriver and an
//     embedded SQLite store, in this process. Rounds alternate which goes first, after one untimed
//     `--dry-run --delete-untagged` of each (it warms the page cache and checks the untagged
//     garbage); medians. Both must name the blobs the generator made garbage: the counts are
//     compared (distribution's "blob eligible for deletion" lines, Capstan's blobsDeleted).
//     Informational: `capstan registry garbage-collect --dry-run` (the command, a process).
// (b) Incremental: a real full run first (it deletes the tree's garbage and stores the marks),
//     then `capstan registry` on that root and store; 10 tagged manifests deleted through its API
//     (DELETE /v2/<name>/manifests/<digest>, which records the repositories as changed), then an
//     incremental real run in this process with the collector state of the full run (as the
//     leading registry keeps it); three rounds of 10, median; each round must delete exactly the
//     blobs only those manifests held.
// (c) Pushes while collecting: 4 writers push small images over HTTP (bench/registry-gc/push-
//     load.ts: config + a layer from a shared pool, skipped after HEAD 200, + a fresh layer) for
//     15 s without GC, then 15 s while GC runs back to back: distribution `serve` with
//     `garbage-collect CONFIG` looping on its root; `capstan registry` with runs asked for one
//     after the other through its run API, grace 0, carried out by the registry itself (the
//     first is full, the next incremental; BENCH_REGISTRY_GC_TRIGGER=cli asks through the
//     command, a process per run). Each registry on a fresh copy of the tree (same seed). After
//     the window and the last run, every image whose push succeeded is pulled by tag, manifest
//     and blobs checked against their sha256: images lost. Push rates while full and while
//     incremental runs were in progress are reported too. The writers' repositories are
//     `aaa/push-w<k>`, first in distribution's walk, as in the reproduction of its GC race.
//
// Targets: (a) Capstan <= distribution; (b) incremental <= 0.05 x (a)'s Capstan full dry run;
// (c) Capstan loses no image and pushes >= 0.8 x its rate without GC. distribution's losses are
// reported without a target. Writes bench/results/registry-gc.json.
//
//   npm run bench:registry-gc   [BENCH_REGISTRY_GC_REPOSITORIES=1000 BENCH_REGISTRY_GC_ROUNDS=3
//                                BENCH_REGISTRY_GC_WINDOW_S=15 BENCH_REGISTRY_GC_WRITERS=4
//                                BENCH_REGISTRY_GC_SEED=1 BENCH_REGISTRY_GC_LEGS=a,b,c
//                                BENCH_REGISTRY_GC_CAPSTAN_FULL=1 (the loop in (c) asks for full runs)
//                                BENCH_REGISTRY_GC_TRIGGER=cli (runs in (c) through the command)
//                                BENCH_REGISTRY_GC_CAPSTAN=0 (distribution's legs only)]
//   Without controllers/registrygc/collector.ts the Capstan legs are reported "not measured".
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { FilesystemDriver } from "../adapters/blobstore/filesystem.ts";
import type { StorageDriver } from "../adapters/blobstore/driver.ts";
import { SqliteStore } from "../adapters/store/sqlite.ts";
import type { Store } from "../adapters/store/store.ts";
import type { Logger } from "../runtime/log.ts";
import { capstanCommand, capstanEnv, CapstanProcess } from "./lib/capstan-process.ts";
import { report, type Target } from "./lib/report.ts";
import { codeState, describeCodeState } from "./lib/code-state.ts";
import { registryCodePaths } from "./registry/servers.ts";
import { children as distributionChildren, distributionBin, distributionConfig, garbageCollect, startDistribution, type DistributionServer, type GarbageCollectResult } from "./registry-gc/distribution.ts";
import { garbageAfterDeleting, generateTree, type GeneratedManifest, type TreeSummary } from "./registry-gc/generate.ts";
import { pushWindow, RegistryClient, sharedLayers, verifyImages, type PushedImage, type VerifyResult, type WindowResult } from "./registry-gc/push-load.ts";
import { cleanUpOnSignals, runBench } from "./lib/signals.ts";

const env = process.env;
const seed = Number(env.BENCH_REGISTRY_GC_SEED ?? 1);
const repositories = Number(env.BENCH_REGISTRY_GC_REPOSITORIES ?? 1000);
const manifestsPerRepository = 5;
const rounds = Number(env.BENCH_REGISTRY_GC_ROUNDS ?? 3);
const windowMs = Number(env.BENCH_REGISTRY_GC_WINDOW_S ?? 15) * 1000;
const writers = Number(env.BENCH_REGISTRY_GC_WRITERS ?? 4);
const legs = new Set((env.BENCH_REGISTRY_GC_LEGS ?? "a,b,c").split(",").map((s) => s.trim()));
const capstanLoopFull = env.BENCH_REGISTRY_GC_CAPSTAN_FULL === "1";
const capstanTrigger: "api" | "cli" = env.BENCH_REGISTRY_GC_TRIGGER === "cli" ? "cli" : "api";
const deletesPerRound = 10;
const incrementalRounds = 3;
const warmUpMs = 2_000;
const MB = 1024 * 1024;

// ---- the collector, loaded when it is there ------------------------------------------------------

/** What this bench uses of controllers/registrygc/collector.ts (docs/registry-gc.md). */
interface GcReportLike {
  mode: string;
  dryRun: boolean;
  durationMs: number;
  repositories: number;
  manifests: number;
  blobsMarked: number;
  blobsDeleted: number;
  bytesDeleted: number;
  /** A count, or the list of the manifests. */
  manifestsDeleted: number | unknown[];
  candidates: number;
  pending?: number;
  rescued?: number;
}

interface CollectorModule {
  collect(o: {
    driver: StorageDriver;
    store: Store;
    mode: "full" | "incremental";
    dryRun: boolean;
    deleteUntagged: boolean;
    graceMs: number;
    log?: Logger;
    /** The marks kept between runs, when the module has a CollectorState. */
    state?: unknown;
  }): Promise<GcReportLike>;
  CollectorState?: new () => unknown;
}

/** The collector module, or why there is none. Imported by URL: the bench typechecks without it. */
async function loadCollector(): Promise<CollectorModule | string> {
  const url = new URL("../controllers/registrygc/collector.ts", import.meta.url);
  if (!existsSync(fileURLToPath(url))) return "collector missing";
  try {
    const mod = (await import(url.href)) as Partial<CollectorModule>;
    return typeof mod.collect === "function" ? (mod as CollectorModule) : "collector has no collect()";
  } catch (err) {
    return `collector does not load: ${(err as Error).message.split("\n")[0]}`;
  }
}

function manifestsDeletedOf(r: GcReportLike): number {
  return Array.isArray(r.manifestsDeleted) ? r.manifestsDeleted.length : r.manifestsDeleted;
}

// ---- processes and clean-up ------------------------------------------------------------------------

const capstanProcesses = new Set<CapstanProcess>();
const distributionServers = new Set<DistributionServer>();
const gcCommands = new Set<ChildProcess>();
const stores = new Set<Store>();
let workDir: string | undefined;

async function cleanUp(): Promise<void> {
  for (const c of [...gcCommands]) c.kill("SIGKILL");
  for (const c of [...distributionChildren]) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const p of [...capstanProcesses]) {
    capstanProcesses.delete(p);
    await p.stop().catch((e: unknown) => console.error(`stopping capstan registry: ${String(e)}`));
  }
  for (const d of [...distributionServers]) {
    distributionServers.delete(d);
    await d.stop().catch((e: unknown) => console.error(`stopping docker-registry: ${String(e)}`));
  }
  for (const s of [...stores]) {
    stores.delete(s);
    await s.close().catch(() => {});
  }
  if (workDir) {
    const t = performance.now();
    await rm(workDir, { recursive: true, force: true });
    console.log(`removed ${workDir} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  workDir = undefined;
}

const signals = cleanUpOnSignals("the registries", cleanUp);

function capstanConfig(root: string): string {
  // -web 127.0.0.1:<free port> (CapstanProcess) wins over http.addr.
  return ["version: 0.1", "log:", "  level: warn", "storage:", "  filesystem:", `    rootdirectory: ${root}`, "  delete:", "    enabled: true", "http:", "  addr: 127.0.0.1:5000", ""].join("\n");
}

/** `capstan registry -config FILE -store sqlite://...` on `root`, ready when GET /v2/ answers 200. */
async function startCapstanRegistry(root: string, storePath: string, name: string, extraArgs: string[] = []): Promise<CapstanProcess> {
  const config = join(workDir!, `${name}.yaml`);
  await writeFile(config, capstanConfig(root));
  const proc = await CapstanProcess.start("registry", ["-config", config, "-store", `sqlite://${storePath}`, ...extraArgs], { env: capstanEnv(), readyPath: "/v2/" });
  capstanProcesses.add(proc);
  return proc;
}

async function stopCapstan(p: CapstanProcess): Promise<void> {
  capstanProcesses.delete(p);
  await p.stop();
}

/** Where a Capstan GC run in (c) is asked for: its run API, or the command. */
interface CapstanTarget {
  /** http://127.0.0.1:<port> of the registry (its -web address, where the run API is). */
  base: string;
  /** sqlite://... of its store (what `capstan registry gc -store` needs). */
  storeUrl: string;
}

/**
 * One GC run of a running `capstan registry`, asked for and waited on (docs/registry-gc.md,
 * "Collecting", "The run API"): the one place that knows how a run is triggered. "api" (default):
 * POST /api/registry/gc/runs, then GET its checkUrl every 100 ms until done (the registry runs with
 * -auth none, loopback only); "cli": `capstan registry gc -store URL -grace 0s -json`, a Node
 * process per run (about a second of CPU to start on this machine kind, taken from the registry
 * and the writers). Throws with `unavailable` set when the trigger does not exist.
 */
async function capstanGcRun(t: CapstanTarget, full: boolean): Promise<{ seconds: number; report: GcReportLike }> {
  if (capstanTrigger === "cli") {
    const r = await capstanCommand(["registry", "gc", "-store", t.storeUrl, "-grace", "0s", "-json", ...(full ? ["-full"] : [])], 300_000, gcCommands);
    if (r.code === 2) throw Object.assign(new Error(`capstan registry gc: usage error: ${r.stderr.trim().split("\n").pop()}`), { unavailable: true });
    let record: RunRecordLike | undefined;
    try {
      record = JSON.parse(r.stdout) as RunRecordLike;
    } catch {
      record = undefined;
    }
    if (r.code !== 0 || record?.state !== "done" || record.report === undefined) {
      throw new Error(`capstan registry gc exited ${r.code} (state ${record?.state ?? "?"}${record?.error ? `: ${record.error}` : ""}): ${r.stderr.trim().split("\n").slice(-3).join(" | ")}`);
    }
    return { seconds: r.seconds, report: record.report };
  }
  const t0 = performance.now();
  const post = await fetch(`${t.base}/api/registry/gc/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ mode: full ? "full" : "incremental", graceSeconds: 0 }),
    signal: AbortSignal.timeout(10_000),
  });
  const posted = (await post.json().catch(() => ({}))) as { checkUrl?: string; message?: string };
  if (post.status === 404) throw Object.assign(new Error("POST /api/registry/gc/runs: 404 (no run API)"), { unavailable: true });
  if (post.status !== 202 || typeof posted.checkUrl !== "string") throw new Error(`POST /api/registry/gc/runs: ${post.status} ${JSON.stringify(posted)}`);
  const deadline = t0 + 300_000;
  for (;;) {
    const got = await fetch(`${t.base}${posted.checkUrl}`, { signal: AbortSignal.timeout(10_000) });
    const record = (await got.json().catch(() => undefined)) as RunRecordLike | undefined;
    if (got.status !== 200 || record === undefined) throw new Error(`GET ${posted.checkUrl}: ${got.status}`);
    if (record.state === "failed") throw new Error(`run ${posted.checkUrl} failed: ${record.error ?? "?"}`);
    if (record.state === "done" && record.report !== undefined) return { seconds: (performance.now() - t0) / 1000, report: record.report };
    if (performance.now() > deadline) throw new Error(`run ${posted.checkUrl} not done in 300 s (state ${record.state})`);
    await sleep(100);
  }
}

interface RunRecordLike {
  state?: string;
  report?: GcReportLike;
  error?: string;
}

// ---- helpers -------------------------------------------------------------------------------------

function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Stalled I/O time so far, µs (/proc/pressure/io "some total"), or undefined without PSI. */
async function ioStallMicros(): Promise<number | undefined> {
  const text = await readFile("/proc/pressure/io", "utf8").catch(() => undefined);
  const m = text === undefined ? null : /^some .*total=(\d+)/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

/**
 * `sync`, then wait until the disk is quiet: less than 5 ms of stalled I/O in each of two
 * consecutive 500 ms intervals (PSI), 60 s at most. Writing a tree leaves hundreds of MB for
 * write-back, which would otherwise land in whatever is timed next. Answers the seconds waited.
 */
async function settleDisk(label: string): Promise<number> {
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    const child = spawn("sync", [], { stdio: "ignore" });
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.once("error", () => resolve());
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  let quiet = 0;
  let last = await ioStallMicros();
  while (last !== undefined && quiet < 2 && performance.now() - t0 < 60_000) {
    await sleep(500);
    const now = await ioStallMicros();
    quiet = now !== undefined && now - last < 5_000 ? quiet + 1 : 0;
    last = now;
  }
  const s = (performance.now() - t0) / 1000;
  console.log(`disk settled after ${label} in ${s.toFixed(1)} s${quiet < 2 && last !== undefined ? " (still busy after 60 s: going on)" : ""}`);
  return s;
}

function describeTree(s: TreeSummary): string {
  return (
    `${s.blobs} blobs (${(s.bytes / MB).toFixed(1)} MiB), ${s.manifests} manifests (${s.untaggedManifests} untagged) + ${s.deletedManifests} deleted, ` +
    `${s.repositories} repositories, ${s.tags} tags, ${s.files} files; garbage ${s.garbage.blobs.length} blobs (${s.orphanBlobs} orphans), ` +
    `${s.garbageUntagged.blobs.length} with untagged manifests; written in ${(s.writeMs / 1000).toFixed(1)} s`
  );
}

function setDifference(a: Iterable<string>, b: Iterable<string>): number {
  const bs = new Set(b);
  let n = 0;
  for (const x of a) if (!bs.has(x)) n++;
  return n;
}

// ---- (a) -----------------------------------------------------------------------------------------

interface LegA {
  distribution: GarbageCollectResult[];
  distributionUntagged?: GarbageCollectResult;
  capstan: { seconds: number; report: GcReportLike }[];
  capstanUntagged?: GcReportLike;
  capstanCli?: { seconds: number; blobs: number };
}

async function capstanDryRun(mod: CollectorModule, root: string, store: Store, deleteUntagged: boolean): Promise<{ seconds: number; report: GcReportLike }> {
  const driver = new FilesystemDriver({ rootDirectory: root });
  try {
    const t0 = performance.now();
    const report = await mod.collect({ driver, store, mode: "full", dryRun: true, deleteUntagged, graceMs: 0 });
    return { seconds: (performance.now() - t0) / 1000, report };
  } finally {
    await driver.close();
  }
}

async function legA(tree: TreeSummary, collector: CollectorModule | string): Promise<LegA> {
  const config = join(workDir!, "a-distribution.yml");
  await writeFile(config, distributionConfig(tree.root, "127.0.0.1:5000"));
  const out: LegA = { distribution: [], capstan: [] };
  const store = typeof collector === "string" ? undefined : new SqliteStore({ path: join(workDir!, "a-store", "state.db") });
  if (store) stores.add(store);

  // Untimed first runs: the page cache warm for both, and the untagged garbage checked.
  out.distributionUntagged = await garbageCollect(config, { dryRun: true, deleteUntagged: true, workDir: workDir! });
  console.log(
    `(a) distribution --dry-run --delete-untagged: ${out.distributionUntagged.seconds.toFixed(2)} s, ${out.distributionUntagged.blobsEligible} blobs and ` +
      `${out.distributionUntagged.manifestsEligible} manifests eligible (generator: ${tree.garbageUntagged.blobs.length} and ${tree.garbageUntagged.manifests})`,
  );
  if (store && typeof collector !== "string") {
    const r = await capstanDryRun(collector, tree.root, store, true);
    out.capstanUntagged = r.report;
    console.log(`(a) capstan dry run, delete untagged: ${r.seconds.toFixed(2)} s, ${r.report.blobsDeleted} blobs and ${manifestsDeletedOf(r.report)} manifests`);
  }

  for (let i = 0; i < rounds; i++) {
    const order = i % 2 === 0 ? (["distribution", "capstan"] as const) : (["capstan", "distribution"] as const);
    for (const kind of order) {
      if (kind === "distribution") {
        const r = await garbageCollect(config, { dryRun: true, workDir: workDir! });
        out.distribution.push(r);
        console.log(
          `(a) round ${i + 1} distribution garbage-collect --dry-run: ${r.seconds.toFixed(3)} s, ${r.blobsMarked} marked, ${r.blobsEligible} blobs eligible` +
            `${Number.isNaN(r.maxRssBytes) ? "" : `, max RSS ${(r.maxRssBytes / MB).toFixed(0)} MiB`}`,
        );
      } else if (store && typeof collector !== "string") {
        const r = await capstanDryRun(collector, tree.root, store, false);
        out.capstan.push(r);
        console.log(
          `(a) round ${i + 1} capstan collect full dry run: ${r.seconds.toFixed(3)} s, ${r.report.repositories} repositories, ${r.report.manifests} manifests, ` +
            `${r.report.blobsMarked} kept, ${r.report.candidates} candidates, ${r.report.blobsDeleted} blobs would go`,
        );
      }
    }
  }

  // The command as an operator runs it (a process: Node and module loading included), once.
  if (typeof collector !== "string") {
    const cfg = join(workDir!, "a-capstan.yaml");
    await writeFile(cfg, capstanConfig(tree.root));
    const r = await capstanCommand(["registry", "garbage-collect", "--dry-run", "-grace", "0s", "-json", cfg], 300_000, gcCommands);
    const rec = (() => {
      try {
        return JSON.parse(r.stdout) as { report?: GcReportLike };
      } catch {
        return undefined;
      }
    })();
    if (r.code === 0 && rec?.report) {
      out.capstanCli = { seconds: r.seconds, blobs: rec.report.blobsDeleted };
      console.log(`(a) capstan registry garbage-collect --dry-run (the command): ${r.seconds.toFixed(2)} s, ${rec.report.blobsDeleted} blobs would go`);
    } else console.log(`(a) capstan registry garbage-collect --dry-run failed (${r.code}): ${r.stderr.trim().split("\n").slice(-3).join(" | ")}`);
    // It made ROOT/capstan (its lock and store); nothing else in the tree.
    await rm(join(tree.root, "capstan"), { recursive: true, force: true });
  }
  return out;
}

// ---- (b) -----------------------------------------------------------------------------------------

interface LegB {
  full: { seconds: number; report: GcReportLike; expected: number };
  incremental: { seconds: number; report: GcReportLike; expected: number; deleteSeconds: number }[];
}

/** Round `k`'s manifests: one tagged manifest in each of 10 repositories spread over the tree, no repository twice in a run. */
function manifestsToDelete(tree: TreeSummary, k: number): GeneratedManifest[] {
  const byRepository = new Map<string, GeneratedManifest[]>();
  for (const m of tree.manifestList) {
    if (m.state !== "tagged") continue;
    const list = byRepository.get(m.repository);
    if (list) list.push(m);
    else byRepository.set(m.repository, [m]);
  }
  const names = [...byRepository.keys()];
  const out: GeneratedManifest[] = [];
  for (let i = 0; i < deletesPerRound; i++) {
    const r = names[((k * deletesPerRound + i) * 97) % names.length]!;
    out.push(byRepository.get(r)![0]!);
  }
  return out;
}

async function legB(tree: TreeSummary, mod: CollectorModule): Promise<LegB> {
  const storePath = join(workDir!, "b-store", "state.db");
  const store = new SqliteStore({ path: storePath });
  stores.add(store);
  const state = mod.CollectorState ? new mod.CollectorState() : undefined;
  const driver = new FilesystemDriver({ rootDirectory: tree.root });
  try {
    // A real full run: the tree's garbage goes, the marks are stored (and kept in `state`).
    let t0 = performance.now();
    const fullReport = await mod.collect({ driver, store, mode: "full", dryRun: false, deleteUntagged: false, graceMs: 0, ...(state !== undefined && { state }) });
    const full = { seconds: (performance.now() - t0) / 1000, report: fullReport, expected: tree.garbage.blobs.length };
    console.log(`(b) capstan full run (real): ${full.seconds.toFixed(3)} s, deleted ${fullReport.blobsDeleted} blobs (expected ${full.expected}), ${fullReport.pending ?? 0} pending`);

    const registry = await startCapstanRegistry(tree.root, storePath, "b-capstan");
    const client = new RegistryClient(registry.baseUrl, 4);
    const incremental: LegB["incremental"] = [];
    const deleted: GeneratedManifest[] = [];
    try {
      for (let k = 0; k < incrementalRounds; k++) {
        const batch = manifestsToDelete(tree, k);
        const before = new Set(garbageAfterDeleting(tree, deleted));
        deleted.push(...batch);
        const expected = garbageAfterDeleting(tree, deleted).filter((d) => !before.has(d)).length;
        t0 = performance.now();
        for (const m of batch) {
          const r = await client.call("DELETE", `/v2/${m.repository}/manifests/${m.digest}`);
          if (r.status !== 202) throw new Error(`DELETE ${m.repository}@${m.digest}: ${r.status} ${r.body.toString("utf8").slice(0, 200)}`);
        }
        const deleteSeconds = (performance.now() - t0) / 1000;
        t0 = performance.now();
        const rep = await mod.collect({ driver, store, mode: "incremental", dryRun: false, deleteUntagged: false, graceMs: 0, ...(state !== undefined && { state }) });
        const seconds = (performance.now() - t0) / 1000;
        incremental.push({ seconds, report: rep, expected, deleteSeconds });
        console.log(
          `(b) round ${k + 1}: ${batch.length} manifests deleted through the API in ${(deleteSeconds * 1000).toFixed(0)} ms; incremental run (${rep.mode}) ${(seconds * 1000).toFixed(1)} ms, ` +
            `${rep.repositories} repositories known, ${rep.candidates} candidates, deleted ${rep.blobsDeleted} blobs (expected ${expected})`,
        );
      }
    } catch (err) {
      if (!signals.interrupted) console.error(`capstan registry log tail:\n${await registry.logTail()}`);
      throw err;
    } finally {
      await client.close();
      await stopCapstan(registry);
    }
    return { full, incremental };
  } finally {
    await driver.close();
  }
}

// ---- (c) -----------------------------------------------------------------------------------------

interface GcRunSummary {
  /** Asked for to done, as the caller saw it. */
  seconds: number;
  /** The run itself (Capstan's report.durationMs; distribution: the process). */
  runSeconds: number;
  blobsDeleted: number;
  mode: string;
  /** performance.now() when it was asked for and when it was seen done. */
  start: number;
  end: number;
}

/** GC runs back to back until stopped; stop() waits for the run in progress (it has its own timeout). */
class GcLoop {
  readonly runs: GcRunSummary[] = [];
  readonly errors: string[] = [];
  private stopping = false;
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly once: () => Promise<Omit<GcRunSummary, "start" | "end">>) {}

  start(): void {
    this.done = (async () => {
      let failuresInARow = 0;
      while (!this.stopping) {
        try {
          const start = performance.now();
          const r = await this.once();
          this.runs.push({ ...r, start, end: performance.now() });
          failuresInARow = 0;
        } catch (err) {
          this.errors.push((err as Error).message);
          if ((err as { unavailable?: boolean }).unavailable || ++failuresInARow >= 3) return;
          await sleep(200);
        }
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.done;
  }
}

interface LegC {
  kind: "capstan" | "distribution";
  warmUp: WindowResult;
  noGc: WindowResult;
  gc?: WindowResult;
  gcRuns: GcRunSummary[];
  gcErrors: string[];
  verify: VerifyResult;
  /** Pushes/s while runs of each mode were in progress ("full", "incremental"). */
  ratesDuring: Record<string, number>;
  /** Why the GC window did not run. */
  notMeasured?: string;
}

/** "full: 7.1 s; incremental x14: median 0.50 s (the run itself 0.48 s)", runs in order of mode. */
function describeRuns(runs: GcRunSummary[]): string {
  const modes = [...new Set(runs.map((r) => r.mode))];
  return modes
    .map((m) => {
      const rs = runs.filter((r) => r.mode === m);
      const s = median(rs.map((r) => r.seconds));
      const own = median(rs.map((r) => r.runSeconds));
      return `${m}${rs.length > 1 ? ` x${rs.length}: median` : ":"} ${s.toFixed(2)} s${Math.abs(own - s) > 0.005 ? ` (the run itself ${own.toFixed(2)} s)` : ""}`;
    })
    .join("; ");
}

type GcOnce = () => Promise<Omit<GcRunSummary, "start" | "end">>;

/**
 * Pushes per second of `images` completed while runs of `mode` were in progress, over the time
 * those runs spent within the window [from, to]; NaN when none ran.
 */
function rateDuring(images: PushedImage[], runs: GcRunSummary[], mode: string, from: number, to: number): number {
  const spans = runs.filter((r) => r.mode === mode).map((r) => [Math.max(r.start, from), Math.min(r.end, to)] as const).filter(([a, b]) => b > a);
  const seconds = spans.reduce((s, [a, b]) => s + (b - a), 0) / 1000;
  if (seconds === 0) return NaN;
  return images.filter((i) => spans.some(([a, b]) => i.at >= a && i.at < b)).length / seconds;
}

async function pushLeg(kind: "capstan" | "distribution", base: string, gcOnce: GcOnce | string): Promise<Omit<LegC, "kind">> {
  const client = new RegistryClient(base, writers * 3);
  const shared = sharedLayers(8);
  const repositoryOf = (w: number) => `aaa/push-w${w}`;
  try {
    const warmUp = await pushWindow(client, { window: "warm-up", writers, durationMs: warmUpMs, repositoryOf, tagPrefix: "warm", shared });
    const noGc = await pushWindow(client, { window: "no-gc", writers, durationMs: windowMs, repositoryOf, tagPrefix: "nogc", shared });
    console.log(`(c) ${kind} without GC: ${noGc.images.length} pushes in ${noGc.seconds.toFixed(1)} s = ${noGc.pushesPerSecond.toFixed(1)}/s, ${noGc.failed} failed, HEAD skips ${noGc.counters.headSkipped}`);
    let gc: WindowResult | undefined;
    let loop: GcLoop | undefined;
    let notMeasured: string | undefined;
    let gcWindowStart = 0;
    const ratesDuring: Record<string, number> = {};
    if (typeof gcOnce === "string") notMeasured = gcOnce;
    else {
      loop = new GcLoop(gcOnce);
      gcWindowStart = performance.now();
      loop.start();
      gc = await pushWindow(client, { window: "gc", writers, durationMs: windowMs, repositoryOf, tagPrefix: "gc", shared });
      const t = performance.now();
      await loop.stop();
      const deleted = loop.runs.reduce((s, r) => s + r.blobsDeleted, 0);
      console.log(
        `(c) ${kind} with GC: ${gc.images.length} pushes in ${gc.seconds.toFixed(1)} s = ${gc.pushesPerSecond.toFixed(1)}/s, ${gc.failed} failed ${JSON.stringify(gc.failures)}, ` +
          `HEAD skips ${gc.counters.headSkipped}; ${loop.runs.length} GC runs (${describeRuns(loop.runs)}), ${deleted} blobs deleted; ` +
          `waited ${((performance.now() - t) / 1000).toFixed(1)} s for the last run${loop.errors.length > 0 ? `; GC errors: ${loop.errors.join(" / ")}` : ""}`,
      );
      if (loop.runs.length === 0 && loop.errors.length > 0) notMeasured = `GC did not run: ${loop.errors[0]}`;
      const windowEnd = gcWindowStart + gc.seconds * 1000;
      for (const mode of ["full", "incremental"]) {
        const rate = rateDuring(gc.images, loop.runs, mode, gcWindowStart, windowEnd);
        if (!Number.isNaN(rate)) ratesDuring[mode] = rate;
      }
      if (Object.keys(ratesDuring).length > 0) console.log(`(c) ${kind} pushes/s while ${Object.entries(ratesDuring).map(([m, r]) => `${m} runs ran: ${r.toFixed(1)}`).join(", ")}`);
    }
    const images: PushedImage[] = [...warmUp.images, ...noGc.images, ...(gc?.images ?? [])];
    const t = performance.now();
    const verify = await verifyImages(client, images);
    console.log(
      `(c) ${kind}: verified ${verify.checked} images in ${((performance.now() - t) / 1000).toFixed(1)} s: ${verify.lost} lost ${JSON.stringify(verify.lostByWindow)} ${JSON.stringify(verify.reasons)}` +
        `${verify.examples.length > 0 ? ` e.g. ${verify.examples.join(", ")}` : ""}`,
    );
    return { warmUp, noGc, ...(gc && { gc }), gcRuns: loop?.runs ?? [], gcErrors: loop?.errors ?? [], ratesDuring, verify, ...(notMeasured !== undefined && { notMeasured }) };
  } finally {
    await client.close();
  }
}

async function legCDistribution(tree: TreeSummary): Promise<LegC> {
  const server = await startDistribution(tree.root, workDir!, "c-distribution");
  distributionServers.add(server);
  try {
    const once: GcOnce = async () => {
      const r = await garbageCollect(server.config, { dryRun: false, workDir: workDir! });
      return { seconds: r.seconds, runSeconds: r.seconds, blobsDeleted: r.blobsEligible, mode: "full" };
    };
    return { kind: "distribution", ...(await pushLeg("distribution", server.base, once)) };
  } catch (err) {
    if (!signals.interrupted) console.error(`docker-registry log tail:\n${await server.logTail()}`);
    throw err;
  } finally {
    distributionServers.delete(server);
    await server.stop();
  }
}

async function legCCapstan(tree: TreeSummary): Promise<LegC> {
  const storePath = join(workDir!, "c-store", "state.db");
  await mkdir(join(workDir!, "c-store"), { recursive: true });
  // -auth none: the run API answers without a console token (loopback only).
  const registry = await startCapstanRegistry(tree.root, storePath, "c-capstan", capstanTrigger === "api" ? ["-auth", "none"] : []);
  try {
    const once: GcOnce = async () => {
      const r = await capstanGcRun({ base: registry.baseUrl, storeUrl: `sqlite://${storePath}` }, capstanLoopFull);
      return { seconds: r.seconds, runSeconds: r.report.durationMs / 1000, blobsDeleted: r.report.blobsDeleted, mode: r.report.mode };
    };
    return { kind: "capstan", ...(await pushLeg("capstan", registry.baseUrl, once)) };
  } catch (err) {
    if (!signals.interrupted) console.error(`capstan registry log tail:\n${await registry.logTail()}`);
    throw err;
  } finally {
    await stopCapstan(registry);
  }
}

// ---- main ----------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (!existsSync(distributionBin)) throw new Error(`${distributionBin} is missing (apt-get install docker-registry)`);
  const load1Start = loadavg()[0]!;
  const codeAtStart = await codeState(registryCodePaths);
  const collector = env.BENCH_REGISTRY_GC_CAPSTAN === "0" ? "Capstan legs off (BENCH_REGISTRY_GC_CAPSTAN=0)" : await loadCollector();
  console.log(`capstan registry code: ${describeCodeState(codeAtStart)}; collector: ${typeof collector === "string" ? collector : "loaded"}`);
  workDir = await mkdtemp(join(tmpdir(), "capstan-bench-registry-gc-"));

  // The trees first, so that no timed leg shares the disk with their write-back.
  const treeOptions = { repositories, manifestsPerRepository, seed };
  const treeA = await generateTree(join(workDir, "tree-a"), treeOptions);
  console.log(`tree: ${describeTree(treeA)}`);
  const treeDistribution = legs.has("c") ? await generateTree(join(workDir, "tree-c-distribution"), treeOptions) : undefined;
  const treeCapstan = legs.has("c") ? await generateTree(join(workDir, "tree-c-capstan"), treeOptions) : undefined;
  if (treeDistribution && treeCapstan) console.log(`(c) trees written in ${(treeDistribution.writeMs / 1000).toFixed(1)} s and ${(treeCapstan.writeMs / 1000).toFixed(1)} s`);
  await settleDisk("writing the trees");

  const figures: Record<string, number> = {
    tree_repositories: treeA.repositories,
    tree_manifests: treeA.manifests,
    tree_untagged_manifests: treeA.untaggedManifests,
    tree_deleted_manifests: treeA.deletedManifests,
    tree_blobs: treeA.blobs,
    tree_tags: treeA.tags,
    tree_files: treeA.files,
    tree_garbage_blobs: treeA.garbage.blobs.length,
    tree_garbage_untagged_blobs: treeA.garbageUntagged.blobs.length,
    tree_write_s: treeA.writeMs / 1000,
    rounds,
  };
  const ratios: Record<string, number> = {};
  const notes: string[] = [];
  const notMeasured = (what: string, why: string) => {
    notes.push(`${what}: not measured (${why})`);
    console.log(`${what}: not measured (${why})`);
  };

  // (a)
  if (legs.has("a")) {
    const a = await legA(treeA, collector);
    const d = a.distribution;
    figures.distribution_dry_run_s = median(d.map((x) => x.seconds));
    figures.distribution_dry_run_s_min = Math.min(...d.map((x) => x.seconds));
    figures.distribution_dry_run_s_max = Math.max(...d.map((x) => x.seconds));
    if (!Number.isNaN(d[0]?.maxRssBytes ?? NaN)) figures.distribution_dry_run_max_rss_mib = Math.max(...d.map((x) => x.maxRssBytes)) / MB;
    figures.distribution_dry_run_blobs = d[0]!.blobsEligible;
    figures.distribution_dry_run_blobs_not_in_tree_garbage = setDifference(d[0]!.blobs, treeA.garbage.blobs) + setDifference(treeA.garbage.blobs, d[0]!.blobs);
    if (a.distributionUntagged) {
      figures.distribution_dry_run_untagged_blobs = a.distributionUntagged.blobsEligible;
      figures.distribution_dry_run_untagged_manifests = a.distributionUntagged.manifestsEligible;
    }
    if (a.capstan.length > 0) {
      const c = a.capstan;
      figures.capstan_full_dry_run_s = median(c.map((x) => x.seconds));
      figures.capstan_full_dry_run_s_min = Math.min(...c.map((x) => x.seconds));
      figures.capstan_full_dry_run_s_max = Math.max(...c.map((x) => x.seconds));
      figures.capstan_dry_run_blobs = c[0]!.report.blobsDeleted;
      figures.capstan_dry_run_candidates = c[0]!.report.candidates;
      figures.capstan_dry_run_pending = c[0]!.report.pending ?? 0;
      figures.dry_run_blob_count_mismatch = Math.abs(c[0]!.report.blobsDeleted - d[0]!.blobsEligible);
      ratios.capstan_full_dry_run_over_distribution = figures.capstan_full_dry_run_s / figures.distribution_dry_run_s;
      if (a.capstanUntagged) {
        figures.capstan_dry_run_untagged_blobs = a.capstanUntagged.blobsDeleted;
        figures.capstan_dry_run_untagged_manifests = manifestsDeletedOf(a.capstanUntagged);
      }
      if (a.capstanCli) {
        figures.capstan_cli_dry_run_s = a.capstanCli.seconds;
        figures.capstan_cli_dry_run_blobs = a.capstanCli.blobs;
      }
    } else notMeasured("(a) capstan full dry run", typeof collector === "string" ? collector : "no run");
  }

  // (b)
  if (legs.has("b")) {
    if (typeof collector === "string") notMeasured("(b) capstan incremental run", collector);
    else {
      const b = await legB(treeA, collector);
      figures.capstan_full_gc_s = b.full.seconds;
      figures.capstan_full_gc_blobs_deleted = b.full.report.blobsDeleted;
      figures.capstan_full_gc_blobs_mismatch = Math.abs(b.full.report.blobsDeleted - b.full.expected);
      figures.capstan_incremental_gc_s = median(b.incremental.map((x) => x.seconds));
      figures.capstan_incremental_gc_s_max = Math.max(...b.incremental.map((x) => x.seconds));
      figures.capstan_incremental_gc_blobs_deleted = b.incremental.reduce((s, x) => s + x.report.blobsDeleted, 0);
      figures.capstan_incremental_gc_blobs_mismatch = b.incremental.reduce((s, x) => s + Math.abs(x.report.blobsDeleted - x.expected), 0);
      figures.capstan_incremental_gc_runs_not_incremental = b.incremental.filter((x) => x.report.mode !== "incremental").length;
      figures.capstan_api_delete_10_manifests_ms = median(b.incremental.map((x) => x.deleteSeconds)) * 1000;
      if (figures.capstan_full_dry_run_s !== undefined) ratios.capstan_incremental_over_full_dry_run = figures.capstan_incremental_gc_s / figures.capstan_full_dry_run_s;
    }
  }

  // (c)
  if (treeDistribution && treeCapstan) {
    await settleDisk("(a) and (b)");
    const results: LegC[] = [await legCDistribution(treeDistribution)];
    await settleDisk("the distribution push leg");
    if (typeof collector === "string") notMeasured("(c) capstan pushes", collector);
    else results.push(await legCCapstan(treeCapstan));
    for (const r of results) {
      const k = r.kind;
      figures[`${k}_pushes_per_s_no_gc`] = r.noGc.pushesPerSecond;
      figures[`${k}_push_failures_no_gc`] = r.noGc.failed;
      figures[`${k}_images_lost_no_gc`] = r.verify.lostByWindow["no-gc"] ?? 0;
      if (r.gc && r.notMeasured === undefined) {
        figures[`${k}_pushes_per_s_gc`] = r.gc.pushesPerSecond;
        figures[`${k}_images_pushed_gc`] = r.gc.images.length;
        figures[`${k}_push_failures_gc`] = r.gc.failed;
        figures[`${k}_images_lost_gc`] = r.verify.lostByWindow.gc ?? 0;
        figures[`${k}_images_lost`] = r.verify.lost;
        figures[`${k}_gc_runs`] = r.gcRuns.length;
        figures[`${k}_gc_blobs_deleted`] = r.gcRuns.reduce((s, x) => s + x.blobsDeleted, 0);
        figures[`${k}_gc_run_s_median`] = median(r.gcRuns.map((x) => x.seconds));
        figures[`${k}_gc_run_itself_s_median`] = median(r.gcRuns.map((x) => x.runSeconds));
        for (const [mode, rate] of Object.entries(r.ratesDuring)) figures[`${k}_pushes_per_s_during_${mode}_runs`] = rate;
        ratios[`${k}_push_rate_gc_over_no_gc`] = r.gc.pushesPerSecond / r.noGc.pushesPerSecond;
        if (Object.keys(r.gc.failures).length > 0) notes.push(`(c) ${k} push failures during GC: ${JSON.stringify(r.gc.failures)}`);
        if (r.gcErrors.length > 0) notes.push(`(c) ${k} GC errors: ${r.gcErrors.slice(0, 3).join(" / ")}`);
      } else notMeasured(`(c) ${k} pushes during GC`, r.notMeasured ?? "no GC window");
      if (r.verify.examples.length > 0) notes.push(`(c) ${k} lost images (${JSON.stringify(r.verify.reasons)}), e.g. ${r.verify.examples.join(", ")}`);
    }
  }

  figures.load_avg_1m_start = load1Start;
  figures.load_avg_1m_end = loadavg()[0]!;
  const codeAtEnd = await codeState(registryCodePaths);
  const targets: Target[] = [
    ...(legs.has("a") ? [{ name: "capstan_full_dry_run_over_distribution", kind: "max" as const, value: 1 }, { name: "dry_run_blob_count_mismatch", kind: "max" as const, value: 0 }] : []),
    ...(legs.has("b") ? [{ name: "capstan_incremental_over_full_dry_run", kind: "max" as const, value: 0.05 }] : []),
    ...(legs.has("c") ? [{ name: "capstan_images_lost", kind: "max" as const, value: 0 }, { name: "capstan_push_rate_gc_over_no_gc", kind: "min" as const, value: 0.8 }] : []),
  ];
  const verdicts = targets.map((t) => {
    const v = ratios[t.name] ?? figures[t.name];
    if (v === undefined) return `NOT MEASURED: ${t.name} (target ${t.kind === "max" ? "<=" : ">="} ${t.value})`;
    return `${(t.kind === "max" ? v <= t.value : v >= t.value) ? "MET" : "MISSED"}: ${t.name} = ${Number.isInteger(v) ? v : v.toFixed(3)} (target ${t.kind === "max" ? "<=" : ">="} ${t.value})`;
  });
  report({
    bench: "registry-gc",
    figures,
    ratios,
    targets,
    notes: [
      ...verdicts,
      ...notes,
      `tree (seed ${seed}, written straight to disk in distribution's layout): ${describeTree(treeA)}`,
      `(a) docker-registry garbage-collect --dry-run (distribution 2.8.2, a process) vs Capstan collect({mode: "full", dryRun: true, graceMs: 0}) in this process (FilesystemDriver, SQLite store); ` +
        `${rounds} rounds, order alternating, after one untimed --delete-untagged dry run of each; medians`,
      `(b) a real full run, then ${incrementalRounds} rounds: ${deletesPerRound} tagged manifests deleted through capstan registry's API, then collect({mode: "incremental", dryRun: false}) with the full run's collector state; median`,
      `(c) ${writers} writers, ${windowMs / 1000} s without GC then ${windowMs / 1000} s with GC back to back (distribution: garbage-collect CONFIG while serve runs; ` +
        `Capstan: ${capstanTrigger === "api" ? `POST /api/registry/gc/runs {mode: "${capstanLoopFull ? "full" : "incremental"}", graceSeconds: 0}, then GET until done` : `capstan registry gc -store URL -grace 0s${capstanLoopFull ? " -full" : ""}`}, run by the serving registry); images: config + shared layer (pool of 8, HEAD then skip) + fresh 1-4 KiB layer; ` +
        `repositories aaa/push-w<k>; lost = manifest by tag or a blob not served with its sha256 afterwards`,
      `load average (1 min) ${load1Start.toFixed(2)} at the start, ${figures.load_avg_1m_end.toFixed(2)} at the end`,
      ...(codeAtEnd.hash === codeAtStart.hash
        ? [`capstan registry code: ${describeCodeState(codeAtStart)}`]
        : [`WARNING: the registry code changed during the run`, `at the start: ${describeCodeState(codeAtStart)}`, `at the end: ${describeCodeState(codeAtEnd)}`]),
    ],
  });
}

await runBench(main, signals, cleanUp);
