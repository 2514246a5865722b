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
import type { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import { Controller } from "../../runtime/controller.ts";
import { Informer } from "../../runtime/informer.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { informerSource, type Source } from "../../runtime/source.ts";
import { labelKeys } from "./naming.ts";
import { DependencyReservations, dependencyLabel } from "./dependency-reservations.ts";
import { NodeView } from "./nodes.ts";
import { PassesInFlight } from "./passes.ts";
import { DriftTaskReconciler } from "./drift-tasks.ts";
import { PodGroupReconciler } from "./reconciler.ts";
import { PodGroupEvents } from "./events.ts";
import {
  highPriority,
  labelledContainerCache,
  labelledContainerSource,
  ownInformers,
  podControllerSettings,
  sharedInformer,
  type PodControllerOptions,
} from "../shared/controller-wiring.ts";
import { ImagePuller } from "../shared/image-pull.ts";
import { statusSource } from "../shared/status-records.ts";
import { decodeSealStatus, decodeSecretMarker, defaultSecretMarkerPrefix, sealStatusPrefixOf, withSealState } from "./secret-marker.ts";
import { decodeSpec, decodeStatus, decodeTask, layout, type SpecEntry, type StatusEntry, type TaskEntry } from "./stored.ts";

export interface PodGroupControllerOptions extends PodControllerOptions {
  /** Groups reconciled at once (8). */
  workers?: number;
  /** Where Secret-sync writes its installed markers (default /platform/secret-sync/installed/). */
  secretMarkerPrefix?: string;
  /**
   * Informers of the specs (`podgroups/`) and statuses (`podgroup-status/`) under the same root
   * that this process runs for other readers too (cli/orchestrator.ts runs one per prefix for the
   * API and both controllers); each absent one the controller makes itself. Given ones are not in
   * `informers`: whoever made them adds them to the manager.
   */
  shared?: { specs?: Informer<SpecEntry>; statuses?: Informer<StatusEntry> };
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
  /** Passes of a group finished so far (PodGroupReconciler.passesFinished), for tests and diagnostics. */
  passesFinished(name: string): number;
}

export function createPodGroupController(opts: PodGroupControllerOptions): PodGroupController {
  const settings = podControllerSettings(opts, "podgroup");
  const { clock, log, registry } = settings;
  const keys = layout(opts.prefix);

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
  // The secrets leader's seal state: a group waiting for its files while sealed says so (a waiting
  // group is looked at again every few seconds, so its status follows without a watch of its own).
  const seal = new Informer({ name: "podgroup-secrets-seal", source: opts.store, prefix: sealStatusPrefixOf(markerPrefix), decode: decodeSealStatus, clock, log, registry });
  const sealed = () => seal.list().some((s) => s.sealed);
  const cache = labelledContainerCache(opts.cluster, "podgroup-containers", labelKeys.podGroup, settings);
  // Dependency pods, only for their reservations in placement (dependency-reservations.ts).
  const dependencyCache = labelledContainerCache(opts.cluster, "podgroup-dependency-containers", dependencyLabel, settings);
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
    secretMarker: (id) => withSealState(markers.get(`${markers.prefix}${id}`), id, sealed()),
    images,
    layout: keys,
    updateWaitMs: settings.updateWaitMs,
    refreshIntervalMs: settings.refreshIntervalMs,
    backoff: settings.backoff,
    now: settings.now,
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
      statusSource(statuses, (name) => reconciler.lastStatusRevision(name), { name: "status:podgroup-status", initialList: false, inFlight: reconciler.statusWrites }),
      taskSource(tasks, cache, statuses),
      // A marker is written for a created container that waits for it: start it now.
      informerSource(markers, (e) => (e.podGroup !== undefined ? [e.podGroup] : [])),
      labelledContainerSource(cache, labelKeys.podGroup),
    ],
    maxConcurrentReconciles: opts.workers ?? 8,
    reconcileTimeoutMs: settings.reconcileTimeoutMs,
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
    informers: ownInformers([specs, statuses, tasks, markers, seal], [opts.shared?.specs, opts.shared?.statuses]),
    runnables: [cache, dependencyCache, ...(opts.imagePuller ? [] : [images]), controller, driftController],
    cache,
    controller,
    driftController,
    passesFinished: (name) => reconciler.passesFinished(name),
  };
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
