// Debian's `docker-registry` (distribution 2.8.2) for the GC benchmark (docs/benchmarks.md): its
// offline `garbage-collect` on a root directory, timed and with its verdict parsed, and its
// `serve` on a given root (the root is the caller's: stop() leaves it), on a 127.0.0.1 free port.
//
// `garbage-collect [--dry-run] [--delete-untagged] CONFIG` prints, per repository, its name and a
// "marking manifest" / "marking blob" line per reference, then
//
//   <N> blobs marked, <B> blobs and <M> manifests eligible for deletion
//   blob eligible for deletion: sha256:...          (one per blob, also without --dry-run)
//   manifest eligible for deletion: sha256:...      (with --delete-untagged, before the summary)
//
// and, without --dry-run, deletes them as it goes.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { open, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { freePort } from "../../cli/free-port.ts";
import { configText } from "../registry/servers.ts";

export const distributionBin = "/usr/bin/docker-registry";
const timeBin = "/usr/bin/time";

/** distribution's config.yaml: filesystem storage at `root`, deletes on, warn logs, no access log. */
/** distribution's config for `root` (the registry bench's, access log off). */
export function distributionConfig(root: string, addr: string): string {
  return configText(root, addr, "distribution");
}

/** The environment distribution runs in: Debian's 2.8.2 panics over AWS_CA_BUNDLE (the tests drop it too). */
function distributionEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.AWS_CA_BUNDLE;
  return env;
}

export interface GarbageCollectResult {
  /** Wall time of the process, start to exit. */
  seconds: number;
  /** From the summary line. */
  blobsMarked: number;
  blobsEligible: number;
  manifestsEligible: number;
  /** The digests of the "blob eligible for deletion" lines. */
  blobs: string[];
  /** Peak RSS of the process (bytes) when /usr/bin/time is there, else NaN. */
  maxRssBytes: number;
}

/** Children still running, for the benchmark's clean-up. */
export const children = new Set<ChildProcess>();

/**
 * `docker-registry garbage-collect [--dry-run] [--delete-untagged] CONFIG`, timed from spawn to
 * exit; rejects when it exits non-zero or runs longer than `timeoutMs` (killed then).
 */
export async function garbageCollect(config: string, o: { dryRun: boolean; deleteUntagged?: boolean; timeoutMs?: number; workDir: string }): Promise<GarbageCollectResult> {
  if (!existsSync(distributionBin)) throw new Error(`${distributionBin} is missing (apt-get install docker-registry)`);
  const args = ["garbage-collect", ...(o.dryRun ? ["--dry-run"] : []), ...(o.deleteUntagged ? ["--delete-untagged"] : []), config];
  const rssFile = join(o.workDir, `gc-rss-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const withTime = existsSync(timeBin);
  const [cmd, argv] = withTime ? [timeBin, ["-f", "%M", "-o", rssFile, distributionBin, ...args]] : [distributionBin, args];
  const timeoutMs = o.timeoutMs ?? 300_000;
  const t0 = performance.now();
  const child = spawn(cmd, argv, { env: distributionEnv(), stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const blobs: string[] = [];
  let summary: RegExpExecArray | null = null;
  const lines = createInterface({ input: child.stdout! });
  lines.on("line", (line) => {
    if (line.startsWith("blob eligible for deletion: ")) blobs.push(line.slice("blob eligible for deletion: ".length).trim());
    else if (!line.includes(": marking ")) summary ??= /^(\d+) blobs marked, (\d+) blobs and (\d+) manifests eligible for deletion/.exec(line);
  });
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
  children.delete(child);
  const seconds = (performance.now() - t0) / 1000;
  const rssKb = withTime ? Number((await readFile(rssFile, "utf8").catch(() => "")).trim().split("\n").pop()) : NaN;
  await rm(rssFile, { force: true });
  if (exit.code !== 0) throw new Error(`docker-registry ${args.join(" ")} failed (${exit.code ?? exit.signal}) after ${seconds.toFixed(1)} s: ${stderr}`);
  const s = summary as RegExpExecArray | null;
  if (s === null) throw new Error(`docker-registry ${args.join(" ")}: no summary line in its output (stderr: ${stderr})`);
  return {
    seconds,
    blobsMarked: Number(s[1]),
    blobsEligible: Number(s[2]),
    manifestsEligible: Number(s[3]),
    blobs,
    maxRssBytes: rssKb * 1024,
  };
}

export interface DistributionServer {
  base: string;
  pid: number;
  config: string;
  logTail(): Promise<string>;
  /** SIGTERM, SIGKILL after 10 s; removes its config and log (not the root). */
  stop(): Promise<void>;
}

/** `docker-registry serve` on `root`, resolved once GET /v2/ answers 200 (20 s at most). */
export async function startDistribution(root: string, workDir: string, name: string): Promise<DistributionServer> {
  if (!existsSync(distributionBin)) throw new Error(`${distributionBin} is missing (apt-get install docker-registry)`);
  const port = await freePort();
  const config = join(workDir, `${name}.yml`);
  await writeFile(config, distributionConfig(root, `127.0.0.1:${port}`));
  const logPath = join(workDir, `${name}.log`);
  const log = await open(logPath, "w");
  const child = spawn(distributionBin, ["serve", config], { env: distributionEnv(), stdio: ["ignore", log.fd, log.fd] });
  await log.close();
  children.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const base = `http://127.0.0.1:${port}`;
  const logTail = async () => (await readFile(logPath, "utf8").catch(() => "")).slice(-3000);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const killed = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(killed);
    }
    children.delete(child);
    await rm(logPath, { force: true });
  };
  const deadline = performance.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      const tail = await logTail();
      await stop();
      throw new Error(`docker-registry serve exited with ${child.exitCode}: ${tail}`);
    }
    const ready = await fetch(`${base}/v2/`, { signal: AbortSignal.timeout(1_000) }).then((r) => r.ok, () => false);
    if (ready) break;
    if (performance.now() > deadline) {
      const tail = await logTail();
      await stop();
      throw new Error(`docker-registry serve not ready in 20 s: ${tail}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { base, pid: child.pid!, config, logTail, stop };
}
