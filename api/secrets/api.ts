// The secrets service's HTTP API (platform spec B, issue 5).
//
//   PUT    /v2/secrets?app=&proc=&path=   body: record JSON or raw content   200 {app, proc, path}
//   GET    /v2/secrets?app=[&proc=][&path=]                                  200 [{path, content, owner, group, mode, proc}]
//   DELETE /v2/secrets?app=&proc=&path=                                      200 {app, proc, path, deleted}
//   POST   /v2/sys/init    {shares, threshold}                               200 {keys, rootToken, shares, threshold} | 409
//   POST   /v2/sys/unseal  {key}                                             200 {sealed, progress, threshold} | 400 | 409
//   POST   /v2/sys/seal    access-token: <root token>                        200 {sealed: true} | 401 | 409
//   GET    /v2/sys/status                                                    200 {initialized, sealed, progress, threshold, shares}
//
// Order of checks on /v2/secrets (docs/secrets.md): a token must be present (401), the service
// must be unsealed (503 {error: "sealed"}), the input must be valid (400, nothing written), then the
// console decides (401/403/404; 503 when it does not answer). Maintainers and admins may PUT,
// DELETE and GET; the sync role may only GET. Logs name the app, proc and status of each call
// (PUT at debug level), never a token, a path's content or a share.
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { Registry } from "prom-client";
import { PutBatcher } from "../../adapters/store/put-batcher.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { Informer } from "../../runtime/informer.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { authErrorHandler, authNotFoundHandler, forbidden, unauthorized } from "../console/errors.ts";
import { tokenHeader } from "../console/authenticate.ts";
import { badRequest, readJsonBody } from "../http/index.ts";
import { ConsoleAuthorizer, type SecretsRole } from "./authorize.ts";
import { parseAddressQuery, parseGetQuery, readBodyText, recordFromBody } from "./params.ts";
import { SecretCache } from "./cache.ts";
import { SecretIntegrityError } from "./read.ts";
import { secretKey } from "./record.ts";
import { SealedError, Vault, VaultStateError } from "./vault.ts";

export interface SecretsServiceOptions {
  store: Store;
  /** Base URL of the console whose role endpoint decides, e.g. http://127.0.0.1:9002. */
  consoleUrl: string;
  log?: Logger;
  /** Times the role cache (monotonic is right: only durations are measured). */
  clock?: Clock;
  /** How long a positive role answer is reused (default 5000 ms; 0 turns the cache off). */
  authCacheMs?: number;
  /** Timeout of a role check (default 3000 ms). */
  authTimeoutMs?: number;
  /** Where the record cache's informer_* metrics go. */
  registry?: Registry;
}

export interface SecretsService {
  app: Hono;
  vault: Vault;
  /**
   * The record cache GETs read (cache.ts). The caller starts and stops it (a Manager's addInformer);
   * until it has synced, GETs read the store.
   */
  informers: Informer<unknown>[];
}

const InitBody = z
  .strictObject({
    shares: z.number().int("must be a whole number").min(1, "must be at least 1").max(255, "must be at most 255"),
    threshold: z.number().int("must be a whole number").min(1, "must be at least 1").max(255, "must be at most 255"),
  })
  .refine((b) => b.threshold <= b.shares, { path: ["threshold"], message: "must be at most shares" });
const UnsealBody = z.strictObject({ key: z.string() });

const writers: ReadonlySet<SecretsRole> = new Set(["maintainer", "admin"]);

