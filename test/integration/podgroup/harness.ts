// In-process orchestrator for the PodGroup controller's integration tests: the shared etcd (keys
// under a unique root), both real engines, a Manager with a LeaderElector on a lease (so writes are
// fenced as in production) and the controller with short timings. Specs are written to the store
// the way the API stores them; assertions read Docker's actual containers.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { DockerCluster, type ContainerSummary, type EventHandler, type SubscribeOptions, type Subscription } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { fencedStore } from "../../../adapters/store/fenced.ts";
import type { ContainerSpec, PodGroupStatus, RestartPolicy } from "../../../api/resources/podgroup.ts";
import { createPodGroupController, type PodGroupController } from "../../../controllers/podgroup/index.ts";
import { identify, labelKeys } from "../../../controllers/podgroup/naming.ts";
import { layout, type Layout, type StoredPodGroup } from "../../../controllers/podgroup/stored.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import { Manager } from "../../../runtime/manager.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { pollUntil } from "../../helpers/poll.ts";

const run = promisify(execFile);
export const services = loadServices();

/** Exits at once on SIGTERM (busybox sleep as PID 1 would ignore it and wait out the kill timeout). */
export const serve = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];

export interface GroupOptions {
  numInstances?: number;
  restartPolicy?: RestartPolicy;
  version?: number;
  container?: Partial<ContainerSpec>;
  pod?: Partial<StoredPodGroup["pod"]>;
}

/** A stored PodGroup as the API would write it. */
export function groupSpec(name: string, o: GroupOptions = {}): StoredPodGroup {
  const now = new Date().toISOString();
  return {
    name,
    namespace: "capstan-test",
    numInstances: o.numInstances ?? 1,
    restartPolicy: o.restartPolicy ?? "always",
    pod: {
      name,
      namespace: "capstan-test",
      version: o.version ?? 1,
      containers: [{ image: services.testImage, command: serve, ...o.container }],
      network: "none",
      ...o.pod,
    },
    createdAt: now,
    updatedAt: now,
  };
}

export interface Actual {
  c: ContainerSummary;
  instance: number;
  version: number;
  format: string;
}

export interface HarnessOptions {
  updateWaitMs?: number;
  refreshIntervalMs?: number;
  restartBackoff?: { initialMs?: number; maxMs?: number; resetAfterMs?: number };
  /** Secret-sync marker prefix the controller watches (default: `<root>secret-sync/installed/`, private to the harness). */
  secretMarkerPrefix?: string;
  /** The `-cluster` text the controller gets (default: the real engines; assertions always use those). */
  controllerCluster?: string;
}

export class Harness {
  readonly root = `/capstan-test/${uniqueName("pg")}/`;
  readonly keys: Layout = layout(this.root);
  readonly store = new EtcdStore({ endpoints: services.etcdEndpoints });
  readonly cluster = DockerCluster.fromSpec(services.cluster);
  /** Group names made by this harness all start with this (cleanup finds them by it). */
  readonly namePrefix = uniqueName("pgt");
  /** Where this harness's controller looks for Secret-sync markers (under the root, so cleanup drops them). */
  readonly markerPrefix: string;
  private manager: Manager | undefined;
  pg: PodGroupController | undefined;
  private seq = 0;

  constructor(private readonly opts: HarnessOptions = {}) {
    this.markerPrefix = opts.secretMarkerPrefix ?? `${this.root}secret-sync/installed/`;
  }

  /** A fresh group name. */
  name(tag: string): string {
    return `${this.namePrefix}-${tag}-${this.seq++}`;
  }

