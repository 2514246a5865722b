// The secrets service's HTTP API (docs/secrets.md, "Endpoints").
//
//   PUT    /v2/secrets?app=&proc=&path=   body: record JSON or raw content   200 {app, proc, path}
//   GET    /v2/secrets?app=[&proc=][&path=]                                  200 [{path, content, owner, group, mode, proc}]
//   DELETE /v2/secrets?app=&proc=&path=                                      200 {app, proc, path, deleted}
//   POST   /v2/sys/init    {shares, threshold}   (admin token)               200 {keys, rootToken, shares, threshold} | 409
//   POST   /v2/sys/unseal  {key}                 (any valid token)           200 {sealed, progress, threshold} | 400 | 409
//   POST   /v2/sys/seal    access-token: <root token>                        200 {sealed: true} | 401 | 409
//   GET    /v2/sys/status                                                    200 {initialized, sealed, progress, threshold, shares}
//
// Order of checks on /v2/secrets (docs/secrets.md): a valid token (401), the service must be
// unsealed (503 {error: "sealed"}), the input must be valid (400, nothing written), then the role
// (403; 404 for an app that is not registered). Tokens are checked from the store like every API's
// (docs/security.md). Maintainers and admins may PUT, DELETE and GET; the sync role may only GET;
// a viewer of the app may not read secrets. Logs name the app, proc and status of each call
// (PUT at debug level), never a token, a path's content or a share.
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { Registry } from "prom-client";
import { PutBatcher } from "../../adapters/store/put-batcher.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { requireAdmin, requireApp, tokenHeader, type Gate, type Principal } from "../auth/index.ts";
import { authErrorHandler, authNotFoundHandler } from "../console/errors.ts";
import { notFound, readJsonBody } from "../http/index.ts";
import { parseAddressQuery, parseGetQuery, readBodyText, recordFromBody } from "./params.ts";
import { SecretCache } from "./cache.ts";
import { onePerFile, SecretIntegrityError } from "./read.ts";
import { sameSecretFile, secretPathSpellings } from "../resources/secret-path.ts";
import { parseSecretKey, procSecretsPrefix, secretKey } from "./record.ts";
import { SealedError, Vault } from "./vault.ts";

