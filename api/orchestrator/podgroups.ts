// The orchestrator's PodGroup API (docs/orchestrator.md; fields and answers: docs/api-reference.md).
// A thin Hono app: parse and validate, check feasibility against the informer caches, write the
// desired spec (or a refresh task) in one store transaction, answer. GETs answer from the informer
// caches (PodGroupReader: read-your-own-writes on this replica, store reads when a cache is behind).
// It never calls Docker, logs and exec aside (they are only on the engines: logs.ts, exec.ts); the PodGroup controller
// converges the engines to what is written here.
//
// Every call needs a credential (docs/security.md): reads need read on the group's namespace (its
// app), writes need write on it, and host access (binds, networks, log drivers) is an admin's.
// Listings show only the groups the caller may read. The order is authenticate, validate, read,
// authorize, write: a 401 or 403 never leaves a trace in the store.
//
//   GET    /api/podgroups?name=&force_update=             200 PodGroupWithSpec | 400 | 404
//   GET    /api/podgroups/_all                            200 PodGroupWithSpec[]
//   GET    /api/podgroups/logs?name=&instance=&follow=&tail=&since=&timestamps=&previous=   200 a stream of lines | 400 | 404 | 503
//   GET    /api/podgroups/exec?name=&instance=&cmd=&cmd=...&tty=&stdin=   101 a WebSocket (exec.ts) | 400 | 403 | 404
//   GET    /api/podgroups/history?name=                   200 SpecVersion[] newest first (history.ts) | 400 | 404
//   POST   /api/podgroups/restart?name=                   202 | 400 | 404 (a rolling restart)
//   POST   /api/podgroups            PodGroupSpec         202 | 400 | 409 AlreadyExists / InsufficientResources
//   DELETE /api/podgroups?name=                           202 | 400 | 404
//   PATCH  /api/podgroups?name=&cmd=replica&num_instances=&restart_policy=   202 | 400 | 404 | 409
//   PATCH  /api/podgroups?name=&cmd=spec   PodSpec        202 | 400 | 404 | 409
//   GET    /api/openapi.json                              200 the OpenAPI 3.1 document
//
// Input is validated completely before the store is touched, so a 400 never leaves a trace.
import { isDeepStrictEqual } from "node:util";
import { Hono, type Context } from "hono";
import type { z } from "zod";
import type { Cluster, PlacementFilter } from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { Informer } from "../../runtime/informer.ts";
import { auditObject, may, requireApp, requireHostAccess, requireOwnDependencies, requireOwnName, seesAllApps, type ApiAccess, type Principal } from "../auth/index.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { accepted, errorHandler, invalid, isoNow, notAllowed, notFound, notFoundHandler, parseQuery, readJsonBody, systemWallClock, type WallClock } from "../http/index.ts";
import type { NodeRecord } from "../resources/node.ts";
import { PodGroupSpecInput, PodSpecInput, type PodGroupSpec, type PodSpec, type StoredPodGroup } from "../resources/podgroup.ts";
import { DemandIndex } from "./demand.ts";
import { checkFeasibility, type DependencyDemand } from "./feasibility.ts";
import { dependencyPodsDemand, dependencyPodsOnNode, DependencyUseIndex, factsOf, usesOf, type DependencyInformers } from "./dependency-demand.ts";
import { openApiDocument } from "./openapi.ts";
import { normalised, placementFilters } from "./pod-input.ts";
import { mountExec } from "./exec.ts";
import { logsResponse, logTargets, previousTargets } from "./logs.ts";
import { DeleteQuery, GetQuery, HistoryQuery, logsQuery, PatchQuery, ReplicaQuery, RestartQuery } from "./queries.ts";
import type { CachedStatus } from "./informers.ts";
import { readHistory } from "./history.ts";
import { createPodGroup, getPodGroup, PodGroupReader, requestRefresh, updatePodGroup } from "./records.ts";

export interface PodGroupApiOptions {
  /** Not fenced: every replica accepts writes (they are compare-and-swap). */
  store: Store;
  nodes: Informer<NodeRecord>;
  podGroups: Informer<StoredPodGroup>;
  /** GETs read it with podGroups once both are synced; without it (or before) they read the store. */
  podGroupStatuses?: Informer<CachedStatus>;
  log?: Logger;
  /** Who may call, and the host-access rules. */
  access: ApiAccess;
  /** The engines, for GET /api/podgroups/logs (without it, that path is not served). */
  cluster?: Cluster;
  /** Wall clock for the records' times and the logs' `since` (default the system's). */
  clock?: WallClock;
  /**
   * The dependency definitions and statuses (dependency-demand.ts): with them the feasibility
   * check counts the dependency pods the groups need; without them, none.
   */
  dependencies?: DependencyInformers;
}