  async start(): Promise<void> {
    // Short timings (TTL >= 2 s, renewDeadline < TTL, renewDeadline > 1.2 x retryPeriod). A stop()
    // revokes the lease, so a harness started again leads at once.
    const elector = new LeaderElector({
      store: this.store,
      key: `${this.root}leader`,
      identity: `harness-${process.pid}-${this.seq}`,
      ttlSeconds: 3,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 500,
    });
    const manager = new Manager({ name: "podgroup-test", elector, gracefulShutdownMs: 10_000 });
    const pg = createPodGroupController({
      store: fencedStore(this.store, () => elector.fence()),
      // Reconnects at most 1 s apart, so a node that comes back is seen back within a second.
      cluster: this.opts.controllerCluster
        ? DockerCluster.fromSpec(this.opts.controllerCluster, { events: { backoff: { maxMs: 1_000 } } })
        : this.cluster,
      prefix: this.root,
      secretMarkerPrefix: this.markerPrefix,
      updateWaitMs: this.opts.updateWaitMs ?? 500,
      refreshIntervalMs: this.opts.refreshIntervalMs ?? 2_000,
      restartBackoff: this.opts.restartBackoff ?? {},
      registry: manager.registry,
    });
    for (const i of pg.informers) manager.addInformer(i);
    for (const r of pg.runnables) manager.add(r);
    await manager.start();
    await pg.cache.waitForSync(undefined, 30_000);
    this.manager = manager;
    this.pg = pg;
  }

  async stop(): Promise<void> {
    await this.manager?.stop();
    this.manager = undefined;
  }

  /** Stop the controller, remove every container and volume this harness made, drop its keys. */
  async cleanup(): Promise<void> {
    await this.stop();
    const mine = (await this.cluster.listContainers(undefined, { all: true, filters: { label: [labelKeys.podGroup] } })).filter((c) =>
      (c.labels[labelKeys.podGroup] ?? "").startsWith(this.namePrefix),
    );
    const foreign = (await this.cluster.listContainers(undefined, { all: true, filters: { name: [this.namePrefix] } })).filter(
      (c) => !mine.some((m) => m.id === c.id),
    );
    await Promise.all([...mine, ...foreign].map((c) => this.cluster.remove(c, { force: true, volumes: true }).catch(() => undefined)));
    for (const endpoint of Object.values(services.engines)) {
      const { stdout } = await run("docker", ["-H", endpoint, "volume", "ls", "-q", "--filter", `name=${this.namePrefix}`], { timeout: 20_000 });
      const vols = stdout.split("\n").filter(Boolean);
      if (vols.length) await run("docker", ["-H", endpoint, "volume", "rm", "-f", ...vols], { timeout: 20_000 }).catch(() => undefined);
    }
    await this.store.deletePrefix(this.root);
    await this.store.close();
  }

  async put(spec: StoredPodGroup): Promise<void> {
    await this.store.put(this.keys.podGroup(spec.name), JSON.stringify(spec));
  }

  async get(name: string): Promise<StoredPodGroup> {
    const kv = await this.store.get(this.keys.podGroup(name));
    if (!kv) throw new Error(`no spec ${name}`);
    return JSON.parse(kv.value) as StoredPodGroup;
  }

  /** Read-modify-write of the stored spec (what PATCH does). */
  async patch(name: string, change: (s: StoredPodGroup) => void): Promise<StoredPodGroup> {
    const s = await this.get(name);
    change(s);
    s.updatedAt = new Date().toISOString();
    await this.put(s);
    return s;
  }

  /** PATCH cmd=spec: new pod, version bumped. */
  async updatePod(name: string, change: (pod: StoredPodGroup["pod"]) => void): Promise<StoredPodGroup> {
    return this.patch(name, (s) => {
      change(s.pod);
      s.pod.version += 1;
    });
  }

  async status(name: string): Promise<PodGroupStatus | undefined> {
    const kv = await this.store.get(this.keys.statusOf(name));
    return kv ? (JSON.parse(kv.value) as PodGroupStatus) : undefined;
  }

  /** Docker's actual containers of a group, on every node. */
  async actual(name: string): Promise<Actual[]> {
    const cs = await this.cluster.listContainers(undefined, { all: true, filters: { label: [`${labelKeys.podGroup}=${name}`] } });
    return cs
      .map((c) => ({ c, id: identify(c, name) }))
      .filter((x) => x.id !== undefined)
      .map(({ c, id }) => ({ c, instance: id!.instance, version: id!.version, format: id!.format }))
      .sort((a, b) => a.instance - b.instance || a.c.node.localeCompare(b.c.node));
  }

