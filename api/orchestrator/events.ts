// GET /api/events (docs/events.md, docs/api-reference.md): the events the controllers recorded,
// read from this replica's informer of the events prefix (no store read per request), filtered to
// what the caller may read: an app's events to whoever may read the app, node events to every
// authenticated caller (everyone may list the nodes; docs/security.md).
//
//   GET /api/events?app=&kind=&name=&since=&limit=&watch=   200 EventRecord[] | NDJSON stream | 400 | 403
//
// Newest last (by lastTime). `limit` keeps the newest N (default 500, at most 5000). With
// watch=true the answer is NDJSON: the matching events (as without watch), then every event
// written or updated (an aggregated repeat: same id, higher count) from then on, until the client
// goes away.
import type { Context } from "hono";
import { Hono } from "hono";
import type { Socket } from "node:net";
import { z } from "zod";
import type { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { may, requireApp, seesAllApps, type ApiAccess, type Principal } from "../auth/index.ts";
import { whileAllowed } from "../auth/still-allowed.ts";
import { errorHandler, notFoundHandler, parseQuery, queryBoolean, systemWallClock, unavailable, type WallClock } from "../http/index.ts";
import type { KeyValueLike } from "../../runtime/listwatch.ts";
import { compareEvents, decodeEventRecord, eventKinds, type EventRecord } from "../resources/event.ts";
import { Name } from "../resources/podgroup.ts";
import { sinceParam } from "./queries.ts";

export const defaultEventLimit = 500;
export const maxEventLimit = 5000;

/** GET /api/events's parameters, `since` read from `clock`. */
export const eventsQuery = (clock: WallClock) => z.object({
  app: Name.optional().describe("only this app's events (403 when the caller may not read it)"),
  kind: z.enum(eventKinds, { error: `must be one of ${eventKinds.join(", ")}` }).optional().describe("only events of this kind of object"),
  name: z.string().min(1, "must not be empty").max(256).optional().describe("only events of objects of this name"),
  since: sinceParam(clock).optional().describe("only events last seen since a duration ago (10m, 1h30m) or an RFC 3339 time"),
  limit: z
    .string()
    .regex(/^\d{1,9}$/, "must be a whole number from 1 to 5000")
    .transform(Number)
    .pipe(z.number().min(1, "must be at least 1").max(maxEventLimit, `must be at most ${maxEventLimit}`))
    .optional()
    .describe(`the newest N (default ${defaultEventLimit}, at most ${maxEventLimit})`),
  watch: queryBoolean.optional().describe("true: NDJSON, the matching events and then new ones as they are written, until the client disconnects"),
});
export const EventsQuery = eventsQuery(systemWallClock);
export type EventsQuery = z.output<typeof EventsQuery>;

/** The informer's decode: event records only (anything else is left out of the cache). */
export function decodeEvent(kv: KeyValueLike): EventRecord {
  const r = decodeEventRecord(kv.value);
  if (r === undefined) throw new TypeError(`event ${kv.key} is not an event record`);
  return r;
}

export interface EventsApiOptions {
  /** The events prefix's informer (cli/orchestrator.ts runs one per process). */
  events: Informer<EventRecord>;
  log?: Logger;
  access: Pick<ApiAccess, "gate">;
  /** How long a request waits for the informer's first sync before answering 503 (5 s). */
  syncWaitMs?: number;
  /** Wall clock for `since` (default the system's). */
  clock?: WallClock;
}

/** Events of a watch a client has not read yet, beyond which the watch is ended (a client that stopped reading). */
const maxUnread = 10_000;

/** Whether `who` may read `e`: its app's readers, or everyone for a node's. */
export function mayReadEvent(who: Principal, e: EventRecord): boolean {
  if (e.app !== undefined) return may(who, "read", e.app);
  return e.kind === "node" || seesAllApps(who);
}

/** The filter of a request: permission first, then the parameters. */
export function eventFilter(who: Principal, q: EventsQuery): (e: EventRecord) => boolean {
  return (e) =>
    mayReadEvent(who, e) &&
    (q.app === undefined || e.app === q.app) &&
    (q.kind === undefined || e.kind === q.kind) &&
    (q.name === undefined || e.name === q.name) &&
    (q.since === undefined || Date.parse(e.lastTime) >= q.since);
}

export function createEventsApi(opts: EventsApiOptions): Hono {
  const { events } = opts;
  const log = (opts.log ?? silentLogger).child({ api: "events" });
  const syncWaitMs = opts.syncWaitMs ?? 5_000;
  const { gate } = opts.access;
  const query = eventsQuery(opts.clock ?? systemWallClock);
  const app = new Hono();
  app.onError(errorHandler(log));
  app.notFound(notFoundHandler);

  app.get("/api/events", async (c) => {
    const who = await gate.authenticate(c);
    const q = parseQuery(c, query);
    if (q.app !== undefined) requireApp(who, "read", q.app);
    if (!events.hasSynced()) {
      await events.waitForSync(c.req.raw.signal, syncWaitMs).catch(() => {
        throw unavailable("the events are not loaded yet; retry in a moment");
      });
    }
    const match = eventFilter(who, q);
    const found = events.list().filter(match).sort(compareEvents).slice(-(q.limit ?? defaultEventLimit));
    if (q.watch !== true) return c.json(found);
    // A watch lasts for hours: the caller's token and grants are checked again as they change (a
    // revoked token, a removed maintainer), and the watch ends once they no longer allow it.
    const recheck = async () => {
      try {
        const now = await gate.authenticate(c);
        return q.app !== undefined && !may(now, "read", q.app) ? undefined : eventFilter(now, q);
      } catch {
        return undefined;
      }
    };
    return watchResponse(c, events, found, match, log, recheck);
  });

  // Other methods and sub-paths answer in this API's error shape (see podgroups.ts).
  app.all("/api/events", notFoundHandler);
  app.all("/api/events/*", notFoundHandler);
  return app;
}

/** NDJSON: `initial`, then every matching event written or updated until the client goes away, or its rights do. */
function watchResponse(
  c: Context,
  events: Informer<EventRecord>,
  initial: EventRecord[],
  firstMatch: (e: EventRecord) => boolean,
  log: Logger,
  recheck: () => Promise<((e: EventRecord) => boolean) | undefined>,
): Response {
  let match = firstMatch;
  const encoder = new TextEncoder();
  const request = c.req.raw.signal;
  /** What was sent of each event (count and lastTime), so an unchanged one is not sent twice. */
  const sent = new Map<string, string>();
  let unregister: (() => void) | undefined;
  let finished = false;
  let stopRechecks: (() => void) | undefined;
  const finish = () => {
    if (finished) return;
    finished = true;
    stopRechecks?.();
    unregister?.();
    request.removeEventListener("abort", onClientGone);
  };
  let stream!: ReadableStreamDefaultController<Uint8Array>;
  const onClientGone = () => {
    finish();
    try {
      stream.close();
    } catch {
      // already closed
    }
    log.debug("event watch ended by the client");
  };
  const send = (e: EventRecord) => {
    if (finished) return;
    const seen = `${e.count}|${e.lastTime}`;
    if (sent.get(e.id) === seen) return;
    sent.set(e.id, seen);
    if ((stream.desiredSize ?? 0) < -maxUnread) {
      log.warn({ unread: -(stream.desiredSize ?? 0) }, "event watch ended: the client does not read");
      finish();
      stream.error(new Error("the client does not read the events"));
      return;
    }
    stream.enqueue(encoder.encode(`${JSON.stringify(e)}\n`));
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      stream = controller;
      for (const e of initial) send(e);
      // Registered in the same turn as the list above was taken: nothing falls between them.
      unregister = events.addEventHandler({
        onAdd: (e, _key, meta) => {
          if (!meta.isInInitialList && match(e)) send(e);
        },
        onUpdate: (_old, e) => {
          if (match(e)) send(e);
        },
        onDelete: (e) => {
          sent.delete(e.id); // pruned: nothing more will come of it
        },
      });
      request.addEventListener("abort", onClientGone, { once: true });
      if (request.aborted) onClientGone();
      stopRechecks = whileAllowed(
        async () => {
          const next = await recheck();
          if (next !== undefined) match = next;
          return next !== undefined;
        },
        () => {
          log.info("event watch ended: the caller's token or grants no longer allow it");
          finish();
          try {
            stream.close();
          } catch {
            // already closed
          }
        },
      );
    },
    cancel() {
      finish();
      log.debug("event watch cancelled by the client");
    },
  });
  // A watch can be quiet for hours: TCP keep-alive notices a client that vanished without closing.
  (c.env as { incoming?: { socket?: Socket } } | undefined)?.incoming?.socket?.setKeepAlive(true, 30_000);
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": "application/x-ndjson",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "x-accel-buffering": "no",
    },
  });
}
