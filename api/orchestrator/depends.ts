// The orchestrator's Dependency API (docs/dependencies.md; fields and answers:
// docs/api-reference.md, "GET /api/depends" and after). A thin Hono app: parse and validate, write the definition in one store
// transaction, answer. Nothing is deployed here: the Dependency controller deploys a dependency
// pod on demand, on the node where an instance of a PodGroup that lists it runs.
//
//   GET    /api/depends?name=                      200 DependencyWithStatus | 400 | 404
//   GET    /api/depends/_all                       200 DependencyWithStatus[] (name order)
//   POST   /api/depends           PodSpec          202 | 400 | 409 AlreadyExists / InsufficientResources
//   PUT    /api/depends           PodSpec          202 | 400 | 404
//   DELETE /api/depends?name=&force=               202 | 400 | 404 | 409 InUse
//
// Input is validated completely before the store is touched, so a 400 never leaves a trace.
// Every call needs a credential (docs/security.md): read or write on the dependency's namespace,
// host access only as allowed; listings show only what the caller may read.
import { isDeepStrictEqual } from "node:util";
import { Hono } from "hono";
import { z } from "zod";
import { rankNodes, type NodeCapacity, type PlacementFilter } from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { auditObject, may, requireApp, requireHostAccess, requireOwnName, seesAllApps, type ApiAccess, type Principal } from "../auth/index.ts";
import { accepted, errorHandler, isoNow, notAllowed, notFound, notFoundHandler, parseQuery, queryBoolean, readJsonBody, systemWallClock, type WallClock } from "../http/index.ts";
import { DependencySpecInput, dependencyLayout, type DependencySpec, type StoredDependency } from "../resources/dependency.ts";
import type { NodeRecord } from "../resources/node.ts";
import { Name } from "../resources/podgroup.ts";
import { createDependency, dependentsOf, getDependencyWithStatus, listDependenciesWithStatus, updateDependency } from "./depends-records.ts";
import { podDemand } from "./feasibility.ts";
import { normalised, placementFilters } from "./pod-input.ts";

export interface DependsApiOptions {
  /** Not fenced: every replica accepts writes (they are create-only or compare-and-swap). */
  store: Store;
  /** Node records (the node monitor's), for the POST fit check. */
  nodes: Informer<NodeRecord>;
  /** Root of the key layout (default /platform/orchestrator/); tests use a unique root. */
  prefix?: string;
  log?: Logger;
  /** Who may call, and the host-access rules. */
  access: ApiAccess;
  /** Wall clock for the records' times (default the system's). */
  clock?: WallClock;
}

export const DependsGetQuery = z.object({ name: Name.describe("Dependency name") });

export const DependsDeleteQuery = z.object({
  name: Name.describe("Dependency name"),
  force: queryBoolean.optional().describe("true: delete even while PodGroups list it; its pods are killed at once (default false)"),
});

const checkUrlOf = (name: string) => `/api/depends?name=${encodeURIComponent(name)}`;

