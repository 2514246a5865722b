// In-process orchestrator for the Dependency controller's integration tests: the shared etcd (keys
// under a unique root), both real engines, a Manager with a LeaderElector on a lease (so writes are
// fenced as in production), the Dependency API (called in-process) and the Dependency controller
// with short timings (GC 3 s). With `podGroups: true` the real PodGroup controller runs beside it;
// otherwise a test plays the PodGroup controller by writing group specs and statuses itself, which
// is all the Dependency controller reads of PodGroups (references are derived from the store).
// Assertions read Docker's actual containers.
import { DockerCluster, type ContainerSummary } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { fencedStore } from "../../../adapters/store/fenced.ts";
import { createDependsApi } from "../../../api/orchestrator/depends.ts";
import { decodeNodeRecord } from "../../../api/orchestrator/informers.ts";
import { dependencyLayout, type DependencyPodStatus, type DependencyStatus } from "../../../api/resources/dependency.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import type { PodGroupStatus } from "../../../api/resources/podgroup.ts";
import { createDependencyController, type DependencyController } from "../../../controllers/dependency/index.ts";
import { labelKeys } from "../../../controllers/dependency/naming.ts";
import { createPodGroupController } from "../../../controllers/podgroup/index.ts";
import { Informer } from "../../../runtime/informer.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { createLogger, silentLogger } from "../../../runtime/log.ts";
import { Manager } from "../../../runtime/manager.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { openAccess } from "../../helpers/access.ts";

export const services = loadServices();

/** Exits at once on SIGTERM (busybox sleep as PID 1 would ignore it and wait out the kill timeout). */
export const serve = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];

export interface HarnessOptions {
  gcMs?: number;
  updateWaitMs?: number;
  refreshIntervalMs?: number;
  /** Run the real PodGroup controller too. */
  podGroups?: boolean;
  /** The controllers' cluster spec (default: every test engine). */
  cluster?: string;
}

export interface Answer {
  status: number;
  body: Record<string, unknown> & { code?: string; reason?: string; message?: string; details?: { path: string; message: string }[] };
}

export class Harness {
  readonly root = `/capstan-test/${uniqueName("dep")}/`;
  readonly layout = dependencyLayout(this.root);
  readonly store = new EtcdStore({ endpoints: services.etcdEndpoints });
  readonly cluster: DockerCluster;
  /** Dependency and group names made by this harness all start with this (cleanup finds them by it). */
  readonly namePrefix = uniqueName("dpt");
  readonly nodes = new Informer<NodeRecord>({ name: "test-nodes", source: this.store, prefix: `${this.root}nodes/`, decode: decodeNodeRecord });
  readonly api = createDependsApi({ store: this.store, nodes: this.nodes, prefix: this.root, access: openAccess });
  private manager: Manager | undefined;
  dep: DependencyController | undefined;
  private seq = 0;
  private terms = 0;

  constructor(private readonly opts: HarnessOptions = {}) {
    this.cluster = DockerCluster.fromSpec(opts.cluster ?? services.cluster);
  }

  name(tag: string): string {
    return `${this.namePrefix}-${tag}-${this.seq++}`;
  }

  /** Node records as the node monitor writes them (the API's fit check reads them), then the controllers. */
  async start(): Promise<void> {
    if (!this.nodes.hasSynced()) {
      for (const node of Object.keys(services.engines)) await this.putNode(node, 4, 4 * 2 ** 30);
      this.nodes.start();
      await this.nodes.waitForSync();
    }
    await this.startControllers();
  }

  async startControllers(): Promise<void> {
    const elector = new LeaderElector({
      store: this.store,
      key: `${this.root}leader`,
      identity: `dep-harness-${process.pid}-${this.terms++}`,
      ttlSeconds: 3,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 500,
    });
    const manager = new Manager({ name: "dependency-test", elector, gracefulShutdownMs: 10_000 });
    const fenced = fencedStore(this.store, () => elector.fence());
    const dep = createDependencyController({
      store: fenced,
      cluster: this.cluster,
      prefix: this.root,
      gcMs: this.opts.gcMs ?? 3_000,
      updateWaitMs: this.opts.updateWaitMs ?? 500,
      refreshIntervalMs: this.opts.refreshIntervalMs ?? 2_000,
      restartBackoff: { initialMs: 200, maxMs: 1_000 },
      registry: manager.registry,
      // CAPSTAN_TEST_LOG=1 shows the controller's decisions.
      log: process.env.CAPSTAN_TEST_LOG ? createLogger("dependency-test", "debug") : silentLogger,
    });
    for (const i of dep.informers) manager.addInformer(i);
    for (const r of dep.runnables) manager.add(r);
    if (this.opts.podGroups) {
      const pg = createPodGroupController({
        store: fenced,
        cluster: this.cluster,
        prefix: this.root,
        secretMarkerPrefix: `${this.root}secret-sync/installed/`,
        updateWaitMs: 500,
        refreshIntervalMs: 2_000,
        registry: manager.registry,
      });
      for (const i of pg.informers) manager.addInformer(i);
      for (const r of pg.runnables) manager.add(r);
    }
    await manager.start();
    await dep.cache.waitForSync(undefined, 30_000);
    this.manager = manager;
    this.dep = dep;
  }

