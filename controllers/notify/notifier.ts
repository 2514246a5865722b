// The notifier (docs/notify.md): a leader-only runnable that follows the event records and POSTs
// each app's events to the webhooks of the channels its definition routes them to.
//
// - Order: one queue per app, worked by one loop, in the order the events were first seen (an
//   event written again, with a higher count, keeps its place when it has not been sent yet).
// - At most once per channel target: after a 2xx the notifier writes a marker
//   notify/delivered/<event>/<kind> = {count} through the fenced store, and it sends an event only
//   when neither its memory nor that marker says it went out at that count. Within a process
//   nothing is sent twice; a crash (or a lost leadership) between a 2xx and the marker write sends
//   that one event again from the next leader (at least once across that gap).
// - Retries: a POST that fails with no answer, 408, 429 or 5xx is tried again on the schedule of
//   decisions.ts (5 attempts, 1 s doubling); one that still fails, or gets another 4xx, is
//   reported as a NotifyFailed event on the event's object (never with the URL) and not retried.
// - Rate limit: each app has a token bucket (decisions.ts, 10 at once then one per 6 s); an
//   event without a token waits in its app's queue (at most `maxQueuedPerApp`, the newest beyond
//   that dropped and counted).
// - Every POST has a deadline (5 s); every store call one too. Markers of events that are gone
//   (pruned) are swept once a minute.
import { Registry } from "prom-client";
import { NotLeaderError } from "../../adapters/store/fenced.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import type { Store } from "../../adapters/store/store.ts";
import { eventsKeyPrefix, type EventRecord } from "../../api/resources/event.ts";
import { decodeDeliveredRecord, notifyKeys, type NotifyChannelRecord, type NotifyRoutesRecord } from "../../api/resources/notify.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { withDeadline } from "../../runtime/deadline.ts";
import type { Informer } from "../../runtime/informer.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { counter } from "../../runtime/metrics.ts";
import type { EventSink } from "../shared/events.ts";
import {
  defaultMaxAgeMs,
  defaultRateLimit,
  defaultRetrySchedule,
  failureMessage,
  fullBucket,
  needsDelivery,
  notifyBody,
  retryable,
  retryDelayMs,
  routeEvent,
  takeToken,
  type Bucket,
  type Delivery,
  type PostOutcome,
  type RateLimit,
  type RetrySchedule,
} from "./decisions.ts";
import { webhookPoster, type PostJson } from "./post.ts";

export interface NotifierOptions {
  events: Informer<EventRecord>;
  /** The events informer's prefix (default the orchestrator's events/). */
  eventsPrefix?: string;
  channels: Informer<NotifyChannelRecord>;
  routes: Informer<NotifyRoutesRecord>;
  /** The FENCED store: markers are written by the leader only. */
  store: Store;
  /** Where NotifyFailed events go (the orchestrator's recorder). */
  recorder: EventSink;
  /** The POST (default: undici, `postTimeoutMs` deadline). */
  post?: PostJson;
  postTimeoutMs?: number;
  rateLimit?: RateLimit;
  retry?: RetrySchedule;
  maxAgeMs?: number;
  maxQueuedPerApp?: number;
  /** Deadline of each store call (5 s). */
  storeTimeoutMs?: number;
  /** How often markers of deleted events are removed (1 min). */
  sweepIntervalMs?: number;
  clock?: Clock;
  /** Wall clock (ms since the epoch), compared with the events' lastTime. */
  now?: () => number;
  log?: Logger;
  registry?: Registry;
}

interface Queued {
  event: EventRecord;
  /** Wall-clock ms when first queued: the age check uses it, so a wait for a token does not age an event out. */
  seenAt: number;
}

interface AppQueue {
  items: Map<string, Queued>;
  bucket: Bucket;
  running: Promise<void> | undefined;
}

export class Notifier {
  readonly name = "notifier";
  private readonly o: NotifierOptions;
  private readonly post: PostJson;
  private readonly clock: Clock;
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly rate: RateLimit;
  private readonly retry: RetrySchedule;
  private readonly maxAgeMs: number;
  private readonly maxQueued: number;
  private readonly storeTimeoutMs: number;
  private readonly sweepMs: number;
  private readonly outcomes: ReturnType<typeof counter<"result">>;
  private queues = new Map<string, AppQueue>();
  /** event id -> kind -> count delivered (or given up on) by this process. */
  private sent = new Map<string, Map<string, number>>();
  private warnedMissing = new Set<string>();
  private dropWarned = new Set<string>();
  /** The store refused a fenced write: this term is over (the manager stops us); send nothing more. */
  private deposed = false;

