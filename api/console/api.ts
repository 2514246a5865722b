// The console's HTTP API (docs/console.md, "Endpoints"): apps and their maintainers, access tokens, and the role check the
// secrets service (and later the registry) delegate authorization to.
//
//   POST   /api/v1/apps                    {appname, maintainers}        201 AppRecord | 400 | 409
//   GET    /api/v1/apps                                                  200 AppRecord[]
//   GET    /api/v1/apps/<app>                                            200 AppRecord | 404
//   DELETE /api/v1/apps/<app>                                            200 {appname, deleted} | 404
//   PUT    /api/v1/apps/<app>/maintainers  {maintainers}                 200 AppRecord | 400 | 404
//   PATCH  /api/v1/apps/<app>/maintainers  {add?, remove?}               200 {app, added, removed} | 400 | 404
//   POST   /api/v1/tokens                  {user, role?, expiresIn?}     201 {id, token, user, role, createdAt, expiresAt?}
//   GET    /api/v1/tokens                                                200 [{id, user, role, createdAt, expiresAt?}]
//   DELETE /api/v1/tokens/<id>                                           200 {id, deleted} | 404 | 409 last admin token
//   GET    /api/v1/repos/<app>/roles/      (any valid token)             200 {role: {role}} | 401 | 403 | 404
//   GET    /api/v1/whoami                  (any valid token)             200 {id, user, role, apps, allApps, expiresAt?}
//   GET    /api/v1/authorize/registry/     (Basic: user + access token)  200 {token, ...} | 401 (registry-token.ts)
//   POST   /api/v1/sso/start, /sso/token   (no token: a login)           200 | 400 | 403 | 404 SSO off (sso.ts)
//
// Every call but the role check and whoami needs an admin token (`access-token` or `Authorization:
// Bearer`; 401 without a valid token, 403 with a valid non-admin one). Tokens are checked by the
// gate every API shares (docs/security.md). Authentication comes before validation, so an anonymous
// caller learns nothing about the input rules. Every write is compare-and-swap: a create expects the key
// absent, an update or delete expects the revision it read.
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { Store } from "../../adapters/store/store.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { badRequest, notAllowed, notFound, parseWith, readJsonBody, unavailable } from "../http/index.ts";
import { auditObject, requireAdmin, seesAllApps, type Gate, type Principal } from "../auth/index.ts";
import { systemWallClock, type WallClock } from "./clock.ts";
import { parseLifetime } from "./duration.ts";
import { authErrorHandler, authNotFoundHandler, forbidden } from "./errors.ts";
import {
  AppName,
  AppRecord,
  appKey,
  appsPrefix,
  decodeRecord,
  Email,
  Maintainers,
  Role,
  TokenRecord,
  tokenKey,
  tokensPrefix,
} from "./records.ts";
import { editMaintainers, type MaintainersEdited } from "./maintainers.ts";
import { generateToken, hashSecret } from "./tokens.ts";
import { registryTokenApi, type RegistryTokenApiOptions } from "./registry-token.ts";
import { ssoApi, type SsoLogin } from "./sso.ts";

export interface ConsoleApiOptions {
  store: Store;
  log?: Logger;
  /** Wall clock for createdAt and token expiry (default Date.now). */
  clock?: WallClock;
  /** Who may call (api/auth). */
  gate: Gate;
  /** Called after every change of a token or an app, so this process's token cache forgets at once. */
  changed?: () => void;
  /** The registry token endpoint, GET /api/v1/authorize/registry/ (registry-token.ts); absent: not served. */
  registryToken?: RegistryTokenApiOptions;
  /** Single sign-on, POST /api/v1/sso/{start,token} (sso.ts); absent: both answer 404. */
  sso?: SsoLogin;
}

const CreateAppBody = z.strictObject({ appname: AppName, maintainers: Maintainers });
const MaintainersBody = z.strictObject({ maintainers: Maintainers });
const MaintainersEditBody = z
  .strictObject({
    add: z.array(Email).max(100, "must list at most 100 e-mails").optional(),
    remove: z.array(Email).max(100, "must list at most 100 e-mails").optional(),
  })
  .refine((b) => (b.add?.length ?? 0) + (b.remove?.length ?? 0) > 0, { message: "must add or remove at least one e-mail", path: ["add"] })
  .refine((b) => !(b.add ?? []).some((e) => (b.remove ?? []).includes(e)), { message: "must not name an e-mail in both add and remove", path: ["remove"] });
