// The orchestrator's assembly: its API, informers, node monitor and PodGroup controller put on a
// process's manager. `capstan orchestrator` and `capstan up` both install it through here, so the
// two run the same orchestrator.
//
// Writes: the API writes desired state through the plain store (any replica accepts requests, as
// every write is a compare-and-swap); the controller and the node monitor run on the leader only
// and write through the fenced store, so a deposed leader's late write is refused by the store.
//
// Image pulls: one ImagePuller serves both controllers (a node pulls an image once, however many
// pods wait for it). Images of the platform's registry (-registry-host) are pulled with a registry
// token that may pull their repository and nothing else, which this process gets from the console's
// token endpoint (the realm published in the store) with the console access token in
// -registry-token-file as the token's user (looked up like any caller's token, in the store). The
// engines get only that short-lived token; the access token stays in this process
// (controllers/shared/registry-credentials.ts). Every other image is pulled anonymously.
//
// Informers: one per prefix in the process. The PodGroup specs and statuses are read by the API and
// by both controllers, so one informer of each receives and parses every value once and decodes it
// for all three readers (SharedSpec, SharedStatus); the API reads them through InformerViews.
import { rootCertificates } from "node:tls";
import type { Registry } from "prom-client";
import { Agent } from "undici";
import { fencedStore } from "../adapters/store/fenced.ts";
import type { Store } from "../adapters/store/store.ts";
import { cachedStatusOf, InformerView, nodesInformer, storedPodGroupOf, type CachedStatus } from "../api/orchestrator/informers.ts";
import { createDependsApi } from "../api/orchestrator/depends.ts";
import { dependencyInformers } from "../api/orchestrator/dependency-demand.ts";
import { createNodesApi } from "../api/orchestrator/nodes.ts";
import { nodesRecorded } from "../api/orchestrator/node-readiness.ts";
import { createPodGroupApi } from "../api/orchestrator/podgroups.ts";
import { createEventsApi, decodeEvent } from "../api/orchestrator/events.ts";
import type { EventRecord } from "../api/resources/event.ts";
import { EventRecorder } from "../controllers/shared/events.ts";
import { EventPruner } from "../controllers/shared/event-pruner.ts";
import { createNotifyController } from "../controllers/notify/index.ts";
import { createNotifyApi } from "../api/orchestrator/notify.ts";
import { keys } from "../api/resources/keys.ts";
import type { StoredPodGroup } from "../api/resources/podgroup.ts";
import { createDependencyController } from "../controllers/dependency/index.ts";
import { groupSpecOf, groupStatusOf, type GroupSpecEntry, type GroupStatusEntry } from "../controllers/dependency/stored.ts";
import { createNodeMonitor } from "../controllers/node/monitor.ts";
import { createPodGroupController } from "../controllers/podgroup/index.ts";
import { readRegistryAuthConfig } from "../api/resources/registry-auth.ts";
import { ImagePuller } from "../controllers/shared/image-pull.ts";
import { consoleTokenFile, platformRegistryCredentials } from "../controllers/shared/registry-credentials.ts";
import { specOf, statusOf, type ParsedValue, type SpecEntry, type StatusEntry } from "../controllers/podgroup/stored.ts";
import { Informer } from "../runtime/informer.ts";
import type { KeyValueLike } from "../runtime/listwatch.ts";
import { silentLogger, type Logger } from "../runtime/log.ts";
import type { OrchestratorSettings } from "./orchestrator-options.ts";
import type { ServeContext } from "./serve.ts";

/** The orchestrator's leader key: processes running its controllers against one store share it. */
export const orchestratorLeaderKey = keys.leader;

