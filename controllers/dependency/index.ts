// The Dependency controller, assembled: four informers (dependency specs and statuses, PodGroup
// specs and statuses), the reference index over the PodGroup ones, the container watch cache of
// dependency containers, and the Controller that runs DependencyReconciler over them.
//
// What enqueues a dependency (the key is its name):
//   - its spec changed (AddSpec, UpdateSpec, RemoveSpec);
//   - its status was changed by someone else (our own writes are recognised and skipped);
//   - its reference counts changed: a PodGroup instance that lists it got a node and containers,
//     or lost them (the spec's add and remove events, derived from the store);
//   - one of its containers changed on an engine (die, destroy and oom at a high priority), or
//     its node came or went;
//   - its own requeueAfter: the periodic refresh (refreshIntervalMs, +-10 % jitter; a refresh
//     while referenced is the verify event), a GC time, the update wait or a restart back-off.
import { Registry } from "prom-client";
import { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import type { Cluster } from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { EventSink } from "../shared/events.ts";
import { DependencyEvents } from "./events.ts";
import { dependencyLayout } from "../../api/resources/dependency.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { Controller } from "../../runtime/controller.ts";
import { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { informerSource } from "../../runtime/source.ts";
import { labelKeys } from "./naming.ts";
import { restartBackoff, type RestartBackoff } from "../shared/backoff.ts";
import { ImagePuller } from "../shared/image-pull.ts";
import { statusSource } from "../shared/status-records.ts";
import { DependencyReconciler } from "./reconciler.ts";
import { ReferenceIndex, referenceSource } from "./reference-index.ts";
import { decodeGroupSpec, decodeGroupStatus, decodeSpec, decodeStatus, type GroupSpecEntry, type GroupStatusEntry } from "./stored.ts";

export interface DependencyControllerOptions {
  /** The FENCED store: every write of the controller must be refused once it is not the leader. */
  store: Store;
  cluster: Cluster;
  /** Unreferenced pods are reclaimed after this long (-depends-gc; 5 min). */
  gcMs?: number;
  /** Wait between removing a pod and deploying its new version on an update (-update-wait; 10 s). */
  updateWaitMs?: number;
  /** Periodic refresh of every dependency, jittered +-10 % (30 s). */
  refreshIntervalMs?: number;
  /** Dependencies reconciled at once (4). */
  workers?: number;
  /** Restart back-off: 1 s doubling to 5 min, reset after 10 min of running. */
  restartBackoff?: Partial<RestartBackoff>;
  /** Root of the key layout (default /platform/orchestrator/); tests use a unique root. */
  prefix?: string;
  /** Upper bound of one reconcile (default 5 min: stops may take the pod's killTimeout). */
  reconcileTimeoutMs?: number;
  clock?: Clock;
  /** Wall clock for times kept in the store (verifyTime, deployStartedAt, back-off); default Date.now. */
  now?: () => number;
  log?: Logger;
  registry?: Registry;
  /**
   * Informers of the PodGroup specs (`podgroups/`) and statuses (`podgroup-status/`) under the same
   * root that this process runs for other readers too (cli/orchestrator.ts runs one per prefix for
   * the API and both controllers); each absent one the controller makes itself. Given ones are not
   * in `informers`: whoever made them adds them to the manager.
   */
  shared?: { podGroups?: Informer<GroupSpecEntry>; podGroupStatuses?: Informer<GroupStatusEntry> };
  /**
   * Pulls missing images before pods are created (cli/orchestrator.ts shares one with the PodGroup
   * controller). Absent: one of its own, anonymous, in `runnables`; a given one is run by its maker.
   */
  imagePuller?: ImagePuller;
  /** Where the controller records events (an EventRecorder on the fenced store; docs/events.md). Absent: none. */
  events?: EventSink;
}

export interface DependencyController {
  /** Add each with manager.addInformer() (the shared ones are not here). */
  informers: Informer<unknown>[];
  /** Add each with manager.add(): the container cache, the image puller (unless given), then the controller. */
  runnables: Runnable[];
  cache: ContainerCache;
  controller: Controller;
  references: ReferenceIndex;
}

const highPriority = 100;
const urgentActions = new Set(["die", "destroy", "oom", "node-unreachable", "node-ready"]);

export function createDependencyController(opts: DependencyControllerOptions): DependencyController {
  const clock = opts.clock ?? realClock;
  const log = (opts.log ?? silentLogger).child({ component: "dependency" });
  const registry = opts.registry ?? new Registry();
  const layout = dependencyLayout(opts.prefix);
  const gcMs = opts.gcMs ?? 300_000;
  const updateWaitMs = opts.updateWaitMs ?? 10_000;
  const refreshIntervalMs = opts.refreshIntervalMs ?? 30_000;
  if (!(gcMs >= 0)) throw new RangeError(`gcMs must be >= 0 (got ${gcMs})`);
  if (!(updateWaitMs >= 0)) throw new RangeError(`updateWaitMs must be >= 0 (got ${updateWaitMs})`);
  if (!(refreshIntervalMs > 0)) throw new RangeError(`refreshIntervalMs must be > 0 (got ${refreshIntervalMs})`);
  const backoff = restartBackoff(opts.restartBackoff);

  const common = { source: opts.store, clock, log, registry };
  const specs = new Informer({ name: "dependency-specs", prefix: layout.depends, decode: decodeSpec, ...common });
  const statuses = new Informer({ name: "dependency-status", prefix: layout.status, decode: decodeStatus, ...common });
  const groups =
    sharedInformer(opts.shared?.podGroups, layout.podGroups) ??
    new Informer({ name: "dependency-podgroups", prefix: layout.podGroups, decode: decodeGroupSpec, ...common });
  const groupStatuses =
    sharedInformer(opts.shared?.podGroupStatuses, layout.podGroupStatus) ??
    new Informer({ name: "dependency-podgroup-status", prefix: layout.podGroupStatus, decode: decodeGroupStatus, ...common });
  // The same constant labels the containers (naming.ts) and selects them here (D2).
  const cache = new ContainerCache({
    cluster: opts.cluster,
    name: "dependency-containers",
    labelFilter: [labelKeys.dependency],
    indexLabels: [labelKeys.dependency],
    clock,
    log,
    registry,
  });
  const references = new ReferenceIndex();
  const images = opts.imagePuller ?? new ImagePuller({ cluster: opts.cluster, log });
  const reconciler = new DependencyReconciler({
    store: opts.store,
    cluster: opts.cluster,
    cache,
    specs,
    statuses,
    references,
    layout,
    gcMs,
    updateWaitMs,
    refreshIntervalMs,
    backoff,
    now: opts.now ?? Date.now,
    random: Math.random,
    clock,
    callTimeoutMs: 15_000,
    images,
    events: new DependencyEvents(opts.events),
  });
  const controller = new Controller({
    name: "dependency",
    reconcile: reconciler.reconcile,
    watches: [
      informerSource(specs, (e) => [e.name]),
      // A status without a spec (an interrupted removal) must be finished too: initial list included.
      statusSource(statuses, (name) => reconciler.lastStatusRevision(name), { name: "status:dependency-status", initialList: true }),
      referenceSource(references, groups, groupStatuses),
      cache.source(
        (c) => {
          const d = c.labels[labelKeys.dependency];
          return d ? [d] : [];
        },
        (change) => (urgentActions.has(change.action) ? highPriority : 0),
      ),
    ],
    maxConcurrentReconciles: opts.workers ?? 4,
    reconcileTimeoutMs: opts.reconcileTimeoutMs ?? 300_000,
    clock,
    log,
    registry,
  });
  return {
    informers: [specs, statuses, groups, groupStatuses].filter(
      (i) => i !== opts.shared?.podGroups && i !== opts.shared?.podGroupStatuses,
    ) as Informer<unknown>[],
    runnables: [cache, ...(opts.imagePuller ? [] : [images]), controller],
    cache,
    controller,
    references,
  };
}

/** A given informer, checked to cache `prefix` (a shared informer of another root would be a silent mix-up). */
function sharedInformer<T>(informer: Informer<T> | undefined, prefix: string): Informer<T> | undefined {
  if (informer !== undefined && informer.prefix !== prefix) {
    throw new RangeError(`shared informer ${informer.name} caches ${informer.prefix}, not ${prefix}`);
  }
  return informer;
}