  async stopControllers(): Promise<void> {
    await this.manager?.stop();
    this.manager = undefined;
  }

  /** Stop, remove every container this harness made, drop its keys. */
  async cleanup(): Promise<void> {
    await this.stopControllers();
    await this.nodes.stop();
    // Node by node: an engine another test file is restarting must not fail this file's cleanup.
    const lists = await Promise.all(this.cluster.nodeNames.map((n) => this.cluster.listContainers(n, { all: true }).catch(() => [])));
    const all = lists.flat();
    const mine = all.filter((c) => c.name.startsWith(this.namePrefix) || (c.labels[labelKeys.dependency] ?? "").startsWith(this.namePrefix));
    await Promise.all(mine.map((c) => this.cluster.remove(c, { force: true, volumes: true }).catch(() => undefined)));
    await this.store.deletePrefix(this.root);
    await this.store.close();
  }

  async putNode(name: string, cpus: number, memoryBytes: number): Promise<void> {
    const record: NodeRecord = {
      name,
      address: "127.0.0.1",
      endpoint: services.engines[name] ?? "",
      labels: {},
      state: "ready",
      cpus,
      memoryBytes,
      reserved: { cpus: 0, memoryBytes: 0 },
      containers: 0,
      containersRunning: 0,
      engineVersion: "test",
      updatedAt: new Date().toISOString(),
    };
    await this.store.put(`${this.root}nodes/${name}`, JSON.stringify(record));
  }

  /** A request to the Dependency API, in-process. */
  async call(method: string, path: string, body?: unknown): Promise<Answer> {
    const init: RequestInit = { method, headers: body === undefined ? {} : { "content-type": "application/json" } };
    if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
    const res = await this.api.request(path, init);
    return { status: res.status, body: JSON.parse(await res.text()) as Answer["body"] };
  }

  /** POST /api/depends with a serving busybox pod; asserts 202. */
  async createDependency(name: string, extra: Record<string, unknown> = {}): Promise<void> {
    const a = await this.call("POST", "/api/depends", { ...dependencyBody(name), ...extra });
    if (a.status !== 202) throw new Error(`POST ${name}: ${a.status} ${JSON.stringify(a.body)}`);
  }

  /** PUT /api/depends: the same pod with `env` (a new version, rolled out node by node); 202 or it throws. */
  async updateDependency(name: string, env: string[]): Promise<void> {
    const body = dependencyBody(name);
    const a = await this.call("PUT", "/api/depends", { ...body, containers: [{ ...body.containers[0]!, env }] });
    if (a.status !== 202) throw new Error(`PUT ${name}: ${a.status} ${JSON.stringify(a.body)}`);
  }

  /**
   * Play the PodGroup controller: a stored group whose pod lists `dependencies`, and a status with
   * one running instance per entry of `nodes` (each with one container). `versions`: the spec's
   * pod.version and the version the instances run (both 1 by default); `podDependencies`: the
   * list each instance reports it runs with (omitted by default); `statusOnly`/`specOnly` write
   * one of the two records.
   */
  async putGroup(
    name: string,
    namespace: string,
    dependencies: { podName: string; policy: "node" | "namespace" }[],
    nodes: string[],
    versions: { spec?: number; pods?: number; podDependencies?: { podName: string; policy: "node" | "namespace" }[]; only?: "spec" | "status" } = {},
  ): Promise<void> {
    const specVersion = versions.spec ?? 1;
    const podVersion = versions.pods ?? 1;
    const now = new Date().toISOString();
    const spec = {
      name,
      namespace,
      numInstances: nodes.length,
      restartPolicy: "always",
      pod: { name, namespace, version: specVersion, containers: [{ image: services.testImage }], dependencies },
      createdAt: now,
      updatedAt: now,
    };
    const status: PodGroupStatus = {
      state: "running",
      lastError: "",
      updatedAt: now,
      observedVersion: podVersion,
      pods: nodes.map((node, i) => ({
        instanceNo: i,
        state: "running",
        lastError: "",
        restartCount: 0,
        driftCount: 0,
        version: podVersion,
        node,
        containers: [{ id: `fake-${name}-${i}`, name: `${name}.v${podVersion}-i${i}-d0`, node, nodeIp: "127.0.0.1", ip: "", status: "running" }],
        ...(versions.podDependencies && { dependencies: versions.podDependencies }),
      })),
    };
    const ops: { type: "put"; key: string; value: string }[] = [];
    if (versions.only !== "status") ops.push({ type: "put", key: `${this.layout.podGroups}${name}`, value: JSON.stringify(spec) });
    if (versions.only !== "spec") ops.push({ type: "put", key: `${this.layout.podGroupStatus}${name}`, value: JSON.stringify(status) });
    await this.store.txn([], ops);
  }

