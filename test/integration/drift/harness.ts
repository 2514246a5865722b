// The orchestrator as `capstan orchestrator` assembles it (cli/orchestrator.ts: APIs, node monitor,
// PodGroup and drift-task controllers), in process, on a private etcd (the API and the node monitor
// write fixed keys under /platform/orchestrator/, which the shared etcd's other users write too),
// against both real engines, with short timings. Groups are created through the real HTTP API;
// assertions read Docker's actual containers. stopOrchestrator()/startOrchestrator() replace the
// process's manager as a restart would (the store and the engines keep everything).
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll } from "vitest";
import { DockerCluster, EngineUnavailableError, type ContainerSummary } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import type { PodGroupStatus } from "../../../api/resources/podgroup.ts";
import type { Task } from "../../../api/resources/task.ts";
import { installOrchestrator } from "../../../cli/orchestrator.ts";
import { identify, labelKeys } from "../../../controllers/podgroup/naming.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { silentLogger } from "../../../runtime/log.ts";
import { Manager } from "../../../runtime/manager.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, servicesCommand, uniqueName } from "../../helpers/services.ts";
import { openAccess } from "../../helpers/access.ts";
import { TokenVerifier } from "../../../api/auth/index.ts";

export const services = loadServices();

/** Exits at once on SIGTERM (busybox sleep as PID 1 would ignore it and wait out the kill timeout). */
export const serve = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];

export interface Actual {
  c: ContainerSummary;
  instance: number;
  drift: number;
}

export interface Answer {
  status: number;
  body: Record<string, unknown> & { code?: string; message?: string; details?: { path: string; message: string }[] };
}

/**
 * A DriftHarness for one test file: started before its tests, cleaned up after them (engines left
 * stopped are started again, containers removed). `cleanupMs` bounds the clean-up, which waits for
 * stopped engines and slow-to-stop pods.
 */
export function useDriftHarness(opts: { nodeTimeoutMs?: number } = {}, cleanupMs = 60_000): DriftHarness {
  const h = new DriftHarness(opts);
  beforeAll(() => h.start(), 60_000);
  afterAll(() => h.cleanup(), cleanupMs);
  return h;
}

export class DriftHarness {
  readonly namePrefix = uniqueName("drt");
  /** For assertions: the engines as they are, not as the orchestrator sees them. */
  readonly cluster = DockerCluster.fromSpec(services.cluster);
  etcd: EtcdProcess | undefined;
  store: EtcdStore | undefined;
  base = "";
  private manager: Manager | undefined;
  private seq = 0;

  constructor(private readonly opts: { nodeTimeoutMs?: number } = {}) {}

  name(tag: string): string {
    return `${this.namePrefix}-${tag}-${this.seq++}`;
  }

  async start(): Promise<void> {
    this.etcd = await startEtcd();
    this.store = new EtcdStore({ endpoints: [this.etcd.endpoint] });
    await this.startOrchestrator();
  }

  async startOrchestrator(): Promise<void> {
    const store = this.store!;
    const elector = new LeaderElector({
      store,
      key: keys.leader,
      identity: `drift-test-${process.pid}-${this.seq++}`,
      ttlSeconds: 3,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 500,
    });
    const manager = new Manager({ name: "drift-test", http: { host: "127.0.0.1", port: 0 }, elector, gracefulShutdownMs: 15_000 });
    // Reconnects at most 1 s apart, so an engine that comes back is seen back within a second.
    const cluster = DockerCluster.fromSpec(services.cluster, { events: { backoff: { maxMs: 1_000 } } });
    installOrchestrator(
      { store, cluster, manager, elector, underLeaderKey: () => ({ add: (r) => manager.add(r), fence: () => elector.fence() }), log: silentLogger, access: openAccess, verifier: new TokenVerifier({ store }) },
      { updateWaitMs: 500, refreshIntervalMs: 2_000, workers: 8, dependsGcMs: 300_000, nodeTimeoutMs: this.opts.nodeTimeoutMs ?? 60_000 },
    );
    await manager.start();
    const address = manager.address() as AddressInfo | { host: string; port: number };
    this.base = `http://127.0.0.1:${address.port}`;
    this.manager = manager;
    // Leading (the controllers run) once the first node records are written.
    await this.until("node records", async () => (await this.nodes()).length === 2, 30_000);
  }

  async stopOrchestrator(): Promise<void> {
    await this.manager?.stop();
    this.manager = undefined;
  }

  /** Engines this harness stopped and has not started again: cleanup starts them, whatever failed. */
  private readonly stoppedEngines = new Set<string>();