const CreateTokenBody = z
  .strictObject({
    user: z.string().min(1, "must not be empty").max(254, "must be at most 254 characters"),
    role: Role.default("user"),
    expiresIn: z.string().refine((s) => parseLifetime(s) !== null, "must be a lifetime like 90s, 30m, 24h or 7d (at most 3650d)").optional(),
    apps: z.array(AppName).max(1000, "must list at most 1000 apps").optional(),
  })
  .transform((b, ctx) => {
    // A viewer reads the apps granted on its token, so it needs at least one; other roles get their
    // apps elsewhere (maintainer lists, or all of them) and a grant would mean nothing.
    if (b.role === "viewer" && (b.apps === undefined || b.apps.length === 0)) {
      ctx.addIssue({ code: "custom", path: ["apps"], message: "must list at least one app for a viewer token" });
      return z.NEVER;
    }
    if (b.role !== "viewer" && b.apps !== undefined) {
      ctx.addIssue({ code: "custom", path: ["apps"], message: `is only for viewer tokens (a ${b.role} token's apps are not granted on the token)` });
      return z.NEVER;
    }
    if (b.apps !== undefined) b = { ...b, apps: [...new Set(b.apps)] };
    // A user or viewer token is a person's, matched against maintainer e-mails, so its user must be
    // one; a sync or admin token names a service or a person and only has to be a readable label.
    if (b.role === "user" || b.role === "viewer") {
      const email = Email.safeParse(b.user);
      if (!email.success) {
        ctx.addIssue({ code: "custom", path: ["user"], message: `must be an e-mail address for a ${b.role} token` });
        return z.NEVER;
      }
      return { ...b, user: email.data };
    }
    if (!/^[\x21-\x7e]+$/.test(b.user)) {
      ctx.addIssue({ code: "custom", path: ["user"], message: "must be printable ASCII without spaces" });
      return z.NEVER;
    }
    return b;
  });

/** Optimistic read-modify-write attempts before answering 503 (only under heavy contention). */
const casAttempts = 8;

/**
 * Before a read-modify-write's next attempt: a random wait, longer after each lost attempt (up to
 * 4, 8, ..., 256 ms), so that edits at once take turns instead of colliding again. None after the
 * last.
 */
const casBackoff = (attempt: number) => (attempt + 1 < casAttempts ? new Promise((resolve) => setTimeout(resolve, Math.random() * 4 * 2 ** attempt)) : Promise.resolve());

