// Garbage collection from the command line (docs/registry-gc.md):
//
//   capstan registry garbage-collect [-dry-run|-d] [-delete-untagged|-m] [-grace D] config.yaml
//     The operator's command, as distribution spells it (docs/registry-gc.md, "Collecting"): a full collection of the storage in
//     config.yaml. Safe while the registry serves: when a registry holds the storage (the
//     filesystem root's lock, or the registry leader key in the store) the run is handed to it as a
//     run record and this command waits for its report; otherwise it runs here, holding the lock.
//   capstan registry gc [-config FILE | -store URL] [-dry-run] [-full] [-delete-untagged] [-grace D] ...
//     Asks the running registry for a run (incremental unless -full) and follows it.
//
// Both talk to the store the registry uses: -store, or the one `capstan registry -config` picks
// without it (DATA/state.db, DATA = -data, else ROOTDIRECTORY/capstan or ./registry-data).
import { join, resolve } from "node:path";
import type { StorageDriver } from "../../adapters/blobstore/driver.ts";
import { RootDirectoryInUseError, RootDirectoryLock, RootDirectoryLockError } from "../../adapters/blobstore/root-lock.ts";
import { fencedStore } from "../../adapters/store/fenced.ts";
import { openStore } from "../../adapters/store/open.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { RegistryConfig } from "../../api/registry/config.ts";
import { getRun } from "../../api/registry/gc-runs.ts";
import { createRun, RunOptions, type RunRecord } from "../../api/resources/registry-gc.ts";
import { collect, type GcReport } from "../../controllers/registrygc/collector.ts";
import { getPolicy } from "../../controllers/registrygc/policy.ts";
import { LeaderElector } from "../../runtime/leaderelection.ts";
import { createLogger } from "../../runtime/log.ts";
import { formatDuration } from "../../runtime/duration.ts";
import { parseArgs, usage, UsageError, type OptionDef, type OptionValues } from "../options.ts";
import { jsonAliasDef, outputFormat, outputOptionDef } from "../output-option.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";
import { loadConfig, openDriver, printProblems, registryLeaderKey } from "./registry.ts";

const storeDefs: OptionDef[] = [
  { name: "store", type: "string", help: "the registry's store URL (default: the one `capstan registry -config` uses without -store)" },
  ...storeConnectionOptionDefs,
  { name: "data", type: "string", help: "the registry's -data, when it was given one (finds its embedded store)" },
];

const runDefs: OptionDef[] = [
  { name: "dry-run", short: "d", type: "bool", help: "report what would be deleted, delete nothing" },
  { name: "delete-untagged", short: "m", type: "bool", help: "also delete manifests no tag points at (index children and referrers of kept manifests stay)" },
  { name: "grace", type: "duration", help: "keep unreferenced blobs touched or written more recently than this (0s for a registry known to be idle)", default: "1h" },
  { name: "untagged-grace", type: "duration", help: "with -delete-untagged: only manifests untagged at least this long (default 0s: as distribution)" },
  outputOptionDef(["table", "json"], "the run record, with its report"),
  jsonAliasDef,
  { name: "timeout", type: "duration", help: "give up waiting for the report after this long", default: "6h" },
];

const gcDefs: OptionDef[] = [
  { name: "config", type: "string", help: "the registry's config.yaml (finds its store)" },
  ...storeDefs,
  ...runDefs,
  { name: "full", type: "bool", help: "read every repository and list every blob (otherwise only what changed since the last run)" },
  { name: "policy", type: "string", help: "apply this retention policy's rules in the run (capstan registry gc-policy)" },
  { name: "no-wait", type: "bool", help: "print the run's id and return at once" },
];

const gcSummary = `Asks the registry for a garbage collection run and shows its progress and report. The run is
a record in the registry's store; the Registry-GC controller of the leading registry carries it out
while the registry goes on serving pushes and pulls.`;

export async function gcCommand(argv: string[]): Promise<number> {
  const args = parseArgs(argv, gcDefs);
  if (args.help) {
    process.stdout.write(`${usage("registry gc", gcSummary, gcDefs)}\nexample:\n  capstan registry gc -config /etc/capstan/registry.yaml -dry-run\n`);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}" (the config file is -config FILE)`);
  const o = args.options;
  const json = outputFormat(o, ["table", "json"]) === "json";
  let config: RegistryConfig | undefined;
  if (typeof o.config === "string") {
    const loaded = loadConfig(o.config);
    if (!loaded.ok) {
      printProblems(o.config, loaded);
      return 2;
    }
    config = loaded.config;
  } else if (typeof o.store !== "string") {
    throw new UsageError("give -config FILE (the registry's config.yaml) or -store URL (its store)");
  }
  const options = runOptions(o, o.full === true ? "full" : "incremental");
  const store = openStore(storeUrlOf(o, config), storeConnectionFromOptions(o));
  try {
    if (options.policy !== undefined && (await getPolicy(store, options.policy)) === null) throw new UsageError(`-policy: no GC policy named ${options.policy} (capstan registry gc-policy list)`);
    const run = await createRun(store, options, "cli");
    if (o["no-wait"] === true) {
      process.stdout.write(`${run.id}\n`);
      return 0;
    }
    return printRun(await follow(store, run, o.timeout as number), json);
  } finally {
    await store.close();
  }
}