  constructor(opts: NotifierOptions) {
    this.o = opts;
    this.post = opts.post ?? webhookPoster(opts.postTimeoutMs ?? 5_000);
    this.clock = opts.clock ?? realClock;
    this.now = opts.now ?? Date.now;
    this.log = (opts.log ?? silentLogger).child({ runnable: this.name });
    this.rate = opts.rateLimit ?? defaultRateLimit;
    this.retry = opts.retry ?? defaultRetrySchedule;
    this.maxAgeMs = opts.maxAgeMs ?? defaultMaxAgeMs;
    this.maxQueued = opts.maxQueuedPerApp ?? 500;
    this.storeTimeoutMs = opts.storeTimeoutMs ?? 5_000;
    this.sweepMs = opts.sweepIntervalMs ?? 60_000;
    if (!(this.rate.burst >= 1 && this.rate.refillMs > 0 && this.retry.attempts >= 1 && this.maxQueued >= 1)) throw new RangeError("notifier: bad bounds");
    this.outcomes = counter(opts.registry ?? new Registry(), {
      name: "notify_deliveries_total",
      help: "Event deliveries to notify channels, by outcome: delivered, retried (an attempt that failed and was tried again), failed (given up), dropped (over the app's queue)",
      labelNames: ["result"],
    });
  }

  async start(signal: AbortSignal): Promise<void> {
    const { events, channels, routes } = this.o;
    try {
      await Promise.all([events.waitForSync(signal), channels.waitForSync(signal), routes.waitForSync(signal)]);
    } catch {
      return; // stopped before the caches loaded
    }
    this.queues = new Map();
    this.sent = new Map();
    this.deposed = false;
    // Replays what the cache holds (in key order: creation order), then follows new writes.
    const unregister = events.addEventHandler({
      onAdd: (e) => this.enqueue(e, signal),
      onUpdate: (_old, e) => this.enqueue(e, signal),
      onDelete: (e) => this.sent.delete(e.id),
    });
    this.log.info({ rate: this.rate, retry: this.retry }, "notifier started");
    try {
      while (!signal.aborted) {
        await this.sweep(signal).catch((e: unknown) => {
          if (!signal.aborted && !(e instanceof NotLeaderError)) this.log.warn({ err: e }, "sweeping delivery markers failed; retrying next interval");
        });
        await this.clock.sleep(this.sweepMs, signal).catch(() => {});
      }
    } finally {
      unregister();
      await Promise.all([...this.queues.values()].map((q) => q.running));
    }
  }

  /** Resolves once every app's queue is empty and idle (tests). */
  async idle(): Promise<void> {
    while ([...this.queues.values()].some((q) => q.running !== undefined)) {
      await Promise.all([...this.queues.values()].map((q) => q.running));
    }
  }

  private enqueue(event: EventRecord, signal: AbortSignal): void {
    if (event.app === undefined || signal.aborted) return;
    // Old news (a new leader's replay of the cache) is not queued: needsDelivery would refuse it anyway.
    if (!needsDelivery(event, undefined, this.now(), this.maxAgeMs)) return;
    let q = this.queues.get(event.app);
    if (!q) {
      q = { items: new Map(), bucket: fullBucket(this.rate, this.clock.now()), running: undefined };
      this.queues.set(event.app, q);
    }
    const queued = q.items.get(event.id);
    if (queued) queued.event = event; // keeps its place, with the newest count
    else if (q.items.size >= this.maxQueued) {
      this.outcomes.inc({ result: "dropped" });
      // One warning per time the queue fills up; the rest are counted.
      if (!this.dropWarned.has(event.app)) this.log.warn({ app: event.app, event: event.id, reason: event.reason, queued: q.items.size }, "notify queue of the app is full: newer events are not sent");
      this.dropWarned.add(event.app);
      return;
    } else q.items.set(event.id, { event, seenAt: this.now() });
    this.kick(event.app, q, signal);
  }

  /** Start the app's loop unless it runs; a loop that ends with work left (queued as it ended) starts again. */
  private kick(app: string, q: AppQueue, signal: AbortSignal): void {
    if (q.running !== undefined || signal.aborted || this.deposed) return;
    q.running = this.work(app, q, signal).finally(() => {
      q.running = undefined;
      if (q.items.size > 0) this.kick(app, q, signal);
    });
  }

  private async work(app: string, q: AppQueue, signal: AbortSignal): Promise<void> {
    while (!signal.aborted && !this.deposed) {
      const first = q.items.entries().next();
      if (first.done) {
        this.dropWarned.delete(app);
        return;
      }
      const [id, item] = first.value;
      q.items.delete(id);
      try {
        await this.deliver(app, item, q, signal);
      } catch (e) {
        if (e instanceof NotLeaderError) this.deposed = true;
        if (signal.aborted || this.deposed) return;
        this.log.warn({ err: e, app, event: id }, "notifying an event failed");
      }
    }
  }

