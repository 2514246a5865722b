// The garbage collection API (docs/registry-gc.md, "Runs"): ask for a run, follow it. Admin only:
// a run deletes data. It only writes the run record; the Registry-GC controller of the leading
// registry carries it out.
//
//   POST /api/registry/gc/runs        RunOptions (JSON, every field optional)  202 {id, checkUrl}
//   GET  /api/registry/gc/runs                                                  200 [RunRecord], newest first
//   GET  /api/registry/gc/runs/<id>                                             200 RunRecord | 404
import { Hono } from "hono";
import type { Store } from "../../adapters/store/store.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { auditObject } from "../auth/audit.ts";
import { requireAdmin, type ApiAccess } from "../auth/index.ts";
import { readJsonBody } from "../http/body.ts";
import { badRequest, errorHandler, notFound, notFoundHandler } from "../http/index.ts";
import { gcKeys } from "../resources/registry-gc.ts";
import { createRun, RunOptions } from "../resources/registry-gc.ts";
import { getRun, listRuns } from "./gc-runs.ts";

export interface RegistryGcApiOptions {
  /** Not fenced: any registry accepts requests (the run write is create-only). */
  store: Store;
  access: Pick<ApiAccess, "gate">;
  log?: Logger;
}

export function createRegistryGcApi(opts: RegistryGcApiOptions): Hono {
  const { store } = opts;
  const { gate } = opts.access;
  const log = (opts.log ?? silentLogger).child({ api: "registry-gc" });
  const app = new Hono();
  app.onError(errorHandler(log));
  app.notFound(notFoundHandler);

  app.post("/api/registry/gc/runs", async (c) => {
    const who = await gate.authenticate(c);
    requireAdmin(who, "a garbage collection run");
    const options = await readJsonBody(c, RunOptions, "RunOptions");
    if (options.policy !== undefined) {
      const policy = await store.get(`${gcKeys.policies}${options.policy}`);
      if (policy === null) throw badRequest(`policy: no GC policy named ${options.policy}`, [{ path: "policy", message: "no such policy" }]);
    }
    const run = await createRun(store, options, who.user);
    auditObject(c.req.raw, `registry-gc-run/${run.id}`);
    log.info({ run: run.id, options }, "garbage collection run requested");
    return c.json({ message: `garbage collection run ${run.id} requested`, id: run.id, checkUrl: `/api/registry/gc/runs/${run.id}` }, 202);
  });

  app.get("/api/registry/gc/runs", async (c) => {
    requireAdmin(await gate.authenticate(c), "the garbage collection runs");
    return c.json((await listRuns(store)).reverse());
  });

  app.get("/api/registry/gc/runs/:id", async (c) => {
    requireAdmin(await gate.authenticate(c), "a garbage collection run");
    const run = await getRun(store, c.req.param("id"));
    if (run === undefined) throw notFound(`garbage collection run ${c.req.param("id")} not found`);
    return c.json(run);
  });
  return app;
}
