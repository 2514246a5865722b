// The two registries under test, each a child process on a 127.0.0.1 free port with filesystem
// storage in a fresh root directory under the run's work directory (one filesystem for both), no
// auth, log level warn (distribution's access log off): `capstan registry -config` and Debian's
// `docker-registry serve` (distribution 2.8.2). stop() ends the process and removes its root.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, open, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../../cli/free-port.ts";
import { CapstanProcess } from "../lib/capstan-process.ts";

export type RegistryKind = "capstan" | "distribution";

export const distributionBin = "/usr/bin/docker-registry";

/** What `capstan registry` runs that the registry benches are about (their runs record its state: bench/lib/code-state.ts). */
export const registryCodePaths = ["api/registry", "adapters/blobstore", "cli/commands/registry.ts", "cli/serve.ts"];

export interface RegistryUnderTest {
  kind: RegistryKind;
  /** http://127.0.0.1:<port> */
  base: string;
  /** 127.0.0.1:<port>, for docker:// references. */
  host: string;
  pid: number;
  root: string;
  logTail(): Promise<string>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Node options of the Capstan process, e.g. ["--cpu-prof", "--cpu-prof-dir=DIR"]. */
  nodeArgs?: string[];
}

let started = 0;

/** The config file of a bench registry: filesystem storage at `root`, delete enabled, log level warn. */
export function configText(root: string, addr: string, kind: RegistryKind): string {
  return [
    "version: 0.1",
    "log:",
    "  level: warn",
    // Capstan's registry has no access log (and warns about the key).
    ...(kind === "distribution" ? ["  accesslog:", "    disabled: true"] : []),
    "storage:",
    "  filesystem:",
    `    rootdirectory: ${root}`,
    "  delete:",
    "    enabled: true",
    "http:",
    `  addr: ${addr}`,
    "",
  ].join("\n");
}

export async function startRegistry(kind: RegistryKind, workDir: string, options: StartOptions = {}): Promise<RegistryUnderTest> {
  const n = ++started;
  const root = join(workDir, `${kind}-root-${n}`);
  await mkdir(root, { recursive: true });
  try {
    return kind === "capstan" ? await startCapstan(root, workDir, n, options) : await startDistribution(root, workDir, n);
  } catch (err) {
    await rm(root, { recursive: true, force: true });
    throw err;
  }
}

async function startCapstan(root: string, workDir: string, n: number, options: StartOptions): Promise<RegistryUnderTest> {
  const config = join(workDir, `capstan-${n}.yaml`);
  // CapstanProcess gives -web 127.0.0.1:<free port>, which wins over http.addr.
  await writeFile(config, configText(root, "127.0.0.1:5000", "capstan"));
  const env: NodeJS.ProcessEnv = { ...process.env, CAPSTAN_WEB: "", CAPSTAN_ADMIN_TOKEN: "", CAPSTAN_STORE: "", CAPSTAN_CLUSTER: "" };
  delete env.CAPSTAN_LOG_LEVEL;
  const proc = await CapstanProcess.start("registry", ["-config", config], { env, readyPath: "/v2/", ...(options.nodeArgs ? { nodeArgs: options.nodeArgs } : {}) });
  return {
    kind: "capstan",
    base: proc.baseUrl,
    host: proc.baseUrl.slice("http://".length),
    pid: proc.pid,
    root,
    logTail: () => proc.logTail(),
    stop: async () => {
      await proc.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
}

async function startDistribution(root: string, workDir: string, n: number): Promise<RegistryUnderTest> {
  if (!existsSync(distributionBin)) throw new Error(`${distributionBin} is missing (apt-get install docker-registry)`);
  const port = await freePort();
  const config = join(workDir, `distribution-${n}.yml`);
  await writeFile(config, configText(root, `127.0.0.1:${port}`, "distribution"));
  const logPath = join(workDir, `distribution-${n}.log`);
  const log = await open(logPath, "w");
  const env = { ...process.env };
  // Debian's 2.8.2 panics over AWS_CA_BUNDLE with S3; harmless here, dropped as the tests do.
  delete env.AWS_CA_BUNDLE;
  const child = spawn(distributionBin, ["serve", config], { env, stdio: ["ignore", log.fd, log.fd] });
  await log.close();
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
    await rm(root, { recursive: true, force: true });
    await rm(logPath, { force: true });
  };
  const deadline = performance.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      const tail = await logTail();
      await stop();
      throw new Error(`docker-registry exited with ${child.exitCode}: ${tail}`);
    }
    const ready = await fetch(`${base}/v2/`, { signal: AbortSignal.timeout(1_000) }).then((r) => r.ok, () => false);
    if (ready) break;
    if (performance.now() > deadline) {
      const tail = await logTail();
      await stop();
      throw new Error(`docker-registry not ready in 20 s: ${tail}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { kind: "distribution", base, host: `127.0.0.1:${port}`, pid: child.pid!, root, logTail, stop };
}

/** VmRSS and VmHWM of a process, bytes (/proc/<pid>/status). */
export async function memoryOf(pid: number): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

/**
 * Peak RSS of `pid` while it runs: VmRSS sampled every `everyMs`, and VmHWM, which is reset at the
 * start (writing 5 to /proc/<pid>/clear_refs, Linux >= 4.0) so it covers this window only; `hwm`
 * is NaN when the reset was refused.
 */
export class RssSampler {
  private peak = 0;
  private timer: NodeJS.Timeout | undefined;
  private hwmReset = false;
  private pending: Promise<void> = Promise.resolve();

  constructor(
    private readonly pid: number,
    private readonly everyMs = 50,
  ) {}

  async start(): Promise<void> {
    this.hwmReset = await writeFile(`/proc/${this.pid}/clear_refs`, "5").then(
      () => true,
      () => false,
    );
    await this.sample();
    this.timer = setInterval(() => {
      this.pending = this.sample();
    }, this.everyMs);
  }

  async stop(): Promise<{ peak: number; hwm: number }> {
    clearInterval(this.timer);
    await this.pending;
    await this.sample();
    const { hwm } = await memoryOf(this.pid);
    return { peak: this.peak, hwm: this.hwmReset ? hwm : NaN };
  }

  private async sample(): Promise<void> {
    const { rss } = await memoryOf(this.pid).catch(() => ({ rss: 0 }));
    this.peak = Math.max(this.peak, rss);
  }
}
