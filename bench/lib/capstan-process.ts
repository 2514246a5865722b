// A Capstan server under test, as operators run it: `capstan <command> -web 127.0.0.1:<port> ...`
// in a child process (so its RSS and CPU are its own, read from /proc), talked to over HTTP only.
// Its log goes to a file in a temporary directory, removed by stop().
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../../cli/free-port.ts";
import { cpuSecondsOf } from "./proc.ts";

/** cli/bin/capstan.mjs: `node <capstanBin> <command> ...` is `capstan <command> ...`. */
export const capstanBin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));

/** The environment of Capstan children: no CAPSTAN_* setting of this shell leaks into them; log level warn. */
export function capstanEnv(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(e)) if (k.startsWith("CAPSTAN_")) delete e[k];
  e.CAPSTAN_LOG_LEVEL = "warn";
  return e;
}

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
  seconds: number;
}

/**
 * A Capstan command in a child process (`capstan ...args`, environment capstanEnv()), killed after
 * `timeoutMs`; its whole stdout and the end of its stderr. While it runs the child is in `running`
 * when given, so that a bench's clean-up can kill it.
 */
export function capstanCommand(args: string[], timeoutMs: number, running?: Set<ChildProcess>): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [capstanBin, ...args], { env: capstanEnv(), stdio: ["ignore", "pipe", "pipe"] });
    running?.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      running?.delete(child);
      reject(err);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      running?.delete(child);
      resolve({ code, stdout, stderr, seconds: (performance.now() - t0) / 1000 });
    });
  });
}

export interface CapstanProcessOptions {
  /** Options for node itself, e.g. ["--cpu-prof", "--cpu-prof-dir=/tmp/prof"]. */
  nodeArgs?: string[];
  /** Environment of the child (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** A path that answers 200 once the server is ready (default /readyz). */
  readyPath?: string;
  readyTimeoutMs?: number;
}

export class CapstanProcess {
  private constructor(
    readonly baseUrl: string,
    private readonly child: ChildProcess,
    private readonly exited: Promise<void>,
    private readonly dir: string,
  ) {}

  get pid(): number {
    return this.child.pid!;
  }

  /** `capstan <command> -web 127.0.0.1:<free port> ...args`, resolved once `readyPath` answers 200. */
  static async start(command: string, args: string[], options: CapstanProcessOptions = {}): Promise<CapstanProcess> {
    const dir = await mkdtemp(join(tmpdir(), `capstan-bench-${command}-`));
    const port = await freePort();
    const logFile = await open(join(dir, "log"), "w");
    const child = spawn(process.execPath, [...(options.nodeArgs ?? []), capstanBin, command, "-web", `127.0.0.1:${port}`, ...args], {
      stdio: ["ignore", logFile.fd, logFile.fd],
      env: options.env ?? process.env,
    });
    await logFile.close();
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const self = new CapstanProcess(`http://127.0.0.1:${port}`, child, exited, dir);
    const deadline = performance.now() + (options.readyTimeoutMs ?? 60_000);
    const readyPath = options.readyPath ?? "/readyz";
    for (;;) {
      if (child.exitCode !== null) {
        const tail = await self.logTail();
        await self.stop();
        throw new Error(`capstan ${command} exited with ${child.exitCode}: ${tail}`);
      }
      const ready = await fetch(`${self.baseUrl}${readyPath}`, { signal: AbortSignal.timeout(1_000) }).then((r) => r.ok, () => false);
      if (ready) return self;
      if (performance.now() > deadline) {
        const tail = await self.logTail();
        await self.stop();
        throw new Error(`capstan ${command} not ready in time: ${tail}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async logTail(): Promise<string> {
    return (await readFile(join(this.dir, "log"), "utf8").catch(() => "")).slice(-3000);
  }

  /** Resident set size, bytes (/proc/<pid>/status VmRSS). */
  async rssBytes(): Promise<number> {
    const status = await readFile(`/proc/${this.pid}/status`, "utf8");
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) * 1024;
  }

  /** User + system CPU seconds the process has used (/proc/<pid>/stat utime + stime). */
  cpuSeconds(): Promise<number> {
    return cpuSecondsOf(this.pid);
  }

  /** Sum of a Prometheus counter or gauge over the series whose labels include `match`. */
  async metric(name: string, match: Record<string, string> = {}): Promise<number> {
    const text = await (await fetch(`${this.baseUrl}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
    let sum = 0;
    for (const line of text.split("\n")) {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!m || m[1] !== name) continue;
      const labels = m[2] ?? "";
      if (Object.entries(match).every(([k, v]) => labels.includes(`${k}="${v}"`))) sum += Number(m[3]);
    }
    return sum;
  }

  /** SIGTERM (graceful shutdown), SIGKILL after 30 s; removes its log directory. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill("SIGTERM");
      const killed = setTimeout(() => this.child.kill("SIGKILL"), 30_000);
      await this.exited;
      clearTimeout(killed);
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