const gcAllSummary = `distribution's garbage-collect: deletes the blobs (and with -m the untagged manifests) that
nothing references, in the storage of config.yaml, filesystem or S3. Safe while the registry
serves: the run goes to the running registry when there is one, and happens here otherwise. Blobs
touched or written within -grace (default 1h) are kept, so pushes in flight lose nothing; with
-grace 0s everything unreferenced goes, which is for a registry known to be idle.`;

export async function garbageCollectCommand(argv: string[]): Promise<number> {
  const defs = [...storeDefs, ...runDefs];
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(`${usage("registry garbage-collect [options] config.yaml", gcAllSummary, defs)}\nexample:\n  capstan registry garbage-collect --dry-run /etc/capstan/registry.yaml\n`);
    return 0;
  }
  if (args.positionals.length !== 1) {
    throw new UsageError(args.positionals.length === 0 ? "garbage-collect needs the config file, e.g. capstan registry garbage-collect config.yaml" : `unexpected argument "${args.positionals[1]}"`);
  }
  const file = args.positionals[0]!;
  const loaded = loadConfig(file);
  if (!loaded.ok) {
    printProblems(file, loaded);
    return 2;
  }
  const config = loaded.config;
  const o = args.options;
  const json = outputFormat(o, ["table", "json"]) === "json";
  if (config.storage.driver === "s3" && typeof o.store !== "string") {
    // A guessed store would be one no registry writes its touches to: collecting on it while
    // registries serve the bucket is exactly the offline collector's danger.
    throw new UsageError("s3 storage: give the registries' store with -store URL (the one they run with), so the run sees their touches or goes to them");
  }
  const options = runOptions(o, "full");
  if (options.untaggedGraceSeconds === undefined) options.untaggedGraceSeconds = 0;
  const log = createLogger("registry-gc", process.env.CAPSTAN_LOG_LEVEL ?? "warn");
  // Ctrl-C, SIGTERM, or (S3) the lead lost: the run stops between steps; the next one finishes it.
  const abort = new AbortController();
  const stop = () => abort.abort(new Error("interrupted"));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  const store = openStore(storeUrlOf(o, config), storeConnectionFromOptions(o));
  let lock: RootDirectoryLock | undefined;
  let elector: LeaderElector | undefined;
  let driver: StorageDriver | undefined;
  try {
    // Who holds the storage? A registry serving it gets the run; otherwise it runs here.
    let here = false;
    if (config.storage.driver === "filesystem") {
      try {
        lock = RootDirectoryLock.acquire(resolve(config.storage.rootDirectory), { command: "capstan registry garbage-collect", log });
        here = true;
      } catch (e) {
        if (!(e instanceof RootDirectoryInUseError || e instanceof RootDirectoryLockError)) throw e;
      }
    } else {
      elector = new LeaderElector({ store, key: registryLeaderKey, identity: `garbage-collect:${process.pid}`, log });
      here = await leadWithin(elector, 3_000, abort);
      if (!here) {
        // Not campaigning any more: a registry that restarts while we wait must get the lead back.
        await elector.stop();
        elector = undefined;
      }
    }
    if (!here) {
      process.stderr.write("a registry is serving this storage: the run is handed to it\n");
      const run = await createRun(store, options, "cli garbage-collect");
      return printRun(await follow(store, run, o.timeout as number), json);
    }
    driver = openDriver(config.storage, file);
    const writer = elector ? fencedStore(store, () => elector!.fence()) : store;
    const report = await collect({
      signal: abort.signal,
      driver,
      store: writer,
      mode: "full",
      dryRun: options.dryRun,
      deleteUntagged: options.deleteUntagged,
      graceMs: options.graceSeconds * 1000,
      untaggedGraceMs: (options.untaggedGraceSeconds ?? 0) * 1000,
      log,
    });
    const record: RunRecord = { id: "local", options, requestedAt: report.startedAt, requestedBy: "cli garbage-collect", state: "done", report };
    return printRun(record, json);
  } finally {
    await driver?.close().catch(() => {});
    await elector?.stop().catch(() => {});
    lock?.release();
    await store.close();
  }
}

