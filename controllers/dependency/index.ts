// The Dependency controller, assembled: four informers (dependency specs and statuses, PodGroup
// specs and statuses), the reference index over the PodGroup ones, the container watch cache of
// dependency containers, and the Controller that runs DependencyReconciler over them.
//
// What enqueues a dependency (the key is its name):
//   - its spec changed (AddSpec, UpdateSpec, RemoveSpec);
//   - its status was changed by someone else (our own writes are recognised and skipped);
//   - its reference counts changed: a PodGroup instance that lists it got a node and containers,
//     or lost them (the add and remove events of docs/dependencies.md, derived from the store);
//   - one of its containers changed on an engine (die, destroy and oom at a high priority), or
//     its node came or went;
//   - its own requeueAfter: the periodic refresh (refreshIntervalMs, +-10 % jitter; a refresh
//     while referenced is the verify event), a GC time, the update wait or a restart back-off.
import type { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import { DependencyEvents } from "./events.ts";
import { dependencyLayout } from "../../api/resources/dependency.ts";
import { Controller } from "../../runtime/controller.ts";
import { Informer } from "../../runtime/informer.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { informerSource } from "../../runtime/source.ts";
import { labelKeys } from "./naming.ts";
import {
  labelledContainerCache,
  labelledContainerSource,
  ownInformers,
  podControllerSettings,
  sharedInformer,
  type PodControllerOptions,
} from "../shared/controller-wiring.ts";
import { ImagePuller } from "../shared/image-pull.ts";
import { statusSource } from "../shared/status-records.ts";
import { DependencyReconciler, type PassCounts } from "./reconciler.ts";
import { ReferenceIndex, referenceSource } from "./reference-index.ts";
import { decodeGroupSpec, decodeGroupStatus, decodeSpec, decodeStatus, type GroupSpecEntry, type GroupStatusEntry } from "./stored.ts";

export interface DependencyControllerOptions extends PodControllerOptions {
  /** Unreferenced pods are reclaimed after this long (-depends-gc; 5 min). */
  gcMs?: number;
  /** Dependencies reconciled at once (4). */
  workers?: number;
  /**
   * Informers of the PodGroup specs (`podgroups/`) and statuses (`podgroup-status/`) under the same
   * root that this process runs for other readers too (cli/orchestrator.ts runs one per prefix for
   * the API and both controllers); each absent one the controller makes itself. Given ones are not
   * in `informers`: whoever made them adds them to the manager.
   */
  shared?: { podGroups?: Informer<GroupSpecEntry>; podGroupStatuses?: Informer<GroupStatusEntry> };
}

export interface DependencyController {
  /** Add each with manager.addInformer() (the shared ones are not here). */
  informers: Informer<unknown>[];
  /** Add each with manager.add(): the container cache, the image puller (unless given), then the controller. */
  runnables: Runnable[];
  cache: ContainerCache;
  controller: Controller;
  references: ReferenceIndex;
  /** How many passes of dependency `name` ended since start, and when the last one began (for tests that wait for one). */
  passes: (name: string) => PassCounts;
}

export function createDependencyController(opts: DependencyControllerOptions): DependencyController {
  const gcMs = opts.gcMs ?? 300_000;
  if (!(gcMs >= 0)) throw new RangeError(`gcMs must be >= 0 (got ${gcMs})`);
  const settings = podControllerSettings(opts, "dependency");
  const { clock, log, registry } = settings;
  const layout = dependencyLayout(opts.prefix);

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
  const cache = labelledContainerCache(opts.cluster, "dependency-containers", labelKeys.dependency, settings);
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
    updateWaitMs: settings.updateWaitMs,
    refreshIntervalMs: settings.refreshIntervalMs,
    backoff: settings.backoff,
    now: settings.now,
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
      informerSource(specs, (entry) => [entry.name]),
      // A status without a spec (an interrupted removal) must be finished too: initial list included.
      statusSource(statuses, (name) => reconciler.lastStatusRevision(name), { name: "status:dependency-status", initialList: true, inFlight: reconciler.statusWrites }),
      referenceSource(references, groups, groupStatuses),
      labelledContainerSource(cache, labelKeys.dependency),
    ],
    maxConcurrentReconciles: opts.workers ?? 4,
    reconcileTimeoutMs: settings.reconcileTimeoutMs,
    clock,
    log,
    registry,
  });
  return {
    informers: ownInformers([specs, statuses, groups, groupStatuses], [opts.shared?.podGroups, opts.shared?.podGroupStatuses]),
    runnables: [cache, ...(opts.imagePuller ? [] : [images]), controller],
    cache,
    controller,
    references,
    passes: (name) => reconciler.passes(name),
  };
}