export function createConsoleApi(opts: ConsoleApiOptions): Hono {
  const { store } = opts;
  const clock = opts.clock ?? systemWallClock;
  const log = (opts.log ?? silentLogger).child({ api: "console" });
  const app = new Hono();
  app.onError(authErrorHandler(log));
  app.notFound(authNotFoundHandler);

  const nowIso = () => new Date(clock.now()).toISOString();
  const changed = opts.changed ?? (() => {});
  const admin = async (c: Context): Promise<Principal> => {
    const who = await opts.gate.authenticate(c);
    requireAdmin(who, "this call");
    return who;
  };
  const appParam = (c: Context) => parseWith(AppName, c.req.param("app"), "app name", "app");
  const readApp = async (name: string) => {
    const kv = await store.get(appKey(name));
    if (kv === null) throw notFound(`app ${name} is not registered`);
    return { kv, record: decodeRecord(AppRecord, kv.key, kv.value) };
  };

  /**
   * Read-modify-write of an app's record, as a compare-and-swap that reads again (after a short
   * random wait) when another write came first: `change` gives the record to write, or undefined
   * when there is nothing to write. The record as it is after, written or not; 503 when the
   * writes keep losing.
   */
  const changeApp = async (name: string, change: (record: AppRecord) => AppRecord | undefined): Promise<AppRecord> => {
    for (let attempt = 0; attempt < casAttempts; attempt++) {
      const { kv, record } = await readApp(name);
      const next = change(record);
      if (next === undefined) return record;
      const result = await store.put(kv.key, JSON.stringify(next), { expect: [{ key: kv.key, target: "modRevision", equals: kv.modRevision }] });
      if (result.succeeded) {
        changed();
        return next;
      }
      await casBackoff(attempt);
    }
    throw unavailable(`app ${name} is changing too often; retry`);
  };

  app.post("/api/v1/apps", async (c) => {
    await admin(c);
    const body = await readJsonBody(c, CreateAppBody, "app");
    auditObject(c.req.raw, `app/${body.appname}`);
    const record: AppRecord = { appname: body.appname, maintainers: body.maintainers, createdAt: nowIso() };
    const key = appKey(body.appname);
    const result = await store.put(key, JSON.stringify(record), { expect: [{ key, target: "createRevision", equals: 0 }] });
    if (!result.succeeded) throw notAllowed("AlreadyExists", `app ${body.appname} is already registered`);
    changed();
    log.info({ app: body.appname }, "app registered");
    return c.json(record, 201);
  });

  app.get("/api/v1/apps", async (c) => {
    await admin(c);
    const { items } = await store.list(appsPrefix);
    return c.json(items.map((kv) => decodeRecord(AppRecord, kv.key, kv.value)));
  });

  app.get("/api/v1/apps/:app", async (c) => {
    await admin(c);
    return c.json((await readApp(appParam(c))).record);
  });

  app.delete("/api/v1/apps/:app", async (c) => {
    await admin(c);
    const name = appParam(c);
    const { kv } = await readApp(name);
    const result = await store.delete(kv.key, { expect: [{ key: kv.key, target: "modRevision", equals: kv.modRevision }] });
    // Changed between read and delete: whoever changed it wins; the caller retries with fresh eyes.
    if (!result.succeeded) throw notAllowed("InUse", `app ${name} changed while it was being deleted; retry`);
    changed();
    log.info({ app: name }, "app unregistered");
    return c.json({ appname: name, deleted: true });
  });

  app.put("/api/v1/apps/:app/maintainers", async (c) => {
    await admin(c);
    const name = appParam(c);
    const body = await readJsonBody(c, MaintainersBody, "maintainers");
    const after = await changeApp(name, (record) => ({ ...record, maintainers: body.maintainers }));
    log.info({ app: name, maintainers: after.maintainers.length }, "maintainers changed");
    return c.json(after);
  });

  // Who is added and removed is worked out from the list as stored, in the compare-and-swap loop:
  // two edits at once both land.
  app.patch("/api/v1/apps/:app/maintainers", async (c) => {
    await admin(c);
    const name = appParam(c);
    const body = await readJsonBody(c, MaintainersEditBody, "maintainers edit");
    let done: MaintainersEdited = { maintainers: [], added: [], removed: [] };
    const after = await changeApp(name, (record) => {
      const edited = editMaintainers(record.maintainers, { add: body.add ?? [], remove: body.remove ?? [] });
      if ("error" in edited) throw badRequest(`invalid maintainers edit: ${edited.field}: app ${name} ${edited.error}`, [{ path: edited.field, message: `app ${name} ${edited.error}` }]);
      done = edited;
      return edited.added.length === 0 && edited.removed.length === 0 ? undefined : { ...record, maintainers: edited.maintainers };
    });
    if (done.added.length > 0 || done.removed.length > 0) log.info({ app: name, added: done.added.length, removed: done.removed.length }, "maintainers changed");
    return c.json({ app: after, added: done.added, removed: done.removed });
  });

  app.post("/api/v1/tokens", async (c) => {
    await admin(c);
    const body = await readJsonBody(c, CreateTokenBody, "token request");
    const fresh = generateToken();
    auditObject(c.req.raw, `token/${fresh.id} (user ${body.user}, role ${body.role}${body.apps ? `, apps ${body.apps.join(",")}` : ""})`);
    // A grant names registered apps only: one on a name nobody holds would read whatever app is
    // registered under it later.
    const unknown = [];
    for (const [i, name] of (body.apps ?? []).entries()) if ((await store.get(appKey(name))) === null) unknown.push({ path: `apps[${i}]`, message: `app ${name} is not registered` });
    if (unknown.length > 0) throw badRequest(`invalid token request: ${unknown.map((d) => `${d.path}: ${d.message}`).join("; ")}`, unknown);
    const createdAt = clock.now();
    const record: TokenRecord = {
      id: fresh.id,
      user: body.user,
      role: body.role,
      hash: hashSecret(fresh.secret),
      createdAt: new Date(createdAt).toISOString(),
      ...(body.expiresIn !== undefined ? { expiresAt: new Date(createdAt + parseLifetime(body.expiresIn)!).toISOString() } : {}),
      ...(body.apps !== undefined ? { apps: body.apps } : {}),
    };
    const key = tokenKey(fresh.id);
    const result = await store.put(key, JSON.stringify(record), { expect: [{ key, target: "createRevision", equals: 0 }] });
    // 48 random bits collided with a stored id: astronomically rare, and safe to retry.
    if (!result.succeeded) throw unavailable("token id collision; retry");
    log.info({ tokenId: record.id, role: record.role }, "token created");
    const { hash: _hash, ...shown } = record;
    return c.json({ ...shown, token: fresh.token }, 201);
  });

  app.get("/api/v1/tokens", async (c) => {
    await admin(c);
    const { items } = await store.list(tokensPrefix);
    return c.json(
      items.map((kv) => {
        const { hash: _hash, ...shown } = decodeRecord(TokenRecord, kv.key, kv.value);
        return shown;
      }),
    );
  });

  app.delete("/api/v1/tokens/:id", async (c) => {
    await admin(c);
    const id = c.req.param("id");
    if (!/^[0-9a-f]{12}$/.test(id)) throw badRequest("token id must be 12 lower-case hex characters", [{ path: "id", message: "must be 12 lower-case hex characters" }]);
    const { items, revision } = await store.list(tokensPrefix);
    const target = items.find((kv) => kv.key === tokenKey(id));
    if (target === undefined) throw notFound(`token ${id} does not exist`);
    const admins = items.filter((kv) => decodeRecord(TokenRecord, kv.key, kv.value).role === "admin");
    const isAdmin = admins.some((kv) => kv.key === target.key);
    // Revoking the last admin token would lock every admin out until a restart with
    // CAPSTAN_ADMIN_TOKEN; refuse it. The compare on every admin key keeps that true under races.
    if (isAdmin && admins.length === 1) throw notAllowed("InUse", `token ${id} is the last admin token; create another admin token first`);
    const compares = admins.map((kv) => ({ key: kv.key, target: "modRevision" as const, equals: kv.modRevision }));
    compares.push({ key: target.key, target: "modRevision", equals: target.modRevision });
    const result = await store.txn(compares, [{ type: "delete", key: target.key }]);
    if (!result.succeeded) throw notAllowed("InUse", `tokens changed while token ${id} was being revoked (at revision ${revision}); retry`);
    changed();
    log.info({ tokenId: id }, "token revoked");
    return c.json({ id, deleted: true });
  });

  // The original lvault's question ("has this token a role on app X?"); a viewer's answer is
  // "viewer", which grants reading the app's objects but not its secrets.
  const roleCheck = async (c: Context) => {
    const who = await opts.gate.authenticate(c);
    const { record } = await readApp(appParam(c));
    if (who.role === "admin" || who.role === "sync") return c.json({ role: { role: who.role } });
    if (who.role === "user" && record.maintainers.includes(who.user)) return c.json({ role: { role: "maintainer" } });
    if (who.role === "viewer" && who.apps.has(record.appname)) return c.json({ role: { role: "viewer" } });
    throw forbidden(`${who.user} has no role on app ${record.appname}`, `a role on app ${record.appname}`);
  };

  app.get("/api/v1/whoami", async (c) => {
    const who = await opts.gate.authenticate(c);
    let expiresAt: string | undefined;
    if (who.tokenId !== "-") {
      const kv = await store.get(tokenKey(who.tokenId));
      if (kv !== null) expiresAt = decodeRecord(TokenRecord, kv.key, kv.value).expiresAt;
    }
    return c.json({
      id: who.tokenId,
      user: who.user,
      role: who.role,
      apps: [...who.apps].sort(),
      allApps: seesAllApps(who),
      ...(expiresAt !== undefined ? { expiresAt } : {}),
    });
  });
  app.get("/api/v1/repos/:app/roles/", roleCheck);
  app.get("/api/v1/repos/:app/roles", roleCheck);
  if (opts.registryToken !== undefined) app.route("/", registryTokenApi(opts.registryToken));
  app.route("/", ssoApi({ login: opts.sso, log: opts.log }));

  return app;
}