export function createSecretsService(opts: SecretsServiceOptions): SecretsService {
  const { store } = opts;
  const log = (opts.log ?? silentLogger).child({ api: "secrets" });
  const vault = new Vault(store, log);
  const cache = new SecretCache(store, vault, { log, ...(opts.registry !== undefined ? { registry: opts.registry } : {}) });
  // Concurrent PUTs share one transaction (group commit): etcd's and the gRPC call's cost per
  // write falls with the number in flight, and each PUT still answers only once its record is durable.
  const writes = new PutBatcher(store);
  const authorizer = new ConsoleAuthorizer({
    consoleUrl: opts.consoleUrl,
    clock: opts.clock ?? realClock,
    ...(opts.authCacheMs !== undefined ? { cacheMs: opts.authCacheMs } : {}),
    ...(opts.authTimeoutMs !== undefined ? { timeoutMs: opts.authTimeoutMs } : {}),
  });
  const app = new Hono();
  const shared = authErrorHandler(log);
  app.onError((err, c) => {
    if (err instanceof SealedError) return c.json({ error: "sealed", code: "Unavailable", message: "sealed" }, 503);
    if (err instanceof SecretIntegrityError) {
      log.error({ app: err.app, proc: err.proc, path: err.path }, "secret does not decrypt at its address");
      return c.json({ error: err.message, code: "InternalError", message: err.message }, 500);
    }
    if (err instanceof VaultStateError) {
      if (err.status === 400) return shared(badRequest(err.message, [{ path: err.field, message: err.message }]), c);
      if (err.status === 401) return shared(unauthorized(err.message), c);
      return c.json({ error: err.message, code: "NotAllowed", message: err.message }, 409);
    }
    return shared(err, c);
  });
  app.notFound(authNotFoundHandler);

  /** Token present, unsealed; the rest comes after validation. */
  const admit = (c: Context): string => {
    const token = c.req.header(tokenHeader);
    if (token === undefined || token === "") throw unauthorized(`missing ${tokenHeader} header`);
    if (vault.sealed()) throw new SealedError();
    return token;
  };
  const authorize = async (token: string, appName: string, write: boolean) => {
    const role = await authorizer.role(token, appName);
    if (write && !writers.has(role)) throw forbidden(`role ${role} may only read secrets`);
    return role;
  };

  app.put("/v2/secrets", async (c) => {
    const token = admit(c);
    const q = parseAddressQuery(c);
    const record = recordFromBody(await readBodyText(c));
    await authorize(token, q.app, true);
    cache.wrote(q.app, await writes.put(secretKey(q.app, q.proc, q.path), vault.encrypt(q.app, q.proc, q.path, record)));
    // Debug, not info: one synchronous log write was 3 % of a PUT's CPU, and the spec asks for no
    // access log. Deletes (rare, destructive) stay at info.
    log.debug({ app: q.app, proc: q.proc, op: "put" }, "secret written");
    return c.json({ app: q.app, proc: q.proc, path: q.path });
  });

  app.get("/v2/secrets", async (c) => {
    const token = admit(c);
    const q = parseGetQuery(c);
    await authorize(token, q.app, false);
    const shown = (await cache.read(q.app, q.proc, q.path))
      .map((e) => ({ path: e.path, content: e.content, owner: e.owner, group: e.group, mode: e.mode, proc: e.proc }));
    return c.json(shown);
  });

  app.delete("/v2/secrets", async (c) => {
    const token = admit(c);
    const q = parseAddressQuery(c);
    await authorize(token, q.app, true);
    const key = secretKey(q.app, q.proc, q.path);
    // One round trip: "absent" is the compare, the delete the failure branch, so a failed compare
    // means the record existed and is now deleted (no read before the write).
    const { succeeded: absent, revision } = await store.txn([{ key, target: "createRevision", equals: 0 }], [], [{ type: "delete", key }]);
    const existed = !absent;
    if (existed || cache.holds(key)) cache.wrote(q.app, revision);
    log.info({ app: q.app, proc: q.proc, op: "delete", existed }, "secret deleted");
    return c.json({ app: q.app, proc: q.proc, path: q.path, deleted: existed });
  });

  app.post("/v2/sys/init", async (c) => {
    const body = await readJsonBody(c, InitBody, "init request");
    const { keys, rootToken } = await vault.init(body.shares, body.threshold);
    return c.json({ keys, rootToken, shares: body.shares, threshold: body.threshold });
  });

  app.post("/v2/sys/unseal", async (c) => {
    const body = await readJsonBody(c, UnsealBody, "unseal request");
    return c.json(await vault.unseal(body.key));
  });

  app.post("/v2/sys/seal", async (c) => {
    await vault.verifyRootToken(c.req.header(tokenHeader));
    await vault.seal();
    return c.json({ sealed: true });
  });

  app.get("/v2/sys/status", async (c) => c.json(await vault.status()));

  return { app, vault, informers: [cache.informer as Informer<unknown>] };
}
