// The orchestrator under test, as operators run it: `capstan orchestrator -web -store -cluster` in a
// child process (so its RSS and CPU are its own, read from /proc), talked to over HTTP only. The
// benchmark watches the status key in the store to see convergence the moment the controller
// writes it, which is what a client's GET would answer next.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { keys } from "../../api/resources/keys.ts";
import type { PodGroupStatus } from "../../api/resources/podgroup.ts";
import type { Store } from "../../adapters/store/store.ts";
import { freePort } from "../../cli/free-port.ts";

const capstanBin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));
/** Linux reports process CPU in clock ticks; USER_HZ is 100 on every architecture Node runs on. */
const ticksPerSecond = 100;

export interface OrchestratorOptions {
  storeUrl: string;
  cluster: string;
  /** Extra options, e.g. ["-refresh-interval", "20s"]. */
  args?: string[];
  /** Options for node itself, e.g. ["--cpu-prof", "--cpu-prof-dir=/tmp/prof"]. */
  nodeArgs?: string[];
  readyTimeoutMs?: number;
}

export class OrchestratorProcess {
  private constructor(
    readonly baseUrl: string,
    private readonly child: ChildProcess,
    private readonly exited: Promise<void>,
    private readonly dir: string,
  ) {}

  get pid(): number {
    return this.child.pid!;
  }

  static async start(options: OrchestratorOptions): Promise<OrchestratorProcess> {
    const dir = await mkdtemp(join(tmpdir(), "capstan-bench-orchestrator-"));
    const port = await freePort();
    const logFile = await open(join(dir, "log"), "w");
    const child = spawn(
      process.execPath,
      [...(options.nodeArgs ?? []), capstanBin, "orchestrator", "-web", `127.0.0.1:${port}`, "-store", options.storeUrl, "-cluster", options.cluster, ...(options.args ?? [])],
      { stdio: ["ignore", logFile.fd, logFile.fd] },
    );
    await logFile.close();
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const self = new OrchestratorProcess(`http://127.0.0.1:${port}`, child, exited, dir);
    const deadline = performance.now() + (options.readyTimeoutMs ?? 60_000);
    for (;;) {
      if (child.exitCode !== null) {
        const tail = await self.logTail();
        await self.stop();
        throw new Error(`capstan orchestrator exited with ${child.exitCode}: ${tail}`);
      }
      const ready = await fetch(`${self.baseUrl}/readyz`, { signal: AbortSignal.timeout(1_000) }).then((r) => r.ok, () => false);
      if (ready) return self;
      if (performance.now() > deadline) {
        const tail = await self.logTail();
        await self.stop();
        throw new Error(`capstan orchestrator not ready in time: ${tail}`);
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
  async cpuSeconds(): Promise<number> {
    const stat = await readFile(`/proc/${this.pid}/stat`, "utf8");
    // Fields after the parenthesised command name (which may itself hold spaces): state is field 3.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
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

export interface ApiAnswer {
  status: number;
  body: unknown;
}

// node:http with keep-alive rather than fetch: the load generator shares the machine's cores with
// the orchestrator and etcd, and undici's fetch costs it several times the CPU per request (measured
// here: about 0.6-1.4 ms against 0.2 ms).
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** One API request with a timeout; the body parsed as JSON when there is one. */
export function api(baseUrl: string, method: string, path: string, body?: unknown, timeoutMs = 10_000): Promise<ApiAnswer> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(
      `${baseUrl}${path}`,
      {
        method,
        agent,
        timeout: timeoutMs,
        headers: payload ? { "content-type": "application/json", "content-length": payload.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          try {
            resolve({ status: res.statusCode ?? 0, body: text === "" ? undefined : (JSON.parse(text) as unknown) });
          } catch (err) {
            reject(new Error(`${method} ${path}: ${res.statusCode} answer is not JSON: ${text.slice(0, 200)}`, { cause: err }));
          }
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(payload);
  });
}

/**
 * Resolves with performance.now() at the moment the store's status record for `name` first
 * satisfies `test` (checked on the current value, then on every write the watch delivers).
 */
export async function untilStatus(
  store: Store,
  name: string,
  test: (status: PodGroupStatus | null) => boolean,
  timeoutMs: number,
): Promise<number> {
  const key = keys.podGroupStatusOf(name);
  const parse = (value: string | undefined) => (value ? (JSON.parse(value) as PodGroupStatus) : null);
  const current = await store.list(key, { limit: 1 });
  const kv = current.items.find((i) => i.key === key);
  if (test(parse(kv?.value))) return performance.now();
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err: Error | null, at = 0) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      void watch.close();
      if (err) reject(err);
      else resolve(at);
    };
    const timer = setTimeout(() => finish(new Error(`status of ${name}: condition not met in ${timeoutMs} ms`)), timeoutMs);
    const watch = store.watch(key, current.revision + 1, {
      onEvents(events) {
        const at = performance.now();
        for (const e of events) {
          if (e.kv.key !== key) continue;
          if (test(e.type === "put" ? parse(e.kv.value) : null)) return finish(null, at);
        }
      },
      onError: (err) => finish(err),
    });
  });
}

/** Every pod of the status is running and there are exactly `instances` of them. */
export function allRunning(instances: number): (s: PodGroupStatus | null) => boolean {
  return (s) => s !== null && s.pods.length === instances && s.pods.every((p) => p.state === "running");
}
