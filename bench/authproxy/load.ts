// The two load generators of bench:authproxy, each run as its own process (the machine's two cores
// are shared by the load, nginx, the proxy and the upstream; the bench process only waits):
//
// - saturating, closed loop: Debian's wrk 4.1 (`--latency`, percentiles from its own histogram via
//   wrk-report.lua's done(), which prints them as JSON);
// - fixed rate, open loop: open-loop.ts (undici), latency from each request's scheduled time.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { OpenLoopOptions, OpenLoopResult } from "./open-loop.ts";

export const wrkBin = "/usr/bin/wrk";
const wrkScript = fileURLToPath(new URL("./wrk-report.lua", import.meta.url));
const openLoopScript = fileURLToPath(new URL("./open-loop.ts", import.meta.url));
const tsxLoader = import.meta.resolve("tsx");

/** What wrk-report.lua prints. Times in microseconds. */
export interface WrkReport {
  requests: number;
  duration_us: number;
  bytes: number;
  connect_errors: number;
  read_errors: number;
  write_errors: number;
  /** Answers with a status of 400 or more (wrk counts them as errors). */
  status_errors: number;
  timeouts: number;
  p50_us: number;
  p75_us: number;
  p90_us: number;
  p99_us: number;
  p999_us: number;
  max_us: number;
  mean_us: number;
  stdev_us: number;
}

export interface WrkOptions {
  url: string;
  connections: number;
  threads: number;
  seconds: number;
  headers?: Record<string, string>;
}

interface Output {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Children running now, so that the bench's clean-up can kill them. */
export const loadChildren = new Set<ChildProcess>();

function run(cmd: string, args: string[], timeoutMs: number): Promise<Output> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    loadChildren.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      loadChildren.delete(child);
      reject(err);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      loadChildren.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** `wrk -t T -c C -d Ss --latency -s wrk-report.lua [-H ...] URL`; throws unless it reported. */
export async function runWrk(o: WrkOptions): Promise<WrkReport> {
  if (!existsSync(wrkBin)) throw new Error(`${wrkBin} is missing (apt-get install wrk)`);
  const args = ["-t", String(o.threads), "-c", String(o.connections), "-d", `${o.seconds}s`, "--timeout", "5s", "--latency", "-s", wrkScript];
  for (const [k, v] of Object.entries(o.headers ?? {})) args.push("-H", `${k}: ${v}`);
  args.push(o.url);
  const out = await run(wrkBin, args, (o.seconds + 30) * 1000);
  const line = out.stdout.split("\n").find((l) => l.startsWith('{"wrk_report"'));
  if (out.code !== 0 || line === undefined) throw new Error(`wrk ${o.url} failed (${out.code ?? out.signal}): ${out.stdout.slice(-2000)} ${out.stderr}`);
  return JSON.parse(line) as WrkReport;
}

/** open-loop.ts in its own Node process. */
export async function runOpenLoop(o: OpenLoopOptions): Promise<OpenLoopResult> {
  const out = await run(process.execPath, ["--import", tsxLoader, openLoopScript, JSON.stringify(o)], (o.warmupSeconds + o.seconds + 60) * 1000);
  const line = out.stdout.split("\n").find((l) => l.startsWith("{"));
  if (out.code !== 0 || line === undefined) throw new Error(`open-loop ${o.url} failed (${out.code ?? out.signal}): ${out.stderr}`);
  return JSON.parse(line) as OpenLoopResult;
}