export function installOrchestrator(ctx: ServeContext, settings: OrchestratorSettings): void {
  const { store, cluster, manager, elector, log, access } = ctx;
  if (!cluster) throw new Error("the orchestrator needs -cluster");
  const registry = manager.registry;
  const fenced = fencedStore(store, () => elector.fence());

  const nodes = nodesInformer(store, { log, registry });
  const { specs, statuses } = sharedPodGroupInformers(store, log, registry);
  manager.addInformer(nodes).addInformer(specs).addInformer(statuses);
  const podGroups = new InformerView(specs, (e) => e.api);
  const podGroupStatuses = new InformerView(statuses, (e) => e.api);
  // The dependency definitions and statuses, for the feasibility check's dependency pods.
  const dependencyCaches = dependencyInformers(store, { log, registry });
  manager.addInformer(dependencyCaches.specs).addInformer(dependencyCaches.statuses);
  manager.app.route("/", createPodGroupApi({ store, nodes, podGroups, podGroupStatuses, log, access, cluster, dependencies: dependencyCaches }));
  manager.app.route("/", createDependsApi({ store, nodes, log, access }));
  manager.app.route("/", createNodesApi({ store, nodes, podGroups, log, access }));
  // Ready only once GET /api/nodes lists every engine of -cluster (api/orchestrator/node-readiness.ts):
  // on a fresh store the records come from the leader's node monitor, after the informers sync.
  // The names are the spec's: no engine call, so a hanging engine cannot hold readiness back.
  const clusterNodes = cluster.nodeNames;
  manager.addReadinessCheck("node-records", () => nodesRecorded(nodes, clusterNodes));

  // Events (docs/events.md): recorded by the leader's controllers through the fenced store, pruned
  // by the leader, read by every replica's API from its informer.
  const eventInformer = new Informer<EventRecord>({ name: "events", source: store, prefix: keys.events, decode: decodeEvent, log, registry });
  manager.addInformer(eventInformer);
  manager.app.route("/", createEventsApi({ events: eventInformer, log, access }));
  const events = new EventRecorder({ store: fenced, log, registry });
  manager.add(new EventPruner({ store: fenced, ...(settings.eventTtlMs !== undefined && { ttlMs: settings.eventTtlMs }), log }));
  // Notify channels (docs/notify.md): the API on every replica, the notifier on the leader.
  manager.app.route("/", createNotifyApi({ store, log, access }));
  const notify = createNotifyController({ store, fenced, events: eventInformer, recorder: events, log, registry });
  for (const informer of notify.informers) manager.addInformer(informer);
  manager.add(notify.notifier);

  manager.add(createNodeMonitor({ store: fenced, cluster, nodeTimeoutMs: settings.nodeTimeoutMs, log, registry, events }));
  const { registryHost, registryTokenFile, registryCa, registryRealm } = settings;
  const credentials =
    registryHost !== undefined && registryTokenFile !== undefined
      ? platformRegistryCredentials({
          host: registryHost,
          accessToken: consoleTokenFile(registryTokenFile, async (token) => (await ctx.verifier.verify(token)).user),
          authConfig: () => readRegistryAuthConfig(store),
          ...(registryRealm !== undefined && { realm: registryRealm }),
          ...(registryCa !== undefined && { dispatcher: new Agent({ connect: { ca: [...rootCertificates, registryCa] } }) }),
        })
      : undefined;
  if (credentials) {
    log.info(
      { registry: registryHost, tokenFile: registryTokenFile, ...(registryRealm !== undefined && { realm: registryRealm }) },
      "images of the platform registry are pulled with pull-only registry tokens this process gets for the service identity",
    );
  }
  const imagePuller = new ImagePuller({ cluster, ...(credentials && { credentials }), log });
  manager.add(imagePuller);
  const controller = createPodGroupController({
    store: fenced,
    cluster,
    updateWaitMs: settings.updateWaitMs,
    refreshIntervalMs: settings.refreshIntervalMs,
    workers: settings.workers,
    log,
    registry,
    shared: { specs, statuses },
    imagePuller,
    events,
  });
  for (const informer of controller.informers) manager.addInformer(informer);
  for (const runnable of controller.runnables) manager.add(runnable);

  const dependencies = createDependencyController({
    store: fenced,
    cluster,
    gcMs: settings.dependsGcMs,
    updateWaitMs: settings.updateWaitMs,
    refreshIntervalMs: settings.refreshIntervalMs,
    log,
    registry,
    shared: { podGroups: specs, podGroupStatuses: statuses },
    imagePuller,
    events,
  });
  for (const informer of dependencies.informers) manager.addInformer(informer);
  for (const runnable of dependencies.runnables) manager.add(runnable);
}

/**
 * A stored PodGroup spec as each of its readers decodes it, from one JSON.parse: the PodGroup
 * controller's entry (its fields: a spec that fails the schema is kept as `invalid`, never left
 * out), the Dependency controller's (namespace, version, dependencies) and the API's record
 * (`api`, the parsed value itself; undefined where the API's own decode would leave it out).
 */
export interface SharedSpec extends SpecEntry, GroupSpecEntry {
  api: StoredPodGroup | undefined;
}

/** A stored PodGroup status as each of its readers decodes it, from one JSON.parse (see SharedSpec). */
export interface SharedStatus extends StatusEntry, GroupStatusEntry {
  api: CachedStatus;
}

/**
 * The informers of PodGroup specs and statuses, named as the API's ("podgroups", "podgroup-status")
 * in logs and metrics. Decoding never throws, so nothing is left out of them: each reader's own
 * rules decide what it sees (the API's view leaves out what decodeStoredPodGroup rejects, and says so
 * in the log as its informer did).
 */
export function sharedPodGroupInformers(
  store: Store,
  log: Logger = silentLogger,
  registry?: Registry,
): { specs: Informer<SharedSpec>; statuses: Informer<SharedStatus> } {
  const specLog = log.child({ informer: "podgroups" });
  return {
    specs: new Informer<SharedSpec>({
      name: "podgroups",
      source: store,
      prefix: keys.podGroups,
      decode: (kv) => decodeSharedSpec(kv, specLog),
      log,
      ...(registry && { registry }),
    }),
    statuses: new Informer<SharedStatus>({
      name: "podgroup-status",
      source: store,
      prefix: keys.podGroupStatus,
      decode: decodeSharedStatus,
      log,
      ...(registry && { registry }),
    }),
  };
}

export function decodeSharedSpec(kv: KeyValueLike, log: Logger = silentLogger): SharedSpec {
  const parsed = parse(kv.value);
  const json = "json" in parsed ? parsed.json : undefined;
  let api: StoredPodGroup | undefined;
  try {
    if ("error" in parsed) throw new SyntaxError(parsed.error);
    api = storedPodGroupOf(kv.key, json);
  } catch (e) {
    log.warn({ err: e, key: kv.key, modRevision: kv.modRevision }, "value does not decode; left out of the API's cache");
  }
  return { ...specOf(kv, parsed), ...groupSpecOf(kv.key, json), api };
}

export function decodeSharedStatus(kv: KeyValueLike): SharedStatus {
  const parsed = parse(kv.value);
  const json = "json" in parsed ? parsed.json : undefined;
  return { ...statusOf(kv, json), ...groupStatusOf(kv.key, json), api: "json" in parsed ? cachedStatusOf(json) : "unreadable" };
}

function parse(value: string): ParsedValue {
  try {
    return { json: JSON.parse(value) as unknown };
  } catch (e) {
    return { error: (e as Error).message };
  }
}