  /** Stop a shared engine (scripts/services stop-engine); cleanup restarts it if the test does not. */
  async stopEngine(node: string): Promise<void> {
    this.stoppedEngines.add(node);
    await servicesCommand("stop-engine", node);
  }

  async startEngine(node: string): Promise<void> {
    await servicesCommand("start-engine", node);
    this.stoppedEngines.delete(node);
  }

  /** Start any engine left stopped, stop the orchestrator, remove every container this harness's groups made, stop the private etcd. */
  async cleanup(): Promise<void> {
    for (const node of [...this.stoppedEngines]) await this.startEngine(node);
    await this.stopOrchestrator();
    const mine = (await this.cluster.listContainers(undefined, { all: true, filters: { label: [labelKeys.podGroup] } })).filter((c) =>
      (c.labels[labelKeys.podGroup] ?? "").startsWith(this.namePrefix),
    );
    await Promise.all(mine.map((c) => this.cluster.remove(c, { force: true, volumes: true }).catch(() => undefined)));
    await this.store?.close();
    await this.etcd?.stop();
  }

  async call(method: string, path: string, body?: unknown): Promise<Answer> {
    const init: RequestInit = { method, headers: body === undefined ? {} : { "content-type": "application/json" } };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await fetch(this.base + path, { ...init, signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: JSON.parse(await res.text()) as Answer["body"] };
  }

  /** POST /api/podgroups: a group of `n` instances of the test image (network none). */
  async create(name: string, n: number, pod: Record<string, unknown> = {}, container: Record<string, unknown> = {}): Promise<void> {
    const res = await this.call("POST", "/api/podgroups", {
      name,
      namespace: "drift-test",
      numInstances: n,
      restartPolicy: "always",
      pod: { namespace: "drift-test", containers: [{ image: services.testImage, command: serve, ...container }], network: "none", ...pod },
    });
    if (res.status !== 202) throw new Error(`POST ${name}: ${res.status} ${JSON.stringify(res.body)}`);
  }

  /** PATCH /api/nodes?cmd=drift with these parameters. */
  drift(params: Record<string, string>): Promise<Answer> {
    return this.call("PATCH", `/api/nodes?${new URLSearchParams(params).toString()}`);
  }

  async nodes(): Promise<NodeRecord[]> {
    const res = await this.call("GET", "/api/nodes");
    return res.body as unknown as NodeRecord[];
  }

  async tasks(): Promise<Task[]> {
    const { items } = await this.store!.list(keys.tasks);
    return items.map((kv) => JSON.parse(kv.value) as Task);
  }

  async status(name: string): Promise<PodGroupStatus | undefined> {
    const kv = await this.store!.get(keys.podGroupStatusOf(name));
    return kv ? (JSON.parse(kv.value) as PodGroupStatus) : undefined;
  }

  /** Docker's actual containers of a group, on every node that answers, by instance then node. */
  async actual(name: string): Promise<Actual[]> {
    const lists = await Promise.all(
      Object.keys(services.engines).map((node) =>
        this.cluster.listContainers(node, { all: true, filters: { label: [`${labelKeys.podGroup}=${name}`] } }).catch((e: unknown) => {
          if (e instanceof EngineUnavailableError) return []; // stopped by the test
          throw e;
        }),
      ),
    );
    return lists
      .flat()
      .map((c) => ({ c, id: identify(c, name) }))
      .filter((x) => x.id !== undefined)
      .map(({ c, id }) => ({ c, instance: id!.instance, drift: id!.drift }))
      .sort((a, b) => a.instance - b.instance || a.c.node.localeCompare(b.c.node));
  }

  until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
    return pollUntil(what, check, timeoutMs, everyMs);
  }

  /**
   * Wait until the group runs exactly `n` containers, one per instance 1..n, each running, and
   * the status says every pod runs; returns them.
   */
  async running(name: string, n: number, timeoutMs = 30_000): Promise<Actual[]> {
    return this.until(
      `${name}: ${n} running`,
      async () => {
        const a = await this.actual(name);
        if (a.length !== n || !a.every((x, i) => x.instance === i + 1 && x.c.state === "running")) return undefined;
        const s = await this.status(name);
        if (!s || s.state !== "running" || s.pods.length !== n || s.pods.some((p, i) => p.node !== a[i]!.c.node)) return undefined;
        return a;
      },
      timeoutMs,
    );
  }

  /** Wait until no drift task is left in the store. */
  async driftTasksDone(timeoutMs = 30_000): Promise<void> {
    await this.until("drift tasks done", async () => (await this.tasks()).every((t) => t.kind !== "drift"), timeoutMs);
  }
}