  /** Poll until `check` returns a value (not undefined/false), or fail with the last observation. */
  until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
    return pollUntil(what, check, timeoutMs, everyMs);
  }


  /**
   * Wait until at least `ms` have passed since `since` (a Date.now() value) AND a pass of group
   * `name` began after that: how a test sees that, that long after something, the controller
   * looked at the group again and still left it alone (a pass that finds nothing to do writes
   * nothing, so "nothing changed" has no other trace). `during`, if given, runs on every poll
   * meanwhile and fails the wait as soon as it throws: a check that must hold throughout.
   */
  async waitedAndLooked(name: string, since: number, ms: number, during?: () => Promise<void>, timeoutMs = 30_000): Promise<void> {
    const pg = this.pg;
    if (!pg) throw new Error("harness not started");
    await timeAndPass({ what: `${ms} ms and a pass of ${name}`, finished: () => pg.passesFinished(name), since, ms, during, timeoutMs });
  }

  /**
   * Subscribe to the engines' container events; resolves once the stream is live: every node has
   * delivered its first relist (or been reported unreachable), so no later event is missed.
   */
  async subscribe(handler: EventHandler, options: SubscribeOptions): Promise<Subscription> {
    const heard = new Set<string>();
    const sub = this.cluster.subscribe((ev) => {
      if (ev.type === "relist" || (ev.type === "node" && ev.state === "unreachable")) heard.add(ev.node);
      handler(ev);
    }, options);
    const nodes = Object.keys(services.engines);
    await this.until("the event streams' first relists", async () => nodes.every((n) => heard.has(n)), 15_000, 20);
    return sub;
  }

  /** Wait until the group has exactly `n` running containers at `version`, one per instance 1..n, and status agrees. */
  async converged(name: string, n: number, version: number, timeoutMs = 30_000): Promise<Actual[]> {
    return this.until(
      `${name}: ${n} running at v${version}`,
      async () => {
        const a = await this.actual(name);
        const ok =
          a.length === n &&
          a.every((x, i) => x.instance === i + 1 && x.version === version && x.c.state === "running");
        if (!ok) return undefined;
        const s = await this.status(name);
        if (!s || s.state !== "running" || s.pods.length !== n || s.observedVersion !== version) return undefined;
        return a;
      },
      timeoutMs,
    );
  }

  /** docker exec on the container's engine; stdout. */
  async exec(c: { node: string; id: string }, cmd: string[]): Promise<string> {
    const endpoint = services.engines[c.node];
    if (!endpoint) throw new Error(`no engine ${c.node}`);
    const { stdout } = await run("docker", ["-H", endpoint, "exec", c.id, ...cmd], { timeout: 20_000 });
    return stdout;
  }
}

export interface TimeAndPassOptions {
  what: string;
  /** Passes of the group finished so far, as last seen (it may lag the controller by up to `lagMs`). */
  finished: () => number;
  since: number;
  ms: number;
  during?: (() => Promise<void>) | undefined;
  /** How far behind the controller `finished` may be (a child process's reports). */
  lagMs?: number;
  timeoutMs?: number;
}

/**
 * Resolve once Date.now() >= since + ms and a pass that BEGAN after that moment has finished. The
 * passes of one group never overlap (the work queue holds a key while it is reconciled), so of the
 * passes finished after the moment (plus the counter's lag), the second one began after it; the
 * first may have been in flight already. `during` runs on every poll and its throw fails the wait.
 */
export async function timeAndPass(o: TimeAndPassOptions): Promise<void> {
  const due = o.since + o.ms + (o.lagMs ?? 0);
  const deadline = Math.max(Date.now(), due) + (o.timeoutMs ?? 30_000);
  let target: number | undefined;
  for (;;) {
    if (o.during) await o.during();
    if (target === undefined && Date.now() >= due) target = o.finished() + 2;
    if (target !== undefined && o.finished() >= target) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${o.what} (passes finished: ${o.finished()}, wanted ${target ?? "?"})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
