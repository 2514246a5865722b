// The notify API (docs/notify.md, docs/api-reference.md): the admin's channel kinds and each app's
// routes, records in the store that the leader's notifier (controllers/notify/) follows.
//
//   GET    /api/notify/channels          admin   200 NotifyChannelView[] (webhooks redacted)
//   PUT    /api/notify/channels/<kind>   admin   200 NotifyChannelView   body {webhook}
//   DELETE /api/notify/channels/<kind>   admin   204 | 404
//   GET    /api/notify/routes/<app>      read    200 NotifyRoutesRecord (routes {} when none)
//   PUT    /api/notify/routes/<app>      write   200 NotifyRoutesRecord  body {routes: {<kind>: "<target>"}}; {} removes them
//
// The webhook URL is a secret: it is read from the body (the audit line records method and path,
// never bodies), stored, and answered or logged only as redactWebhook shows it. Every check
// (authentication, the body, the permission) comes before the write: a refused request changes nothing.
import { Hono } from "hono";
import type { Store } from "../../adapters/store/store.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { auditObject, requireAdmin, requireApp, type ApiAccess } from "../auth/index.ts";
import { badRequest, errorHandler, isoNow, notFound, notFoundHandler, readJsonBody, systemWallClock, type WallClock } from "../http/index.ts";
import {
  channelKindPattern,
  channelView,
  decodeChannelRecord,
  decodeRoutesRecord,
  notifyKeys,
  NotifyChannelInput,
  NotifyRoutesInput,
  type NotifyChannelRecord,
  type NotifyRoutesRecord,
} from "../resources/notify.ts";
import { namePattern } from "../resources/podgroup.ts";

export interface NotifyApiOptions {
  /** Not fenced: any replica accepts these writes (each is one put or delete). */
  store: Store;
  log?: Logger;
  access: Pick<ApiAccess, "gate">;
  clock?: WallClock;
}

export function createNotifyApi(opts: NotifyApiOptions): Hono {
  const { store } = opts;
  const log = (opts.log ?? silentLogger).child({ api: "notify" });
  const clock = opts.clock ?? systemWallClock;
  const { gate } = opts.access;
  const app = new Hono();
  app.onError(errorHandler(log));
  app.notFound(notFoundHandler);

  const kindParam = (kind: string): string => {
    if (!channelKindPattern.test(kind)) throw badRequest(`kind: "${kind.slice(0, 40)}" is not a channel kind`, [{ path: "kind", message: "must be a lower-case word: a-z first, then a-z, 0-9, _ or -, at most 32 characters" }]);
    return kind;
  };
  const appParam = (name: string): string => {
    if (!namePattern.test(name)) throw badRequest(`app: "${name.slice(0, 40)}" is not an app name`, [{ path: "app", message: "must match [a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?" }]);
    return name;
  };

  app.get("/api/notify/channels", async (c) => {
    requireAdmin(await gate.authenticate(c), "listing the notify channels");
    const { items } = await listAll(store, notifyKeys.channels);
    const views = items.flatMap((kv) => {
      const r = decodeChannelRecord(kv.value);
      return r === undefined ? [] : [channelView(r)];
    });
    return c.json(views.sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0)));
  });

  app.put("/api/notify/channels/:kind", async (c) => {
    const who = await gate.authenticate(c);
    const kind = kindParam(c.req.param("kind"));
    auditObject(c.req.raw, `notify-channel/${kind}`);
    requireAdmin(who, "setting a notify channel");
    const input = await readJsonBody(c, NotifyChannelInput, "NotifyChannel");
    const record: NotifyChannelRecord = { kind, webhook: input.webhook, updatedAt: isoNow(clock), updatedBy: who.user };
    await store.put(notifyKeys.channel(kind), JSON.stringify(record));
    const view = channelView(record);
    log.info({ kind, webhook: view.webhook, by: who.user }, "notify channel set");
    return c.json(view);
  });

  app.delete("/api/notify/channels/:kind", async (c) => {
    const who = await gate.authenticate(c);
    const kind = kindParam(c.req.param("kind"));
    auditObject(c.req.raw, `notify-channel/${kind}`);
    requireAdmin(who, "deleting a notify channel");
    const key = notifyKeys.channel(kind);
    const { succeeded } = await store.txn([{ key, target: "createRevision", equals: 0 }], [], [{ type: "delete", key }]);
    if (succeeded) throw notFound(`notify channel ${kind} not found`);
    log.info({ kind, by: who.user }, "notify channel deleted");
    return c.body(null, 204);
  });

  app.get("/api/notify/routes/:app", async (c) => {
    const who = await gate.authenticate(c);
    const name = appParam(c.req.param("app"));
    requireApp(who, "read", name);
    const kv = await store.get(notifyKeys.route(name));
    const record = kv === null ? undefined : decodeRoutesRecord(kv.value);
    return c.json(record ?? { app: name, routes: {}, updatedAt: "", updatedBy: "" });
  });

  app.put("/api/notify/routes/:app", async (c) => {
    const who = await gate.authenticate(c);
    const name = appParam(c.req.param("app"));
    auditObject(c.req.raw, `notify-routes/${name}`);
    requireApp(who, "write", name);
    const input = await readJsonBody(c, NotifyRoutesInput, "NotifyRoutes");
    const record: NotifyRoutesRecord = { app: name, routes: input.routes, updatedAt: isoNow(clock), updatedBy: who.user };
    if (Object.keys(input.routes).length === 0) await store.delete(notifyKeys.route(name));
    else await store.put(notifyKeys.route(name), JSON.stringify(record));
    log.info({ app: name, routes: input.routes, by: who.user }, "notify routes set");
    return c.json(record);
  });

  app.all("/api/notify/*", notFoundHandler);
  return app;
}