  async deleteGroup(name: string): Promise<void> {
    await this.store.txn(
      [],
      [
        { type: "delete", key: `${this.layout.podGroups}${name}` },
        { type: "delete", key: `${this.layout.podGroupStatus}${name}` },
      ],
    );
  }

  async status(name: string): Promise<DependencyStatus | undefined> {
    const kv = await this.store.get(this.layout.statusOf(name));
    return kv ? (JSON.parse(kv.value) as DependencyStatus) : undefined;
  }

  async pod(name: string, node: string, scope: string): Promise<DependencyPodStatus | undefined> {
    return (await this.status(name))?.pods.find((p) => p.node === node && p.namespace === scope);
  }

  /** Docker's actual containers of a dependency, on every node, sorted by node then scope. */
  async actual(name: string): Promise<ContainerSummary[]> {
    const cs = await this.cluster.listContainers(undefined, { all: true, filters: { label: [`${labelKeys.dependency}=${name}`] } });
    const scope = (c: ContainerSummary) => c.labels[labelKeys.namespace] ?? "";
    return cs.sort((a, b) => a.node.localeCompare(b.node) || scope(a).localeCompare(scope(b)));
  }

  /** The running containers of a dependency as "node/scope" (node-level: "node/"), sorted. */
  async placement(name: string): Promise<string[]> {
    return (await this.actual(name)).filter((c) => c.state === "running").map((c) => `${c.node}/${c.labels[labelKeys.namespace] ?? ""}`);
  }

  until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
    return pollUntil(what, check, timeoutMs, everyMs);
  }

  /**
   * Until the running controller has ended `count` more full refreshes of `name` (every container
   * inspected, a referenced slot verified) than when called: what "nothing changed over several
   * refreshes" waits for, instead of a fixed sleep.
   */
  async refreshes(name: string, count: number, timeoutMs = 30_000): Promise<void> {
    const dep = this.dep!;
    const base = dep.passes(name).fullRefreshes;
    await this.until(`${count} full refreshes of ${name}`, async () => dep.passes(name).fullRefreshes >= base + count, timeoutMs, 20);
  }

  /**
   * Until a pass of `name` that began at or after `at` (wall-clock ms) has ended: by then the
   * controller has acted on everything due before `at` (a GC time, a reclaim it must not make).
   */
  async passAfter(name: string, at: number, timeoutMs = Math.max(0, at - Date.now()) + 15_000): Promise<void> {
    const dep = this.dep!;
    await this.until(`a pass of ${name} begun after ${new Date(at).toISOString()}`, async () => dep.passes(name).lastStartedAt >= at, timeoutMs, 20);
  }

  /**
   * Poll `name`'s containers until there are none; returns what was seen before: the distinct id
   * lists, and the time of the last poll that still found some (it began then).
   */
  async watchUntilGone(name: string, timeoutMs: number, seen: (ids: string[]) => Promise<void> = async () => undefined): Promise<{ lists: string[]; lastPresentAt: number }> {
    const lists = new Set<string>();
    let lastPresentAt = 0;
    await this.until(`${name} gone`, async () => {
      const at = Date.now();
      const ids = (await this.actual(name)).map((c) => c.id);
      if (ids.length === 0) return true;
      lists.add(ids.join());
      lastPresentAt = at;
      await seen(ids);
      return false;
    }, timeoutMs, 100);
    return { lists: [...lists], lastPresentAt };
  }
}

/** The dependency pod these tests use: the test image serving, networking off. */
function dependencyBody(name: string) {
  return { name, namespace: "capstan-test", containers: [{ image: services.testImage, command: serve } as Record<string, unknown>], network: "none" };
}
