// The platform a chaos run works on, all of it private so its faults disturb no other test: Docker
// engines from a services dir of its own (`scripts/services start` with CAPSTAN_SERVICES_DIR), a
// private three-member etcd cluster, one `capstan orchestrator` and one `capstan secrets` process
// (-auth none, loopback only), the secrets service initialized and unsealed with one key share;
// a `capstan console` runs only to register the run's app.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { DockerCluster } from "../../adapters/cluster/index.ts";
import { startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { startEtcdCluster, type EtcdCluster } from "../helpers/etcd-process.ts";
import { orchestratorArgs, startOrchestrator, type Orchestrator } from "../helpers/ha-orchestrators.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, servicesScript, type Services } from "../helpers/services.ts";

const run = promisify(execFile);

export interface ApiAnswer {
  status: number;
  body: unknown;
}

export class ChaosEnv {
  orchestrator!: Orchestrator;
  secrets!: CapstanProcess;
  private unsealKey = "";

  private constructor(
    readonly servicesDir: string,
    readonly services: Services,
    readonly etcd: EtcdCluster,
    readonly engines: DockerCluster,
  ) {}

  static async start(servicesDir: string): Promise<ChaosEnv> {
    await servicesVerb(servicesDir, "start", "-n", "2");
    const saved = process.env.CAPSTAN_SERVICES_ENV;
    process.env.CAPSTAN_SERVICES_ENV = `${servicesDir}/services.env`;
    let services: Services;
    try {
      services = loadServices();
    } finally {
      if (saved === undefined) delete process.env.CAPSTAN_SERVICES_ENV;
      else process.env.CAPSTAN_SERVICES_ENV = saved;
    }
    const etcd = await startEtcdCluster().catch(async (e: unknown) => {
      await servicesVerb(servicesDir, "stop").catch(() => {});
      throw e;
    });
    const env = new ChaosEnv(servicesDir, services, etcd, DockerCluster.fromSpec(services.cluster));
    try {
      await env.startOrchestrator();
      await env.startSecrets();
      const init = await env.secretsApi("POST", "/v2/sys/init", { shares: 1, threshold: 1 });
      if (init.status !== 200) throw new Error(`secrets init: ${init.status} ${JSON.stringify(init.body)}`);
      env.unsealKey = (init.body as { keys: string[] }).keys[0]!;
      await env.unseal();
    } catch (e) {
      await env.stop();
      throw e;
    }
    return env;
  }

  /** -lease-duration 6s: a restarted orchestrator leads again at most that long after a SIGKILL. */
  async startOrchestrator(): Promise<void> {
    this.orchestrator = await startOrchestrator(orchestratorArgs(this.etcd.storeUrl, this.services, "6s", ["-refresh-interval", "5s"]));
  }

  async startSecrets(): Promise<void> {
    this.secrets = await startCapstan("secrets", ["-store", this.etcd.storeUrl, "-cluster", this.services.cluster, "-auth", "none"]);
  }

  /** Register `app` for the secrets service (it refuses secrets of an unknown app) through a `capstan console` run for the purpose. */
  async registerApp(app: string): Promise<void> {
    // The console insists on an admin token in the store even with -auth none: it writes one here.
    const dir = await mkdtemp(join(tmpdir(), "capstan-chaos-console-"));
    const console = await startCapstan("console", ["-store", this.etcd.storeUrl, "-auth", "none", "-admin-token-file", join(dir, "admin-token")]).catch(async (e: unknown) => {
      await rm(dir, { recursive: true, force: true });
      throw e;
    });
    try {
      const res = await call(console.url, "POST", "/api/v1/apps", { appname: app, maintainers: ["chaos@example.com"] });
      if (res.status !== 201 && res.status !== 409) throw new Error(`register app ${app}: ${res.status} ${JSON.stringify(res.body)}`);
    } finally {
      await console.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }

  async unseal(): Promise<void> {
    const res = await call(this.secrets.url, "POST", "/v2/sys/unseal", { key: this.unsealKey });
    if (res.status !== 200 || (res.body as { sealed: boolean }).sealed) throw new Error(`unseal: ${res.status} ${JSON.stringify(res.body)}`);
  }

  async api(method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    await this.supervise();
    return call(this.orchestrator.url, method, path, body);
  }

  async secretsApi(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<ApiAnswer> {
    if (this.unsealKey) await this.supervise();
    return call(this.secrets.url, method, path, body, contentType);
  }

  /**
   * What a supervisor (systemd Restart=always) does: start again a process that exited on its own.
   * An orchestrator that loses its leadership exits on purpose (docs/high-availability.md), for
   * example when an etcd member's restart delays its lease renewal past the deadline. Each restart
   * is noted in `exits` with the process's last log line.
   */
  async supervise(): Promise<void> {
    if (this.supervising) return this.supervising;
    this.supervising = (async () => {
      if (exitedOnItsOwn(this.orchestrator)) {
        this.exits.push(`orchestrator exited on its own (code ${this.orchestrator.child.exitCode}): ${lastLine(this.orchestrator.log())}`);
        await this.startOrchestrator();
      }
      if (this.unsealKey && exitedOnItsOwn(this.secrets)) {
        this.exits.push(`secrets exited on its own (code ${this.secrets.child.exitCode}): ${lastLine(this.secrets.log())}`);
        await this.startSecrets();
        await this.secretsUp();
        await this.unseal();
      }
    })().finally(() => (this.supervising = undefined));
    return this.supervising;
  }

  /** Processes restarted by supervise(), not yet reported. */
  readonly exits: string[] = [];
  private supervising: Promise<void> | undefined;

  /** A `scripts/services` verb on this run's own services dir. */
  servicesVerb(...args: string[]): Promise<void> {
    return servicesVerb(this.servicesDir, ...args);
  }

  /** The endpoint (unix://...) of engine `node`. */
  engine(node: string): string {
    return this.services.engines[node]!;
  }

  /** `docker -H <engine> ...`, as an operator would type it behind Capstan's back. */
  async docker(node: string, ...args: string[]): Promise<string> {
    const { stdout } = await run("docker", ["-H", this.engine(node), ...args], { timeout: 30_000 });
    return stdout;
  }

  async stop(): Promise<void> {
    await this.orchestrator?.kill().catch(() => {});
    if (this.secrets && this.secrets.child.exitCode === null && this.secrets.child.signalCode === null) {
      this.secrets.child.kill("SIGKILL");
      await this.secrets.exited;
    }
    // The processes first, so no controller creates a container again while they are removed.
    await this.removeAllContainers().catch(() => {});
    await this.etcd.stop().catch(() => {});
    await servicesVerb(this.servicesDir, "stop").catch(() => {});
  }

  /** The engines are this run's own: it starts and ends with none of Capstan's containers on them. */
  async removeAllContainers(): Promise<void> {
    const all = await this.engines.listContainers(undefined, { all: true, filters: { label: ["io.capstan.podgroup"] } });
    await Promise.all(all.map((c) => this.engines.remove(c, { force: true, volumes: true }).catch(() => {})));
  }

  /** Wait until the secrets service answers its status again (after its restart). */
  async secretsUp(): Promise<void> {
    await pollUntil("the secrets service to answer", async () => (await call(this.secrets.url, "GET", "/v2/sys/status")).status === 200, 30_000, 200);
  }
}

/** Exited with a code (not killed by a signal, which only the run's faults send). */
function exitedOnItsOwn(p: CapstanProcess): boolean {
  return p.child.exitCode !== null;
}

function lastLine(log: string): string {
  const lines = log.trim().split("\n");
  return lines.slice(-3).join(" | ").slice(0, 600);
}

async function servicesVerb(dir: string, ...args: string[]): Promise<void> {
  await run(servicesScript, args, { timeout: 180_000, env: { ...process.env, CAPSTAN_SERVICES_DIR: dir } });
}

async function call(base: string, method: string, path: string, body?: unknown, contentType = "application/json"): Promise<ApiAnswer> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { "content-type": contentType },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed };
}
