// The PodGroup controller, assembled: three informers (specs, statuses, tasks), the container
// watch cache, and the Controller that runs PodGroupReconciler over them.
//
// What enqueues a group (the key is the group name):
//   - its spec changed (podgroups informer);
//   - its status was changed by someone else (our own writes are recognised and skipped);
//   - a refresh task names it (tasks informer; high priority; the task is deleted once done);
//   - a drift task applies to it: the task names it, or it has containers on the task's `from`
//     (high priority; the drift-task reconciler, a second controller here, deletes the task once
//     nothing it covers is left on `from`: drift-tasks.ts);
//   - one of its containers changed on an engine (container cache: die, destroy and oom at a high
//     priority, so repairs start within the event's round trip), or its node came or went;
//   - a Secret-sync marker naming it was written or changed (a created container waiting for its
//     secret files starts at once, not at the next refresh);
//   - its own requeueAfter: the periodic refresh (refreshIntervalMs, +-10 % jitter), the update
//     wait, a restart back-off or a runtime check falling due.
import { Registry } from "prom-client";
import { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import type { Cluster } from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { Controller } from "../../runtime/controller.ts";
import { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { informerSource, type Source } from "../../runtime/source.ts";
import { labelKeys } from "./naming.ts";
import { DependencyReservations, dependencyLabel } from "./dependency-reservations.ts";
import { NodeView } from "./nodes.ts";
import { PassesInFlight } from "./passes.ts";
import { DriftTaskReconciler } from "./drift-tasks.ts";
import { PodGroupReconciler } from "./reconciler.ts";
import { PodGroupEvents } from "./events.ts";
import type { EventSink } from "../shared/events.ts";
import { restartBackoff, type RestartBackoff } from "../shared/backoff.ts";
import { ImagePuller } from "../shared/image-pull.ts";
import { statusSource } from "../shared/status-records.ts";
import { decodeSecretMarker, defaultSecretMarkerPrefix } from "./secret-marker.ts";
import { decodeSpec, decodeStatus, decodeTask, layout, type SpecEntry, type StatusEntry, type TaskEntry } from "./stored.ts";

export interface PodGroupControllerOptions {
  /** The FENCED store: every write of the controller must be refused once it is not the leader. */
  store: Store;
  cluster: Cluster;
  /** Wait between removing an instance and deploying its new version on a spec update (10 s). */
  updateWaitMs?: number;
  /** Periodic refresh of every group, jittered +-10 % (30 s). */
  refreshIntervalMs?: number;
  /** Groups reconciled at once (8). */
  workers?: number;
  /** Restart back-off: 1 s doubling to 5 min, reset after 10 min of running. */
  restartBackoff?: Partial<RestartBackoff>;
  /** Root of the key layout (default /platform/orchestrator/); tests use a unique root. */
  prefix?: string;
  /** Where Secret-sync writes its installed markers (default /platform/secret-sync/installed/). */
  secretMarkerPrefix?: string;
  /** Upper bound of one reconcile (default 5 min: a stop may take the pod's killTimeout, up to 120 s). */
  reconcileTimeoutMs?: number;
  clock?: Clock;
  /** Wall clock for times kept in the store (restart back-off, rollout step); default Date.now. */
  now?: () => number;
  log?: Logger;
  registry?: Registry;
  /**
   * Informers of the specs (`podgroups/`) and statuses (`podgroup-status/`) under the same root
   * that this process runs for other readers too (cli/orchestrator.ts runs one per prefix for the
   * API and both controllers); each absent one the controller makes itself. Given ones are not in
   * `informers`: whoever made them adds them to the manager.
   */
  shared?: { specs?: Informer<SpecEntry>; statuses?: Informer<StatusEntry> };
  /**
   * Pulls missing images before pods are created (shared with the Dependency controller in
   * cli/orchestrator.ts, with the platform registry's credentials). Absent: one of its own,
   * anonymous, in `runnables`; a given one is run by whoever made it.
   */
  imagePuller?: ImagePuller;
  /** Where the controller records events (an EventRecorder on the fenced store; docs/events.md). Absent: none. */
  events?: EventSink;
}

export interface PodGroupController {
  /** Add each with manager.addInformer(): podgroups and podgroup-status (unless shared), tasks, Secret-sync markers. */
  informers: Informer<unknown>[];
  /** Add each with manager.add(): the container caches (PodGroup pods, dependency pods), the image puller (unless given), then the controllers. */
  runnables: Runnable[];
  /** The container watch cache (also a Runnable in `runnables`), for tests and other readers. */
  cache: ContainerCache;
  controller: Controller;
  /** Completes drift tasks (drift-tasks.ts); also in `runnables`. */
  driftController: Controller;
}

/** Priority of keys from refresh tasks and from container deaths: ahead of routine work. */
const highPriority = 100;
const urgentActions = new Set(["die", "destroy", "oom", "node-unreachable", "node-ready"]);

export function createPodGroupController(opts: PodGroupControllerOptions): PodGroupController {
  const clock = opts.clock ?? realClock;
  const log = (opts.log ?? silentLogger).child({ component: "podgroup" });
  const registry = opts.registry ?? new Registry();
  const keys = layout(opts.prefix);
  const updateWaitMs = opts.updateWaitMs ?? 10_000;
  const refreshIntervalMs = opts.refreshIntervalMs ?? 30_000;
  if (!(updateWaitMs >= 0)) throw new RangeError(`updateWaitMs must be >= 0 (got ${updateWaitMs})`);
  if (!(refreshIntervalMs > 0)) throw new RangeError(`refreshIntervalMs must be > 0 (got ${refreshIntervalMs})`);
  const backoff = restartBackoff(opts.restartBackoff);

  const specs =
    sharedInformer(opts.shared?.specs, keys.podGroups) ??
    new Informer({ name: "podgroup-specs", source: opts.store, prefix: keys.podGroups, decode: decodeSpec, clock, log, registry });
  const statuses =
    sharedInformer(opts.shared?.statuses, keys.status) ??
    new Informer({ name: "podgroup-status", source: opts.store, prefix: keys.status, decode: decodeStatus, clock, log, registry });
  const tasks = new Informer({ name: "orchestrator-tasks", source: opts.store, prefix: keys.tasks, decode: decodeTask, clock, log, registry });
  const markerPrefix = opts.secretMarkerPrefix ?? defaultSecretMarkerPrefix;
  const markers = new Informer({
    name: "podgroup-secret-markers",
    source: opts.store,
    prefix: markerPrefix.endsWith("/") ? markerPrefix : `${markerPrefix}/`,
    decode: decodeSecretMarker,
    clock,
    log,
    registry,
  });
  const cache = new ContainerCache({
    cluster: opts.cluster,
    name: "podgroup-containers",
    labelFilter: [labelKeys.podGroup],
    indexLabels: [labelKeys.podGroup],
    clock,
    log,
    registry,
  });
  // Dependency pods, only for their reservations in placement (dependency-reservations.ts).
  const dependencyCache = new ContainerCache({
    cluster: opts.cluster,
    name: "podgroup-dependency-containers",
    labelFilter: [dependencyLabel],
    indexLabels: [dependencyLabel],
    clock,
    log,
    registry,
  });
  const nodes = new NodeView(opts.cluster, cache, clock);
  const passes = new PassesInFlight();
  const images = opts.imagePuller ?? new ImagePuller({ cluster: opts.cluster, log });
  const reconciler = new PodGroupReconciler({
    store: opts.store,
    cluster: opts.cluster,
    cache,
    nodes,
    specs,
    statuses,
    tasks,
    passes,
    dependencyReservations: new DependencyReservations(dependencyCache, opts.cluster, log),
    secretMarker: (id) => markers.get(`${markers.prefix}${id}`),
    images,
    layout: keys,
    updateWaitMs,
    refreshIntervalMs,
    backoff,
    now: opts.now ?? Date.now,
    random: Math.random,
    deployConcurrency: 16,
    removeConcurrency: 8,
    maxDeploysPerPass: 64,
    events: new PodGroupEvents(opts.events),
  });

  const controller = new Controller({
    name: "podgroup",
    reconcile: reconciler.reconcile,
    watches: [
      informerSource(specs, (e) => [e.name]),
      // Initial adds: the specs informer already enqueues every group.
      statusSource(statuses, (name) => reconciler.lastStatusRevision(name), { name: "status:podgroup-status", initialList: false }),
      taskSource(tasks, cache, statuses),
      // A marker is written for a created container that waits for it: start it now.
      informerSource(markers, (e) => (e.podGroup !== undefined ? [e.podGroup] : [])),
      cache.source(
        (c) => {
          const g = c.labels[labelKeys.podGroup];
          return g ? [g] : [];
        },
        (change) => (urgentActions.has(change.action) ? highPriority : 0),
      ),
    ],
    maxConcurrentReconciles: opts.workers ?? 8,
    reconcileTimeoutMs: opts.reconcileTimeoutMs ?? 300_000,
    clock,
    log,
    registry,
  });

  const drift = new DriftTaskReconciler({ store: opts.store, cache, specs, statuses, tasks, passes, layout: keys });
  const driftController = new Controller({
    name: "podgroup-drift",
    reconcile: drift.reconcile,
    watches: [informerSource(tasks, (e, key) => (e.task?.kind === "drift" ? [key] : []))],
    maxConcurrentReconciles: 2,
    reconcileTimeoutMs: 30_000,
    clock,
    log,
    registry,
  });

  return {
    informers: [specs, statuses, tasks, markers].filter((i) => i !== opts.shared?.specs && i !== opts.shared?.statuses) as Informer<unknown>[],
    runnables: [cache, dependencyCache, ...(opts.imagePuller ? [] : [images]), controller, driftController],
    cache,
    controller,
    driftController,
  };
}

/** A given informer, checked to cache `prefix` (a shared informer of another root would be a silent mix-up). */
function sharedInformer<T>(informer: Informer<T> | undefined, prefix: string): Informer<T> | undefined {
  if (informer !== undefined && informer.prefix !== prefix) {
    throw new RangeError(`shared informer ${informer.name} caches ${informer.prefix}, not ${prefix}`);
  }
  return informer;
}

/**
 * Refresh tasks enqueue their group at high priority (its reconcile deletes them when done). Drift
 * tasks enqueue the group they name, or else every group with a container on `from` or a pod its
 * status places there: only those can have something to move. (Every group's pass also reads the pending drift tasks, so a group
 * enqueued for any other reason carries them out as well.)
 */
function taskSource(tasks: Informer<TaskEntry>, cache: ContainerCache, statuses: Informer<StatusEntry>): Source {
  let unregister: (() => void) | undefined;
  return {
    name: "tasks:podgroup",
    start(enqueue) {
      unregister?.();
      const on = (e: TaskEntry) => {
        const t = e.task;
        if (t?.kind === "refresh") enqueue(t.podGroup, { priority: highPriority });
        if (t?.kind !== "drift") return;
        if (t.podGroup !== undefined) return enqueue(t.podGroup, { priority: highPriority });
        const groups = new Set<string>();
        for (const c of cache.list()) {
          const g = c.labels[labelKeys.podGroup];
          if (c.node === t.from && g !== undefined) groups.add(g);
        }
        // ...or a pod its status places on `from` (the cache has nothing of a node unreachable since start).
        for (const s of statuses.list()) if (s.status?.pods.some((p) => p.node === t.from && p.containers.length > 0)) groups.add(s.name);
        for (const g of groups) enqueue(g, { priority: highPriority });
      };
      unregister = tasks.addEventHandler({ onAdd: on, onUpdate: (_old, e) => on(e) });
    },
    stop() {
      unregister?.();
      unregister = undefined;
    },
    waitForSync: (signal, timeoutMs) => tasks.waitForSync(signal, timeoutMs),
  };
}
