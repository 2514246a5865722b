// The Dependency controller's pass against an in-memory cluster (test/helpers/fake-cluster.ts) and
// the real embedded store (SqliteStore, ":memory:"), on a fake clock. A "process" is what an
// orchestrator holds in memory (container cache, informers, reconciler); a test can drop one
// (a crash) and start another on the same store and cluster, as a restart would.
//
// References are set directly on one ReferenceIndex: a new process would rebuild the same counts
// from the PodGroup records (reference-index.ts; covered by the integration tests).
import { ContainerCache } from "../../../adapters/cluster/container-cache.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { dependencyLayout, type DependencyStatus } from "../../../api/resources/dependency.ts";
import { labelKeys } from "../../../controllers/dependency/naming.ts";
import { DependencyReconciler } from "../../../controllers/dependency/reconciler.ts";
import { ReferenceIndex } from "../../../controllers/dependency/reference-index.ts";
import { decodeSpec, decodeStatus, type StoredDependency } from "../../../controllers/dependency/stored.ts";
import { restartBackoff } from "../../../controllers/shared/backoff.ts";
import type { ImagesState } from "../../../controllers/shared/image-pull.ts";
import { FakeClock } from "../../../runtime/clock.ts";
import { Informer } from "../../../runtime/informer.ts";
import { silentLogger } from "../../../runtime/log.ts";
import type { Result } from "../../../runtime/result.ts";
import { FakeCluster, type FakeContainer } from "../../helpers/fake-cluster.ts";

export const gcMs = 20_000;
export const updateWaitMs = 2_000;
export const refreshIntervalMs = 30_000;

/** A status write, or an engine call, in the order they happened. */
export type JournalEntry = { kind: "status"; status: DependencyStatus } | { kind: "call"; method: string; node: string | undefined; ref: string | undefined };

/** The store with every successful status put noted in `journal`. */
function journaled(store: Store, journal: JournalEntry[], statusPrefix: string): Store {
  return new Proxy(store, {
    get(target, property) {
      if (property === "put") {
        return async (...args: Parameters<Store["put"]>) => {
          const result = await target.put(...args);
          if (result.succeeded && args[0].startsWith(statusPrefix)) journal.push({ kind: "status", status: JSON.parse(args[1]) as DependencyStatus });
          return result;
        };
      }
      const value = Reflect.get(target, property) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

export class World {
  readonly clock = new FakeClock(Date.parse("2026-01-01T00:00:00.000Z"));
  readonly sqlite = new SqliteStore({ path: ":memory:" });
  readonly layout = dependencyLayout("/t/");
  readonly journal: JournalEntry[] = [];
  readonly store = journaled(this.sqlite, this.journal, this.layout.status);
  readonly cluster: FakeCluster;
  readonly references = new ReferenceIndex();
  readonly name = "logagent";
  /** What the image puller answers (D7): "ready" unless a test says otherwise. */
  images: ImagesState = { kind: "ready" };

  constructor(nodes: string[] = ["n1", "n2"]) {
    this.cluster = new FakeCluster({ nodes, now: () => this.clock.now() });
  }

  /** Store the dependency at `version` (a PUT that changed the pod bumps it), or mark it deleting. */
  async putSpec(version: number, over: Partial<StoredDependency> = {}): Promise<void> {
    const at = new Date(this.clock.now()).toISOString();
    const spec: StoredDependency = { name: this.name, namespace: "infra", containers: [{ image: "img", env: [`V=${version}`] }], version, createdAt: at, updatedAt: at, ...over };
    await this.sqlite.put(this.layout.dependency(this.name), JSON.stringify(spec));
  }

  /** One PodGroup instance per entry of `nodes` lists the dependency (node policy). */
  reference(nodes: string[]): void {
    this.references.setSpec("g", { name: "g", namespace: "shop", version: 1, dependencies: [{ podName: this.name, policy: "node" }] });
    this.references.setStatus("g", { name: "g", pods: nodes.map((node) => ({ node, containers: 1 })) });
  }

  async status(): Promise<DependencyStatus | undefined> {
    const kv = await this.sqlite.get(this.layout.statusOf(this.name));
    return kv ? (JSON.parse(kv.value) as DependencyStatus) : undefined;
  }

  /** The dependency's containers on the engines. */
  containers(): FakeContainer[] {
    return this.cluster.list().filter((c) => c.labels[labelKeys.dependency] === this.name);
  }

  /** "node: version state" of every container, sorted. */
  placement(): string[] {
    return this.containers()
      .map((c) => `${c.node}: v${c.labels[labelKeys.version]} ${c.state}`)
      .sort();
  }

  async start(): Promise<Process> {
    const process = new Process(this);
    await process.started;
    return process;
  }

  async close(): Promise<void> {
    await this.sqlite.close();
  }
}

/** Let the fake engines' events (setImmediate) and the store's watches reach the caches. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

export class Process {
  readonly cache: ContainerCache;
  readonly reconciler: DependencyReconciler;
  readonly started: Promise<void>;
  private readonly stopping = new AbortController();
  private readonly specs: Informer<ReturnType<typeof decodeSpec>>;
  private readonly statuses: Informer<ReturnType<typeof decodeStatus>>;
  private readonly running: Promise<void>;

  constructor(private readonly world: World) {
    const { clock, layout } = world;
    this.cache = new ContainerCache({ cluster: world.cluster, labelFilter: [labelKeys.dependency], indexLabels: [labelKeys.dependency], clock });
    this.specs = new Informer({ name: "specs", source: world.store, prefix: layout.depends, decode: decodeSpec, clock });
    this.statuses = new Informer({ name: "statuses", source: world.store, prefix: layout.status, decode: decodeStatus, clock });
    this.reconciler = new DependencyReconciler({
      store: world.store,
      cluster: world.cluster,
      cache: this.cache,
      specs: this.specs,
      statuses: this.statuses,
      references: world.references,
      layout,
      gcMs,
      updateWaitMs,
      refreshIntervalMs,
      backoff: restartBackoff(),
      now: () => clock.now(),
      random: () => 0.5,
      clock,
      callTimeoutMs: 15_000,
      images: { ensureImages: async () => world.images },
    });
    this.running = this.cache.start(this.stopping.signal);
    this.specs.start();
    this.statuses.start();
    this.started = this.sync();
  }

  private async sync(): Promise<void> {
    await settle();
    await Promise.all([this.cache.waitForSync(), this.specs.waitForSync(), this.statuses.waitForSync()]);
  }

  /** One pass of the dependency, as the controller's worker would run it. */
  async pass(signal: AbortSignal = new AbortController().signal): Promise<Result | void> {
    // The spec as stored now (a test's putSpec) is in the informer before the pass reads it.
    const spec = await this.world.sqlite.get(this.world.layout.dependency(this.world.name));
    if (spec) await this.specs.waitForRevision(spec.modRevision, signal);
    const result = await this.reconciler.reconcile(this.world.name, { signal, log: silentLogger, attempt: 1 });
    await settle();
    return result;
  }

  /**
   * Passes, each after its requeueAfter on the fake clock, until `done` holds after one (at most
   * `max` passes). Returns how many ran.
   */
  async until(done: () => boolean | Promise<boolean>, max = 40): Promise<number> {
    for (let i = 1; i <= max; i++) {
      const result = await this.pass();
      if (await done()) return i;
      await this.world.clock.advanceAsync(result?.requeueAfterMs ?? 1);
      await settle();
    }
    throw new Error(`not done after ${max} passes: ${this.world.placement().join(", ")}`);
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.specs.stop();
    await this.statuses.stop();
    await this.running;
  }
}
