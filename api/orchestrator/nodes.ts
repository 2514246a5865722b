// The orchestrator's nodes API (docs/nodes-and-drift.md; docs/api-reference.md, "PATCH /api/nodes"). Thin:
// GET answers from the node-record informer (written by the node monitor), PATCH cmd=drift writes
// one drift task record and answers 202. It never calls Docker; the PodGroup controller carries
// the task out.
//
//   GET   /api/nodes                                                200 Node[] (by name)
//   PATCH /api/nodes?cmd=drift&from=&to=&pg=&pg_instance=&force=    202 DriftAccepted | 400 | 404
//
// 400 (the detail names the parameter, nothing is stored): cmd missing or not drift; from missing,
// empty or not a node name; to equal to from; to not a node of the cluster; pg_instance without pg,
// not a positive integer (instances are numbered from 1), or above pg's numInstances; force not true/false. 404: pg names no
// PodGroup (or one being deleted). `from` is deliberately not checked against the node records: a
// node already removed from -cluster can still be drained of what the store says ran there.
//
// Any authenticated caller may list the nodes; a drift is an admin's (docs/security.md).
import { randomUUID } from "node:crypto";
import { Hono } from "hono";
import type { Store } from "../../adapters/store/store.ts";
import type { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { requireAdmin, type ApiAccess } from "../auth/index.ts";
import { badRequest, errorHandler, isoNow, notFound, notFoundHandler, parseQuery, systemWallClock, unavailable, type WallClock } from "../http/index.ts";
import { keys } from "../resources/keys.ts";
import type { NodeRecord } from "../resources/node.ts";
import { firstInstanceNo, instanceNumbersFrom, isCurrentInstance, type StoredPodGroup } from "../resources/podgroup.ts";
import type { DriftTask } from "../resources/task.ts";
import { DriftQuery, type DriftAccepted } from "./node-schemas.ts";

export interface NodesApiOptions {
  /** Not fenced: any replica accepts requests (the task write is create-only). */
  store: Store;
  nodes: Informer<NodeRecord>;
  podGroups: Informer<StoredPodGroup>;
  log?: Logger;
  /** Who may call. */
  access: Pick<ApiAccess, "gate">;
  /** Wall clock for the drift task's createdAt (default the system's). */
  clock?: WallClock;
}

export function createNodesApi(opts: NodesApiOptions): Hono {
  const { store, nodes, podGroups } = opts;
  const log = (opts.log ?? silentLogger).child({ api: "nodes" });
  const clock = opts.clock ?? systemWallClock;
  const app = new Hono();
  app.onError(errorHandler(log));
  app.notFound(notFoundHandler);

  const { gate } = opts.access;

  app.get("/api/nodes", async (c) => {
    await gate.authenticate(c);
    return c.json(nodes.list().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)));
  });

  app.patch("/api/nodes", async (c) => {
    requireAdmin(await gate.authenticate(c), "a node operation (drift)");
    const q = parseQuery(c, DriftQuery);
    const to = q.to || undefined;
    const pg = q.pg || undefined;
    const instance = q.pg_instance ? Number(q.pg_instance) : undefined;
    const force = q.force?.toLowerCase() === "true";
    if (to === q.from) throw badRequest(`to equals from (${q.from}): a drift moves instances to another node`, [{ path: "to", message: "equals from" }]);
    if (instance !== undefined && pg === undefined) {
      throw badRequest("pg_instance needs pg: an InstanceNo is one of a PodGroup's", [{ path: "pg_instance", message: "given without pg" }]);
    }
    if (to !== undefined && !nodes.list().some((n) => n.name === to)) {
      throw badRequest(`to: no node ${to} in the cluster (GET /api/nodes lists them)`, [{ path: "to", message: "unknown node" }]);
    }
    if (instance !== undefined && instance < firstInstanceNo) {
      throw badRequest(`pg_instance: ${instanceNumbersFrom}`, [{ path: "pg_instance", message: `must be at least ${firstInstanceNo}: ${instanceNumbersFrom}` }]);
    }
    if (pg !== undefined) {
      const group = await podGroup(pg);
      if (group === undefined || group.deleting) throw notFound(`podgroup ${pg} not found`);
      if (instance !== undefined && !isCurrentInstance(instance, group.numInstances)) {
        throw badRequest(`pg_instance: podgroup ${pg} has instances ${firstInstanceNo}..${group.numInstances}`, [
          { path: "pg_instance", message: `must be at most numInstances (${group.numInstances})` },
        ]);
      }
    }

    const task: DriftTask = {
      id: `drift-${randomUUID()}`,
      kind: "drift",
      from: q.from,
      ...(to !== undefined && { to }),
      ...(pg !== undefined && { podGroup: pg }),
      ...(instance !== undefined && { instance, instanceBase: firstInstanceNo }),
      force,
      reason: "request",
      createdAt: isoNow(clock),
    };
    const key = keys.task(task.id);
    const { succeeded } = await store.txn([{ key, target: "createRevision", equals: 0 }], [{ type: "put", key, value: JSON.stringify(task) }]);
    if (!succeeded) throw unavailable("the drift task id collided; retry");
    log.info({ task: task.id, from: task.from, to, pg, instance, force }, "drift requested");

    const what = pg === undefined ? "every PodGroup's instances" : instance === undefined ? `podgroup ${pg}'s instances` : `instance ${instance} of podgroup ${pg}`;
    const where = to === undefined ? "other nodes" : to;
    const statefulNote = force ? "" : "; stateful PodGroups stay (force=true moves them too)";
    const body: DriftAccepted = {
      message: `${what} on ${q.from} will move to ${where}${statefulNote}`,
      task: task.id,
      from: q.from,
      to: to ?? null,
      pg: pg ?? null,
      pgInstance: instance ?? null,
      force,
      checkUrl: pg === undefined ? "/api/nodes" : `/api/podgroups?name=${encodeURIComponent(pg)}`,
    };
    return c.json(body, 202);
  });

  // Other methods and sub-paths answer in this API's error shape; only our own paths (see podgroups.ts).
  app.all("/api/nodes", notFoundHandler);
  app.all("/api/nodes/*", notFoundHandler);

  /** The cache first; a miss is confirmed with the store (a group created a moment ago). */
  async function podGroup(name: string): Promise<StoredPodGroup | undefined> {
    const cached = podGroups.get(keys.podGroup(name));
    if (cached !== undefined) return cached;
    const kv = await store.get(keys.podGroup(name));
    return kv === null ? undefined : (JSON.parse(kv.value) as StoredPodGroup);
  }

  return app;
}