  private async deliver(app: string, item: Queued, q: AppQueue, signal: AbortSignal): Promise<void> {
    const { event } = item;
    const routes = this.o.routes.get(notifyKeys.route(app))?.routes;
    const kinds = new Set(this.o.channels.list().map((c) => c.kind));
    const { deliveries, missing } = routeEvent(event, routes, kinds);
    for (const kind of missing) {
      if (this.warnedMissing.has(`${app}/${kind}`)) continue;
      this.warnedMissing.add(`${app}/${kind}`);
      this.log.warn({ app, kind }, "the app routes events to a channel kind no admin has set up (capstan notify set KIND -webhook URL): not sent");
    }
    const due: Delivery[] = [];
    if (deliveries.length === 0 || !needsDelivery(event, undefined, item.seenAt, this.maxAgeMs)) return;
    for (const d of deliveries) if (needsDelivery(event, await this.delivered(event.id, d.kind, signal), item.seenAt, this.maxAgeMs)) due.push(d);
    if (due.length === 0) return;
    for (;;) {
      const { bucket, waitMs } = takeToken(q.bucket, this.clock.now(), this.rate);
      q.bucket = bucket;
      if (waitMs === 0) break;
      await this.clock.sleep(waitMs, signal);
    }
    await Promise.all(due.map((d) => this.deliverTo(event, d, signal)));
  }

  /** What this process, else the store's marker, says was delivered of `id` to `kind`. */
  private async delivered(id: string, kind: string, signal: AbortSignal): Promise<{ count: number } | undefined> {
    const known = this.sent.get(id)?.get(kind);
    if (known !== undefined) return { count: known };
    const kv = await withDeadline(this.o.store.get(notifyKeys.deliveredTo(id, kind)), this.storeTimeoutMs, this.clock, "read a delivery marker", signal);
    const marker = kv === null ? undefined : decodeDeliveredRecord(kv.value);
    if (marker) this.remember(id, kind, marker.count);
    return marker;
  }

  private remember(id: string, kind: string, count: number): void {
    let kinds = this.sent.get(id);
    if (!kinds) this.sent.set(id, (kinds = new Map()));
    kinds.set(kind, Math.max(count, kinds.get(kind) ?? 0));
  }

  private async deliverTo(event: EventRecord, d: Delivery, signal: AbortSignal): Promise<void> {
    const channel = this.o.channels.get(notifyKeys.channel(d.kind));
    if (!channel) return; // deleted meanwhile
    const body = notifyBody(event, d.target);
    let outcome: PostOutcome = { ok: false, problem: "not attempted" };
    for (let attempt = 1; ; attempt++) {
      const delay = retryDelayMs(attempt, this.retry);
      if (delay === undefined) break;
      if (delay > 0) {
        this.outcomes.inc({ result: "retried" });
        await this.clock.sleep(delay, signal);
      }
      if (signal.aborted || this.deposed) return;
      outcome = await this.post(channel.webhook, body, signal);
      if (outcome.ok || !retryable(outcome)) break;
    }
    if (signal.aborted) return;
    // Remembered either way: within this process the event is not sent (or reported) again at this count.
    this.remember(event.id, d.kind, event.count);
    if (outcome.ok) {
      this.outcomes.inc({ result: "delivered" });
      const marker = JSON.stringify({ count: event.count, at: new Date(this.now()).toISOString() });
      await withDeadline(this.o.store.put(notifyKeys.deliveredTo(event.id, d.kind), marker), this.storeTimeoutMs, this.clock, "write a delivery marker", signal);
      this.log.debug({ app: event.app, event: event.id, kind: d.kind, count: event.count }, "event delivered");
      return;
    }
    this.outcomes.inc({ result: "failed" });
    const problem = outcome.problem;
    this.log.warn({ app: event.app, event: event.id, reason: event.reason, kind: d.kind, target: d.target, problem }, "event not delivered to the notify channel");
    this.o.recorder.record({
      type: "Warning",
      reason: "NotifyFailed",
      kind: event.kind,
      name: event.name,
      ...(event.app !== undefined && { app: event.app }),
      message: failureMessage(d.kind, d.target, event.reason, problem),
    });
  }

  /** Delete the markers of events that are no longer stored (the pruner removed them). */
  private async sweep(signal: AbortSignal): Promise<void> {
    const { items } = await withDeadline(listAll(this.o.store, notifyKeys.delivered), this.storeTimeoutMs * 6, this.clock, "list delivery markers", signal);
    const gone = new Set<string>();
    for (const kv of items) {
      const id = kv.key.slice(notifyKeys.delivered.length).split("/")[0]!;
      if (this.o.events.get(this.eventKey(id)) === undefined) gone.add(id);
    }
    const ids = [...gone];
    for (let i = 0; i < ids.length && !signal.aborted; i += 64) {
      const ops = ids.slice(i, i + 64).map((id) => ({ type: "deletePrefix" as const, prefix: notifyKeys.deliveredOf(id) }));
      await withDeadline(this.o.store.txn([], ops), this.storeTimeoutMs, this.clock, "delete delivery markers", signal);
    }
    if (ids.length > 0) this.log.debug({ events: ids.length }, "delivery markers of deleted events removed");
  }

  private eventKey(id: string): string {
    return `${this.o.eventsPrefix ?? eventsKeyPrefix()}${id}`;
  }
}