export interface SecretsServiceOptions {
  store: Store;
  /** Who may call (api/auth). */
  gate: Gate;
  /** Whether an app is registered (the token verifier's cached app list). */
  apps: { registered(app: string): Promise<boolean> };
  log?: Logger;
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

export function createSecretsService(opts: SecretsServiceOptions): SecretsService {
  const { store } = opts;
  const log = (opts.log ?? silentLogger).child({ api: "secrets" });
  const vault = new Vault(store, log);
  const cache = new SecretCache(store, vault, { log, ...(opts.registry !== undefined ? { registry: opts.registry } : {}) });
  // Concurrent PUTs share one transaction (group commit): etcd's and the gRPC call's cost per
  // write falls with the number in flight, and each PUT still answers only once its record is durable.
  const writes = new PutBatcher(store);
  const app = new Hono();
  // SealedError, SecretIntegrityError and VaultStateError are ApiErrors: the shared handler answers
  // them (docs/secrets.md has the answers).
  const answer = authErrorHandler(log);
  app.onError((err, c) => {
    if (err instanceof SecretIntegrityError) log.error({ app: err.app, proc: err.proc, path: err.path }, "secret does not decrypt at its address");
    return answer(err, c);
  });
  app.notFound(authNotFoundHandler);

  /** A valid token, unsealed; the role comes after validation. */
  const admit = async (c: Context): Promise<Principal> => {
    const who = await opts.gate.authenticate(c);
    if (vault.sealed()) throw new SealedError();
    return who;
  };
  const authorize = async (who: Principal, appName: string, write: boolean) => {
    // Not registered first: a mistyped app name says so, to maintainers too (the name is no secret).
    if (!(await opts.apps.registered(appName))) throw notFound(`app ${appName} is not registered`);
    requireApp(who, write ? "write" : "read-secrets", appName);
  };

  app.put("/v2/secrets", async (c) => {
    const who = await admit(c);
    const q = parseAddressQuery(c);
    const record = recordFromBody(await readBodyText(c));
    await authorize(who, q.app, true);
    // q.path is the file's one spelling. A record of the same file stored under another spelling
    // (before the API stored one spelling: `/platform/app/x`, `//platform/app/x`) is replaced with
    // it, in one transaction; reads would take the later write anyway (onePerFile), this keeps the
    // store tidy. Such a record is looked for in the cache only (every record, normally current):
    // PUTs stay one batched write. One the cache does not hold yet stays until a DELETE.
    const key = secretKey(q.app, q.proc, q.path);
    const value = vault.encrypt(q.app, q.proc, q.path, record);
    const others = cache.keysOfFile(q.app, q.proc, q.path).filter((k) => k !== key);
    const revision = others.length === 0 ? await writes.put(key, value) : (await store.txn([], [{ type: "put", key, value }, ...others.map((k) => ({ type: "delete" as const, key: k }))])).revision;
    cache.wrote(q.app, revision);
    // Debug, not info: one synchronous log write was 3 % of a PUT's CPU (docs/secrets.md, "Crypto
    // design", the logs). Deletes (rare, destructive) stay at info.
    log.debug({ app: q.app, proc: q.proc, op: "put" }, "secret written");
    return c.json({ app: q.app, proc: q.proc, path: q.path });
  });

  app.get("/v2/secrets", async (c) => {
    const who = await admit(c);
    const q = parseGetQuery(c);
    await authorize(who, q.app, false);
    const shown = onePerFile(await cache.read(q.app, q.proc, q.path))
      .map((e) => ({ path: e.path, content: e.content, owner: e.owner, group: e.group, mode: e.mode, proc: e.proc }));
    return c.json(shown);
  });

  app.delete("/v2/secrets", async (c) => {
    const who = await admit(c);
    const q = parseAddressQuery(c);
    await authorize(who, q.app, true);
    // Every spelling of the file goes: the usual ones (secretPathSpellings) and whatever else the
    // proc's stored records spell it as (the API once took `//platform/app/x`), found by listing
    // the proc's records (a DELETE is rare; a PUT does not list). Then one transaction: "all
    // absent" is the compare, the deletes the failure branch, so a failed compare means a record
    // existed and is now deleted.
    const keys = [...new Set([...secretPathSpellings(q.path).map((p) => secretKey(q.app, q.proc, p)), ...(await storedKeysOfFile(store, q.app, q.proc, q.path))])];
    const { succeeded: absent, revision } = await store.txn(
      keys.map((key) => ({ key, target: "createRevision" as const, equals: 0 })),
      [],
      keys.map((key) => ({ type: "delete" as const, key })),
    );
    const existed = !absent;
    if (existed || keys.some((k) => cache.holds(k))) cache.wrote(q.app, revision);
    log.info({ app: q.app, proc: q.proc, op: "delete", existed }, "secret deleted");
    return c.json({ app: q.app, proc: q.proc, path: q.path, deleted: existed });
  });

  app.post("/v2/sys/init", async (c) => {
    requireAdmin(await opts.gate.authenticate(c), "initializing the secrets service");
    const body = await readJsonBody(c, InitBody, "init request");
    const { keys, rootToken } = await vault.init(body.shares, body.threshold);
    return c.json({ keys, rootToken, shares: body.shares, threshold: body.threshold });
  });

  // The key share is the credential that unseals; a valid token is asked too, so an anonymous
  // caller cannot post junk shares that reset the operators' progress.
  app.post("/v2/sys/unseal", async (c) => {
    await opts.gate.authenticate(c);
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

/** The stored keys of `proc`'s records of the file `path` names, under any spelling; listed a page at a time. */
async function storedKeysOfFile(store: Store, app: string, proc: string, path: string): Promise<string[]> {
  const keys: string[] = [];
  let startAfter: string | undefined;
  for (;;) {
    const page = await store.list(procSecretsPrefix(app, proc), { limit: 100, ...(startAfter !== undefined ? { startAfter } : {}) });
    for (const kv of page.items) {
      const address = parseSecretKey(kv.key);
      if (address !== null && address.proc === proc && sameSecretFile(address.path, path)) keys.push(kv.key);
    }
    if (!page.more || page.items.length === 0) return keys;
    startAfter = page.items[page.items.length - 1]!.key;
  }
}