export function createDependsApi(opts: DependsApiOptions): Hono {
  const { store } = opts;
  const layout = dependencyLayout(opts.prefix);
  const log = (opts.log ?? silentLogger).child({ api: "depends" });
  const clock = opts.clock ?? systemWallClock;
  const app = new Hono();
  app.onError(errorHandler(log));
  app.notFound(notFoundHandler);
  const { gate, hostAccess } = opts.access;

  /** Write on the dependency's app, an own name, host access only as allowed. */
  const mayWrite = (who: Principal, spec: DependencySpec) => {
    requireApp(who, "write", spec.namespace);
    requireOwnName(who, "dependency", spec.name, spec.namespace);
    requireHostAccess(who, spec, hostAccess);
  };

  app.get("/api/depends/_all", async (c) => {
    const who = await gate.authenticate(c);
    const all = await listDependenciesWithStatus(store, layout);
    return c.json(seesAllApps(who) ? all : all.filter((d) => may(who, "read", d.spec.namespace)));
  });

  app.get("/api/depends", async (c) => {
    const who = await gate.authenticate(c);
    const { name } = parseQuery(c, DependsGetQuery);
    const found = await getDependencyWithStatus(store, layout, name);
    if (found === null) throw notFound(`dependency ${name} not found`);
    requireApp(who, "read", found.spec.namespace);
    return c.json(found);
  });

  app.post("/api/depends", async (c) => {
    const who = await gate.authenticate(c);
    const spec = await readJsonBody(c, DependencySpecInput, "PodSpec");
    // node== filters mean nothing for a dependency (its pods go to the node of the instance that
    // needs them): fitsSomewhere leaves them out.
    const filters = placementFilters(spec, "filters");
    auditObject(c.req.raw, `dependency/${spec.name}`);
    mayWrite(who, spec);
    const verdict = fitsSomewhere(opts.nodes.list(), spec, filters);
    if (verdict !== undefined) throw notAllowed("InsufficientResources", `cannot create dependency ${spec.name}: ${verdict}`);
    const now = isoNow(clock);
    const record: StoredDependency = { ...normalised(spec), version: 1, createdAt: now, updatedAt: now };
    await createDependency(store, layout, record);
    // debug: the audit line of this POST already records the create.
    log.debug({ dependency: spec.name }, "dependency created");
    return accepted(c, `dependency ${spec.name} stored; its pods are deployed on demand, next to the PodGroup instances that list it`, checkUrlOf(spec.name));
  });

  app.put("/api/depends", async (c) => {
    const who = await gate.authenticate(c);
    const spec = await readJsonBody(c, DependencySpecInput, "PodSpec");
    placementFilters(spec, "filters");
    auditObject(c.req.raw, `dependency/${spec.name}`);
    const { written, record } = await updateDependency(store, layout, spec.name, (current) => {
      requireApp(who, "write", current.namespace);
      mayWrite(who, spec);
      if (current.deleting) throw notFound(`dependency ${spec.name} is being deleted`);
      const { version, createdAt, updatedAt: _u, deleting: _d, ...pod } = current;
      // The same definition again (a re-applied file) is not a change: no new version, no rollout.
      if (isDeepStrictEqual(normalised(spec), pod)) return undefined;
      return { ...normalised(spec), version: version + 1, createdAt, updatedAt: isoNow(clock) };
    });
    if (written) log.info({ dependency: spec.name, version: record.version }, "dependency updated");
    const message = written
      ? `dependency ${spec.name} is being updated to version ${record.version}, one running pod at a time`
      : `dependency ${spec.name} already has this definition (version ${record.version}); nothing to do`;
    return accepted(c, message, checkUrlOf(spec.name));
  });

  app.delete("/api/depends", async (c) => {
    const who = await gate.authenticate(c);
    const { name, force = false } = parseQuery(c, DependsDeleteQuery);
    const found = await getDependencyWithStatus(store, layout, name);
    if (found === null) throw notFound(`dependency ${name} not found`);
    requireApp(who, "write", found.spec.namespace);
    // Refused while a stored PodGroup lists it: its instances rely on the pod next to them. The
    // groups are listed after the dependency's record is read, and the write compares that
    // record's modRevision; a group write that lists the dependency touches the record in its own
    // transaction (records.ts dependencyGuard). So a group created in between makes this write
    // lose and list again, and a group written after this one sees the deletion (409).
    const { written } = await updateDependency(
      store,
      layout,
      name,
      (current, dependents) => {
        requireApp(who, "write", current.namespace);
        if (dependents.length > 0) {
          throw notAllowed("InUse", `dependency ${name} is used by podgroup ${dependents.join(", ")}; remove them first, or delete with force=true`);
        }
        // A forced delete may upgrade a graceful one in progress, never the other way round.
        if (current.deleting && (current.deleting.force || !force)) return undefined;
        return { ...current, deleting: { force }, updatedAt: isoNow(clock) };
      },
      force ? undefined : () => dependentsOf(store, layout, name),
    );
    if (written) log.info({ dependency: name, force }, "dependency deletion requested");
    return accepted(c, `dependency ${name} is being deleted${force ? "; its pods are being killed" : ""}`, checkUrlOf(name));
  });

  app.all("/api/depends", notFoundHandler);
  app.all("/api/depends/*", notFoundHandler);
  return app;
}

/** Undefined when one pod fits whole on some ready node matching the filters; else why not. */
function fitsSomewhere(nodes: readonly NodeRecord[], spec: DependencySpec, filters: PlacementFilter[]): string | undefined {
  const ready = nodes.filter((n) => n.state === "ready");
  if (ready.length === 0) return "no ready nodes: the node monitor has recorded no reachable Docker engine";
  const request = podDemand(spec);
  const whole = ready.map((n): NodeCapacity => ({ ...n, freeMemoryBytes: n.memoryBytes, freeNanoCpus: Math.round(n.cpus * 1e9) }));
  const applicable = filters.filter((f) => !(f.kind === "node" && f.op === "=="));
  if (rankNodes(whole, { request, filters: applicable }).length > 0) return undefined;
  const mib = Number((request.memoryBytes / (1 << 20)).toFixed(1));
  const where = applicable.length > 0 ? " that matches its filters" : "";
  return `one pod needs ${mib} MiB and ${request.nanoCpus / 1e9} CPUs on one node; no ready node${where} has that much`;
}