function runOptions(o: OptionValues, mode: "full" | "incremental"): RunOptions {
  const parsed = RunOptions.safeParse({
    dryRun: o["dry-run"] === true,
    mode,
    deleteUntagged: o["delete-untagged"] === true,
    graceSeconds: Math.round((o.grace as number) / 1000),
    ...(o["untagged-grace"] !== undefined && { untaggedGraceSeconds: Math.round((o["untagged-grace"] as number) / 1000) }),
    ...(typeof o.policy === "string" && { policy: o.policy }),
  });
  const flags: Record<string, string> = { graceSeconds: "-grace", untaggedGraceSeconds: "-untagged-grace", policy: "-policy" };
  if (!parsed.success) throw new UsageError(parsed.error.issues.map((i) => `${flags[String(i.path[0])] ?? `-${String(i.path[0])}`}: ${i.message}`).join("; "));
  return parsed.data;
}

/** The store `capstan registry -config` would use with these options. */
function storeUrlOf(o: OptionValues, config: RegistryConfig | undefined): string {
  if (typeof o.store === "string") return o.store;
  const data = typeof o.data === "string" ? o.data : config?.storage.driver === "filesystem" ? join(resolve(config.storage.rootDirectory), "capstan") : "./registry-data";
  return `sqlite://${data}/state.db`;
}

async function leadWithin(elector: LeaderElector, ms: number, abort: AbortController): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    elector.start({
      onStartedLeading: () => {
        clearTimeout(timer);
        resolve(true);
      },
      onStoppedLeading: () => abort.abort(new Error("the registry leader key was lost")),
    });
  });
}

/** Poll the run record until it is done or failed, printing progress to stderr as it changes. */
async function follow(store: Store, run: RunRecord, timeoutMs: number): Promise<RunRecord> {
  const deadline = Date.now() + timeoutMs;
  let shown = "";
  let waitingSaid = false;
  const started = Date.now();
  for (;;) {
    let r: RunRecord | undefined;
    try {
      r = await getRun(store, run.id);
    } catch (err) {
      // The store briefly unavailable: keep waiting (the deadline still holds).
      if (Date.now() > deadline) throw err;
      await new Promise((res) => setTimeout(res, 1_000));
      continue;
    }
    if (r === undefined) throw new Error(`run ${run.id} is gone from the store (pruned: more than 50 newer runs finished)`);
    if (r.state === "done" || r.state === "failed") return r;
    const line = r.state === "pending" ? "" : r.progress ? `${r.progress.phase} ${r.progress.done}/${r.progress.total}` : "running";
    if (line !== shown && line !== "") {
      process.stderr.write(`run ${r.id}: ${line}\n`);
      shown = line;
    }
    if (r.state === "pending" && !waitingSaid && Date.now() - started > 5_000) {
      process.stderr.write(`run ${r.id}: still pending; it starts when a registry on this store leads (is one running?)\n`);
      waitingSaid = true;
    }
    if (Date.now() > deadline) throw new Error(`run ${r.id} did not finish within ${formatDuration(timeoutMs)}; follow it with GET /api/registry/gc/runs/${r.id}`);
    await new Promise((res) => setTimeout(res, 250));
  }
}

function printRun(r: RunRecord, json: boolean): number {
  if (json) {
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
    return r.state === "done" ? 0 : 1;
  }
  if (r.state === "failed") {
    process.stderr.write(`garbage collection run ${r.id} failed: ${r.error ?? "unknown error"}\n`);
    return 1;
  }
  const report = r.report as GcReport;
  const verb = report.dryRun ? "would delete" : "deleted";
  for (const t of report.tagsDeleted) process.stdout.write(`tag ${verb}: ${t.repository}:${t.tag} (${t.digest})\n`);
  for (const m of report.manifestsDeleted) process.stdout.write(`manifest ${verb}: ${m.repository}@${m.digest}\n`);
  for (const b of report.deleted) process.stdout.write(`blob ${report.dryRun ? "eligible for deletion" : "deleted"}: ${b.digest} (${b.size} bytes)\n`);
  process.stdout.write(
    `${report.mode} run${report.dryRun ? " (dry run)" : ""}: ${report.repositoriesMarked} of ${report.repositories} repositories read, ${report.manifests} manifests, ` +
      `${report.blobsMarked} digests kept; ${verb} ${report.blobsDeleted} blobs (${report.bytesDeleted} bytes), ${report.manifestsDeleted.length} manifests, ` +
      `${report.tagsDeleted.length} tags; ${report.pending} unreferenced blobs kept within the grace (${formatDuration(report.graceMs)}); ${Math.round(report.durationMs)} ms\n`,
  );
  return 0;
}
