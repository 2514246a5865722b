// What assembling a pod controller (controllers/podgroup/index.ts, controllers/dependency/index.ts)
// takes the same way: the options both accept, their defaults and checks, a shared informer's
// check, and the container watch cache of the controller's own containers with the Source that
// enqueues a pod's key when one of them changes.
//
// Invariants, kept here:
// - a controller selects its containers with the SAME label it creates them with: the cache's
//   subscription, its relists, its index and the source's mapping all use `label`;
// - a shared informer must cache the prefix the controller would have cached itself (a shared
//   informer of another root would be a silent mix-up);
// - a container's die, destroy or oom, and a node coming or going, enqueue at a high priority, so
//   a repair starts within the event's round trip, ahead of routine refreshes.
import { Registry } from "prom-client";
import { ContainerCache, type ContainerChange } from "../../adapters/cluster/container-cache.ts";
import type { Cluster } from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import type { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { Source } from "../../runtime/source.ts";
import { restartBackoff, type RestartBackoff } from "./backoff.ts";
import type { EventSink } from "./events.ts";
import type { ImagePuller } from "./image-pull.ts";

/** The options every pod controller takes. */
export interface PodControllerOptions {
  /** The FENCED store: every write of the controller must be refused once it is not the leader. */
  store: Store;
  cluster: Cluster;
  /** Wait between removing a pod and deploying its new version on an update (-update-wait; 10 s). */
  updateWaitMs?: number;
  /** Periodic refresh of every key, jittered +-10 % (-refresh-interval; 30 s). */
  refreshIntervalMs?: number;
  /** Restart back-off: 1 s doubling to 5 min, reset after 10 min of running. */
  restartBackoff?: Partial<RestartBackoff>;
  /** Root of the key layout (default /platform/orchestrator/); tests use a unique root. */
  prefix?: string;
  /** Upper bound of one reconcile (default 5 min: a stop may take the pod's killTimeout). */
  reconcileTimeoutMs?: number;
  clock?: Clock;
  /** Wall clock for times kept in the store (restart back-off, rollout step, ...); default Date.now. */
  now?: () => number;
  log?: Logger;
  registry?: Registry;
  /**
   * Pulls missing images before pods are created (cli/orchestrator.ts shares one between the
   * controllers). Absent: one of the controller's own, anonymous, in `runnables`; a given one is
   * run by whoever made it.
   */
  imagePuller?: ImagePuller;
  /** Where the controller records events (an EventRecorder on the fenced store; docs/events.md). Absent: none. */
  events?: EventSink;
}

/** What every pod controller's reconciler is given (each adds its own). */
export interface PodReconcilerBase {
  store: Store;
  cluster: Cluster;
  /** The watch cache of the controller's own containers (labelledContainerCache). */
  cache: ContainerCache;
  /** Wait between removing a pod and deploying its new version (-update-wait). */
  updateWaitMs: number;
  refreshIntervalMs: number;
  backoff: RestartBackoff;
  /** Wall clock (ms since the epoch): persisted times must mean the same after a restart. */
  now: () => number;
  /** Jitter of the periodic refresh. */
  random: () => number;
  /** Pulls missing images before a pod is created. */
  images: Pick<ImagePuller, "ensureImages">;
}

/** The options with their defaults applied and checked. */
export interface PodControllerSettings {
  clock: Clock;
  /** The given logger's child for `component`. */
  log: Logger;
  registry: Registry;
  updateWaitMs: number;
  refreshIntervalMs: number;
  backoff: RestartBackoff;
  now: () => number;
  reconcileTimeoutMs: number;
}

/** Defaults and checks of the common options; a RangeError names the first bad one. */
export function podControllerSettings(opts: PodControllerOptions, component: string): PodControllerSettings {
  const updateWaitMs = opts.updateWaitMs ?? 10_000;
  const refreshIntervalMs = opts.refreshIntervalMs ?? 30_000;
  if (!(updateWaitMs >= 0)) throw new RangeError(`updateWaitMs must be >= 0 (got ${updateWaitMs})`);
  if (!(refreshIntervalMs > 0)) throw new RangeError(`refreshIntervalMs must be > 0 (got ${refreshIntervalMs})`);
  return {
    clock: opts.clock ?? realClock,
    log: (opts.log ?? silentLogger).child({ component }),
    registry: opts.registry ?? new Registry(),
    updateWaitMs,
    refreshIntervalMs,
    backoff: restartBackoff(opts.restartBackoff),
    now: opts.now ?? Date.now,
    reconcileTimeoutMs: opts.reconcileTimeoutMs ?? 300_000,
  };
}

/** A given informer, checked to cache `prefix`; undefined when none is given. */
export function sharedInformer<T>(informer: Informer<T> | undefined, prefix: string): Informer<T> | undefined {
  if (informer !== undefined && informer.prefix !== prefix) {
    throw new RangeError(`shared informer ${informer.name} caches ${informer.prefix}, not ${prefix}`);
  }
  return informer;
}

/** Priority of keys from container deaths and node changes (and, in the PodGroup controller, refresh tasks). */
export const highPriority = 100;
/** Container cache actions that enqueue at highPriority. */
export const urgentActions: ReadonlySet<string> = new Set(["die", "destroy", "oom", "node-unreachable", "node-ready"]);

/** The priority of a container change: high for urgentActions, else 0. */
export function changePriority(change: ContainerChange): number {
  return urgentActions.has(change.action) ? highPriority : 0;
}

/** The watch cache of the containers labelled `label` (any value), indexed by it. */
export function labelledContainerCache(
  cluster: Cluster,
  name: string,
  label: string,
  settings: Pick<PodControllerSettings, "clock" | "log" | "registry">,
): ContainerCache {
  return new ContainerCache({ cluster, name, labelFilter: [label], indexLabels: [label], clock: settings.clock, log: settings.log, registry: settings.registry });
}

/** A Source enqueueing the value of `label` of every container that changes, at changePriority. */
export function labelledContainerSource(cache: ContainerCache, label: string): Source {
  return cache.source(
    (container) => {
      const key = container.labels[label];
      return key ? [key] : [];
    },
    changePriority,
  );
}

/** The controller's informers without the shared ones (whoever made those adds them to the manager). */
export function ownInformers(all: readonly object[], shared: readonly unknown[]): Informer<unknown>[] {
  return all.filter((informer) => !shared.includes(informer)) as Informer<unknown>[];
}