const checkUrlOf = (name: string) => `/api/podgroups?name=${encodeURIComponent(name)}`;

export function createPodGroupApi(opts: PodGroupApiOptions): Hono {
  const { store } = opts;
  const log = (opts.log ?? silentLogger).child({ api: "podgroups" });
  const demand = new DemandIndex(opts.podGroups);
  const dependencyUses = new DependencyUseIndex(opts.podGroups);
  const reader = new PodGroupReader(store, opts.podGroups, opts.podGroupStatuses);
  const { gate, hostAccess } = opts.access;
  const clock = opts.clock ?? systemWallClock;
  const now = () => isoNow(clock);
  const LogsQuery = logsQuery(clock);
  const app = new Hono();
  app.onError(errorHandler(log));
  app.notFound(notFoundHandler);

  /** The dependency pods of every stored group, with this one as `before` and as `after` (dependency-demand.ts). */
  const dependencyDemand = (nodes: readonly NodeRecord[], before: StoredPodGroup | undefined, after: StoredPodGroup): DependencyDemand | undefined => {
    if (opts.dependencies === undefined) return undefined;
    const facts = factsOf(opts.dependencies);
    const ready = nodes.filter((n) => n.state === "ready").map((n) => n.name);
    const others = dependencyUses.othersThan(after.name);
    const withGroup = (group: StoredPodGroup | undefined) => (group === undefined || group.deleting ? others : [...others, { numInstances: group.numInstances, uses: usesOf(group) }]);
    const was = dependencyPodsDemand(withGroup(before), ready, facts);
    const will = dependencyPodsDemand(withGroup(after), ready, facts);
    const uses = usesOf(after);
    return { before: was.demand, after: will.demand, afterPods: will.pods, onNode: (node) => dependencyPodsOnNode(uses, node, facts) };
  };

  /** Throws 409 InsufficientResources when the change cannot fit the cluster. */
  const admit = (what: string, before: StoredPodGroup | undefined, after: StoredPodGroup, filters: PlacementFilter[]) => {
    const nodes = opts.nodes.list();
    const dependencies = dependencyDemand(nodes, before, after);
    const verdict = checkFeasibility({ nodes, others: demand.othersThan(after.name), before, after, filters, ...(dependencies && { dependencies }) });
    if (!verdict.ok) throw notAllowed("InsufficientResources", `cannot ${what} podgroup ${after.name}: ${verdict.message}`);
  };

  app.get("/api/openapi.json", async (c) => {
    await gate.authenticate(c);
    return c.json(openApiDocument());
  });

  app.get("/api/podgroups/_all", async (c) => {
    const who = await gate.authenticate(c);
    const all = await reader.list();
    return c.json(seesAllApps(who) ? all : all.filter((g) => may(who, "read", g.spec.namespace)));
  });

  /** Authenticate, read the query, find the group (404) and check read on its app: a GET of one group. */
  const readGroup = async <S extends z.ZodObject>(c: Context, query: S) => {
    const who = await gate.authenticate(c);
    const q = parseQuery(c, query) as z.output<S> & { name: string };
    const group = await reader.get(q.name);
    if (group === null) throw notFound(`podgroup ${q.name} not found`);
    requireApp(who, "read", group.spec.namespace);
    return { who, q, group };
  };

  app.get("/api/podgroups", async (c) => {
    const { who, q, group } = await readGroup(c, GetQuery);
    if (q.force_update) {
      auditObject(c.req.raw, `podgroup/${q.name}`);
      requireApp(who, "write", group.spec.namespace);
      const task = await requestRefresh(store, q.name, new Date(clock.now()));
      log.info({ podgroup: q.name, task: task.id }, "refresh requested");
    }
    return c.json(group);
  });

  const cluster = opts.cluster;
  if (cluster !== undefined) {
    // Reading logs is reading the group: whoever may GET it may read its containers' output
    // (docs/security.md, "Roles").
    app.get("/api/podgroups/logs", async (c) => {
      const { q, group } = await readGroup(c, LogsQuery);
      if (q.previous === true && q.instance === undefined) {
        throw invalid("query parameters", [{ path: "previous", message: "needs instance: previous containers are read one instance at a time" }]);
      }
      const targets = q.previous === true && q.instance !== undefined ? await previousTargets(group, q.instance, cluster, c.req.raw.signal) : logTargets(group, q.instance);
      if ("notFound" in targets) throw notFound(targets.notFound);
      if ("tooMany" in targets) throw invalid("query parameters", [{ path: "instance", message: targets.tooMany }]);
      const stillAllowed = async () => may(await gate.authenticate(c), "read", group.spec.namespace);
      return logsResponse(c, group, targets, q, { cluster, log, stillAllowed });
    });
    // A command in an instance's container, over a WebSocket (exec.ts): "exec" on the group's app.
    mountExec(app, { gate, reader, cluster, log, clock });
  }

  // The pod spec's stored versions, newest first (history.ts): reading them is reading the group.
  app.get("/api/podgroups/history", async (c) => {
    const who = await gate.authenticate(c);
    const { name } = parseQuery(c, HistoryQuery);
    const current = await getPodGroup(store, name);
    if (current === null) throw notFound(`podgroup ${name} not found`);
    requireApp(who, "read", current.record.namespace);
    return c.json(await readHistory(store, current.record));
  });

  app.post("/api/podgroups", async (c) => {
    const who = await gate.authenticate(c);
    const spec = await readJsonBody(c, PodGroupSpecInput, "PodGroupSpec");
    const filters = placementFilters(spec.pod, "pod.filters");
    auditObject(c.req.raw, `podgroup/${spec.name}`);
    mayWrite(who, spec.name, spec.namespace, spec.pod, "pod.");
    const group = storedForm(spec, now());
    admit("create", undefined, group, filters);
    reader.wrote(group.name, await createPodGroup(store, group));
    // debug: the audit line of this POST already records the create (pino writes synchronously).
    log.debug({ podgroup: group.name, numInstances: group.numInstances }, "podgroup created");
    return accepted(c, `podgroup ${group.name} accepted; its ${group.numInstances} instance(s) are being deployed`, checkUrlOf(group.name));
  });

  app.delete("/api/podgroups", async (c) => {
    const who = await gate.authenticate(c);
    const { name } = parseQuery(c, DeleteQuery);
    const { written, revision } = await updatePodGroup(store, name, (current) => {
      requireApp(who, "write", current.namespace);
      return current.deleting ? undefined : { ...current, deleting: true, updatedAt: now() };
    });
    reader.wrote(name, revision);
    if (written) log.info({ podgroup: name }, "podgroup deletion requested");
    return accepted(c, `podgroup ${name} is being deleted`, checkUrlOf(name));
  });

  // A rolling restart (docs/orchestrator.md, "Restart"): a new restartedAt, which the controller
  // compares with the label its pods were created under, replacing them one instance at a time as
  // a spec update does. pod.version stays: the spec history is the user's.
  app.post("/api/podgroups/restart", async (c) => {
    const who = await gate.authenticate(c);
    const { name } = parseQuery(c, RestartQuery);
    auditObject(c.req.raw, `podgroup/${name}`);
    const at = now();
    const { record, revision } = await updatePodGroup(store, name, (current) => {
      requireApp(who, "write", current.namespace);
      if (current.deleting) throw notFound(`podgroup ${name} is being deleted`);
      return { ...current, restartedAt: at, updatedAt: at };
    });
    reader.wrote(name, revision);
    log.info({ podgroup: name, restartedAt: at }, "podgroup restart requested");
    return accepted(c, `podgroup ${name} is being restarted, one instance at a time (${record.numInstances} instance(s), requested at ${at})`, checkUrlOf(name));
  });

  app.patch("/api/podgroups", async (c) => {
    const who = await gate.authenticate(c);
    const { cmd } = parseQuery(c, PatchQuery);
    return cmd === "replica" ? patchReplica(c, who) : patchSpec(c, who);
  });

  /** cmd=replica: numInstances and restartPolicy; the pod (and its version) stays as it is. */
  const patchReplica = async (c: Context, who: Principal) => {
    const q = parseQuery(c, ReplicaQuery);
    const { written, record, revision } = await updatePodGroup(store, q.name, (current) => {
      requireApp(who, "write", current.namespace);
      if (current.deleting) throw notFound(`podgroup ${q.name} is being deleted`);
      const restartPolicy = q.restart_policy ?? current.restartPolicy;
      if (current.numInstances === q.num_instances && current.restartPolicy === restartPolicy) return undefined;
      const next = { ...current, numInstances: q.num_instances, restartPolicy, updatedAt: now() };
      admit("scale", current, next, placementFilters(current.pod, "pod.filters"));
      return next;
    });
    reader.wrote(q.name, revision);
    if (written) log.info({ podgroup: q.name, numInstances: record.numInstances, restartPolicy: record.restartPolicy }, "podgroup scaled");
    const message = written
      ? `podgroup ${q.name} will run ${record.numInstances} instance(s), restart policy ${record.restartPolicy}`
      : `podgroup ${q.name} already has ${record.numInstances} instance(s) and restart policy ${record.restartPolicy}; nothing to do`;
    return accepted(c, message, checkUrlOf(q.name));
  };

  /** cmd=spec: a new PodSpec; pod.version goes up by one, and the controller rolls it out. */
  const patchSpec = async (c: Context, who: Principal) => {
    const { name } = parseQuery(c, PatchQuery);
    const pod = await readJsonBody(c, PodSpecInput, "PodSpec");
    const filters = placementFilters(pod, "filters");
    const { written, record, revision } = await updatePodGroup(store, name, (current) => {
      requireApp(who, "write", current.namespace);
      mayWrite(who, current.name, current.namespace, pod, "");
      if (current.deleting) throw notFound(`podgroup ${name} is being deleted`);
      const candidate = normalised({ ...pod, name: pod.name ?? current.name, version: current.pod.version });
      // The same spec again (a re-applied file) is not a change: no new version, no rollout.
      if (isDeepStrictEqual(candidate, current.pod)) return undefined;
      const next = { ...current, pod: { ...candidate, version: current.pod.version + 1 }, updatedAt: now() };
      admit("update", current, next, filters);
      return next;
    });
    reader.wrote(name, revision);
    if (written) log.info({ podgroup: name, version: record.pod.version }, "podgroup spec updated");
    const message = written
      ? `podgroup ${name} is being updated to pod version ${record.pod.version}, one instance at a time`
      : `podgroup ${name} already runs this spec (pod version ${record.pod.version}); nothing to do`;
    return accepted(c, message, checkUrlOf(name));
  };

  /**
   * May `who` store this pod for group `name` of `namespace`? Write on the group's app and on the
   * pod's namespace, an own name, host access only as allowed, and secret files only for a group
   * named for its app (Secret-sync installs the secrets of the app the name begins with).
   */
  const mayWrite = (who: Principal, name: string, namespace: string, pod: PodSpec, prefix: string) => {
    requireApp(who, "write", namespace);
    requireApp(who, "write", pod.namespace);
    requireOwnName(who, "podgroup", name, namespace);
    requireOwnDependencies(who, namespace, pod.dependencies, prefix);
    requireHostAccess(who, pod, hostAccess, prefix);
    requireSecretsOwnApp(name, namespace, pod, prefix);
  };

  // Other methods and sub-paths of this API answer in its error shape even when the app is mounted
  // on a parent (whose own not-found answer is plain text). Only our own paths: a wider catch-all
  // would shadow routes other components mount later.
  app.all("/api/podgroups", notFoundHandler);
  app.all("/api/podgroups/*", notFoundHandler);

  return app;
}

/**
 * Secret files reach a group only when its name begins with its namespace: Secret-sync reads the
 * secrets of app `<first name segment>`, and that must be the app the group belongs to.
 */
function requireSecretsOwnApp(name: string, namespace: string, pod: PodSpec, prefix: string): void {
  const app = name.split(".")[0]!;
  if (app === namespace) return;
  const details = pod.containers.flatMap((c, i) =>
    (c.secretFiles?.length ?? 0) > 0
      ? [{ path: `${prefix}containers[${i}].secretFiles`, message: `secret files are installed only into a group named for its namespace (${namespace} or ${namespace}.<name>); ${name} would receive the secrets of app ${app}` }]
      : [],
  );
  if (details.length > 0) throw invalid(prefix === "" ? "PodSpec" : "PodGroupSpec", details);
}

/** The record POST stores: pod.name defaults to the group's name, pod.version starts at 1. */
function storedForm(spec: PodGroupSpec, now: string): StoredPodGroup {
  // The top-level `version` is server-managed and not kept: pod.version is the one spec version.
  const { version: _ignored, ...rest } = spec;
  return { ...rest, pod: normalised({ ...spec.pod, name: spec.pod.name ?? spec.name, version: 1 }), createdAt: now, updatedAt: now };
}
