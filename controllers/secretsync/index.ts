// The Secret-sync controller, assembled: two informers (PodGroup specs, installed markers), one
// secret watch per group that lists secret files (proc-watches.ts), a container watch cache, and
// the Controller running SecretSyncReconciler. It runs in
// the secrets process (it needs the unsealed vault) as a leader-only runnable; its marker writes
// go through the fenced store.
//
// What enqueues what (reconciler.ts explains the keys):
//   spec of a group changed              -> group/<name>
//   a secret of proc P written/deleted   -> group/P (the proc is the PodGroup name); watched only
//                                           while the cached spec of P lists secret files
//   a container created/started/died... -> group/<its podgroup label>, marker/<id>
//   a marker written                     -> marker/<id> (collected if its container is gone, which
//                                           also covers a container removed during the upload)
//   a marker deleted by someone else     -> group/<its podgroup> (rewritten)
//   the vault unsealed                   -> group/<name> for every group that lists secrets
import { Registry } from "prom-client";
import { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import type { Cluster } from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { Controller } from "../../runtime/controller.ts";
import { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { informerSource, lowPriority, type Source } from "../../runtime/source.ts";
import { decodeMarker, defaultMarkerPrefix, type MarkerEntry } from "./marker.ts";
import { SecretSyncReconciler, groupKey, markerGcKey, podGroupLabel } from "./reconciler.ts";
import { ProcSecretWatches } from "./proc-watches.ts";
import { decodeSpec, defaultPodGroupPrefix, listsSecrets, type SpecEntry } from "./specs.ts";
import type { ReadSecrets, SyncVault } from "./vault.ts";

export type { SecretFileRecord, SyncVault, ReadSecrets } from "./vault.ts";
export type { Marker, InstalledFile } from "./marker.ts";
export { defaultMarkerPrefix, digestOf } from "./marker.ts";
export { appDirectory, resolveSecretPath } from "./files.ts";

export const defaultSecretsPrefix = "/platform/secrets/";

export interface SecretSyncControllerOptions<V extends SyncVault> {
  /** The FENCED store: marker writes must be refused once this process is not the leader. */
  store: Store;
  cluster: Cluster;
  vault: V;
  /** api/secrets' readSecrets; called as readSecrets(store, vault, app, proc). */
  readSecrets: ReadSecrets<Store, V>;
  /** PodGroup specs (default /platform/orchestrator/podgroups/). */
  podGroupPrefix?: string;
  /** Secret records, watched for changes only, per listed proc (default /platform/secrets/). */
  secretsPrefix?: string;
  /** Installed markers (default /platform/secret-sync/installed/); tests use a unique one. */
  markerPrefix?: string;
  /** Groups reconciled at once (default 4). */
  workers?: number;
  /** Containers of one group installed at once (default 8). */
  installConcurrency?: number;
  /** Bound of one readSecrets call (default 10 s). */
  callTimeoutMs?: number;
  clock?: Clock;
  /** Wall clock for the markers' `at` (default Date.now). */
  now?: () => number;
  log?: Logger;
  registry?: Registry;
}

export interface SecretSyncController {
  /** Add each with manager.addInformer(). */
  informers: Informer<unknown>[];
  /** Add each with manager.add() as leader-only: the container cache, then the controller. */
  runnables: Runnable[];
  cache: ContainerCache;
  controller: Controller;
}

function withSlash(p: string): string {
  return p.endsWith("/") ? p : `${p}/`;
}

export function createSecretSyncController<V extends SyncVault>(opts: SecretSyncControllerOptions<V>): SecretSyncController {
  const clock = opts.clock ?? realClock;
  const log = (opts.log ?? silentLogger).child({ component: "secretsync" });
  const registry = opts.registry ?? new Registry();
  const specPrefix = withSlash(opts.podGroupPrefix ?? defaultPodGroupPrefix);
  const secretsPrefix = withSlash(opts.secretsPrefix ?? defaultSecretsPrefix);
  const markerPrefix = withSlash(opts.markerPrefix ?? defaultMarkerPrefix);
  const callTimeoutMs = opts.callTimeoutMs ?? 10_000;
  const installConcurrency = opts.installConcurrency ?? 8;
  if (!(callTimeoutMs > 0)) throw new RangeError(`callTimeoutMs must be > 0 (got ${callTimeoutMs})`);
  if (!(Number.isInteger(installConcurrency) && installConcurrency >= 1)) throw new RangeError("installConcurrency must be an integer >= 1");

  const specs = new Informer({ name: "secretsync-podgroups", source: opts.store, prefix: specPrefix, decode: decodeSpec, clock, log, registry });
  // Only which proc changed matters here, never a record's value; and only for listed procs.
  const secrets = new ProcSecretWatches({ store: opts.store, specs, secretsPrefix, retryMs: 1_000, clock, log });
  const markers = new Informer({ name: "secretsync-markers", source: opts.store, prefix: markerPrefix, decode: decodeMarker, clock, log, registry });
  const cache = new ContainerCache({
    cluster: opts.cluster,
    name: "secretsync-containers",
    labelFilter: [podGroupLabel],
    indexLabels: [podGroupLabel],
    clock,
    log,
    registry,
  });
  const reconciler = new SecretSyncReconciler({
    store: opts.store,
    cluster: opts.cluster,
    cache,
    specs,
    markers,
    vault: opts.vault,
    readSecrets: (app, proc) => opts.readSecrets(opts.store, opts.vault, app, proc),
    specKey: (name) => `${specPrefix}${name}`,
    markerKey: (id) => `${markerPrefix}${id}`,
    callTimeoutMs,
    installConcurrency,
    unknownNodeRecheckMs: 30_000,
    clock,
    now: opts.now ?? Date.now,
  });

  const controller = new Controller({
    name: "secretsync",
    reconcile: reconciler.reconcile,
    watches: [
      informerSource(specs, (e) => (listsSecrets(e) ? [groupKey(e.name)] : [])),
      secrets,
      markerSource(markers),
      cache.source((c) => {
        const g = c.labels[podGroupLabel];
        return g ? [groupKey(g), markerGcKey(c.id)] : [markerGcKey(c.id)];
      }),
      unsealSource(opts.vault, specs),
    ],
    maxConcurrentReconciles: opts.workers ?? 4,
    reconcileTimeoutMs: 60_000,
    clock,
    log,
    registry,
  });

  return { informers: [specs, markers] as Informer<unknown>[], runnables: [cache, controller], cache, controller };
}

/** Written or listed markers are checked for collection; a deleted one has its group rewrite it. */
function markerSource(markers: Informer<MarkerEntry>): Source {
  let unregister: (() => void) | undefined;
  return {
    name: "markers:secretsync",
    start(enqueue) {
      unregister?.();
      unregister = markers.addEventHandler({
        onAdd: (e, _key, meta) => enqueue(markerGcKey(e.containerId), { priority: meta.isInInitialList ? lowPriority : 0 }),
        onUpdate: (_old, e) => enqueue(markerGcKey(e.containerId)),
        onDelete: (e) => {
          if (e.marker) enqueue(groupKey(e.marker.podGroup));
        },
      });
    },
    stop() {
      unregister?.();
      unregister = undefined;
    },
    waitForSync: (signal, timeoutMs) => markers.waitForSync(signal, timeoutMs),
  };
}

/** S1: what was skipped while sealed is enqueued again the moment the vault opens. */
function unsealSource(vault: SyncVault, specs: Informer<SpecEntry>): Source {
  let unregister: (() => void) | undefined;
  return {
    name: "vault:secretsync",
    start(enqueue) {
      unregister?.();
      unregister = vault.onUnseal(() => {
        for (const e of specs.list()) if (listsSecrets(e)) enqueue(groupKey(e.name));
      });
    },
    stop() {
      unregister?.();
      unregister = undefined;
    },
  };
}
