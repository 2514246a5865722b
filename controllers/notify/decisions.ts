// The notifier's decisions, as plain functions (docs/notify.md): which events go to which channel,
// the retry schedule, the per-app rate limit, whether an event was delivered already, and the
// body that is POSTed. No I/O here; controllers/notify/notifier.ts does it.
import type { EventRecord } from "../../api/resources/event.ts";
import type { DeliveredRecord } from "../../api/resources/notify.ts";

/** One POST to make: the event to the channel kind's webhook, naming the app's target in it. */
export interface Delivery {
  kind: string;
  target: string;
}

/** Events the notifier never sends: its own failure reports (a failing channel would report to itself). */
export const notSentReasons: ReadonlySet<string> = new Set(["NotifyFailed"]);

/**
 * The deliveries of `event`: one per route of its app whose kind has a channel. Node events (no
 * app) go nowhere. `missing` names the routes whose kind no admin has set up (reported, not sent).
 */
export function routeEvent(
  event: Pick<EventRecord, "app" | "reason">,
  routes: Readonly<Record<string, string>> | undefined,
  channelKinds: ReadonlySet<string>,
): { deliveries: Delivery[]; missing: string[] } {
  if (event.app === undefined || routes === undefined || notSentReasons.has(event.reason)) return { deliveries: [], missing: [] };
  const deliveries: Delivery[] = [];
  const missing: string[] = [];
  for (const kind of Object.keys(routes).sort()) {
    if (channelKinds.has(kind)) deliveries.push({ kind, target: routes[kind]! });
    else missing.push(kind);
  }
  return { deliveries, missing };
}

export interface RetrySchedule {
  /** Attempts in all, the first included (5). */
  attempts: number;
  /** Wait before the second attempt (1 s); each later wait doubles... */
  initialMs: number;
  /** ...up to this (30 s). */
  maxMs: number;
}

export const defaultRetrySchedule: RetrySchedule = { attempts: 5, initialMs: 1_000, maxMs: 30_000 };

/**
 * The wait before attempt `attempt` (1-based; the first is immediate), or undefined when there is
 * no such attempt: 0, 1 s, 2 s, 4 s, 8 s with the defaults (15 s in all, bounded).
 */
export function retryDelayMs(attempt: number, s: RetrySchedule = defaultRetrySchedule): number | undefined {
  if (!Number.isInteger(attempt) || attempt < 1 || attempt > s.attempts) return undefined;
  if (attempt === 1) return 0;
  return Math.min(s.maxMs, s.initialMs * 2 ** (attempt - 2));
}

/** What one POST came to. */
export type PostOutcome = { ok: true; status: number } | { ok: false; status?: number; problem: string };

/**
 * Whether a failed POST is worth trying again: no answer (refused, reset, timed out), 408, 429 and
 * 5xx are passing troubles; any other 4xx says the request itself is wrong (a revoked webhook).
 */
export function retryable(o: PostOutcome): boolean {
  if (o.ok) return false;
  if (o.status === undefined) return true;
  return o.status === 408 || o.status === 429 || o.status >= 500;
}

export interface RateLimit {
  /** Events an app may send at once (10)... */
  burst: number;
  /** ...then one more per this long (6 s: 10 a minute). */
  refillMs: number;
}

export const defaultRateLimit: RateLimit = { burst: 10, refillMs: 6_000 };

/** A token bucket's state: tokens left at time `at` (clock ms). */
export interface Bucket {
  tokens: number;
  at: number;
}

export function fullBucket(limit: RateLimit, now: number): Bucket {
  return { tokens: limit.burst, at: now };
}

/**
 * Take one token at `now`: the bucket after, and 0 when one was taken, else how long until one
 * will be there (the caller waits that long and asks again).
 */
export function takeToken(b: Bucket, now: number, limit: RateLimit): { bucket: Bucket; waitMs: number } {
  const elapsed = Math.max(0, now - b.at);
  const tokens = Math.min(limit.burst, b.tokens + elapsed / limit.refillMs);
  if (tokens >= 1) return { bucket: { tokens: tokens - 1, at: now }, waitMs: 0 };
  return { bucket: { tokens, at: now }, waitMs: Math.ceil((1 - tokens) * limit.refillMs) };
}

/** Events whose last occurrence is older than this when the notifier first sees them are not sent (10 min). */
export const defaultMaxAgeMs = 10 * 60_000;

/**
 * Whether the event, at its current count, still has to go to a channel: not yet delivered at
 * this count (or a higher one), and recent (a new leader, or a channel set up later, does not
 * send an hour of history).
 */
export function needsDelivery(event: Pick<EventRecord, "count" | "lastTime">, delivered: Pick<DeliveredRecord, "count"> | undefined, nowMs: number, maxAgeMs = defaultMaxAgeMs): boolean {
  if (delivered !== undefined && delivered.count >= event.count) return false;
  const last = Date.parse(event.lastTime);
  return Number.isFinite(last) && nowMs - last <= maxAgeMs;
}

/** The JSON body: Slack's `text` (and `channel`), plus the structured event for other receivers. */
export interface NotifyBody {
  text: string;
  channel: string;
  event: EventRecord;
}

export function notifyBody(event: EventRecord, target: string): NotifyBody {
  return { text: eventText(event), channel: target, event };
}

/** `[shop] Warning CrashLooping podgroup/shop.web.web/0: instance 0 keeps exiting (x4)`. */
export function eventText(e: EventRecord): string {
  const object = `${e.kind}/${e.name}${e.instance !== undefined ? `/${e.instance}` : ""}`;
  const times = e.count > 1 ? ` (x${e.count})` : "";
  return `[${e.app ?? "cluster"}] ${e.type} ${e.reason} ${object}: ${e.message}${times}`;
}

/** The NotifyFailed event's message: stable for aggregation, naming the channel and never its webhook. */
export function failureMessage(kind: string, target: string, reason: string, problem: string): string {
  return `notify ${kind} ${target}: ${reason} not delivered: ${problem}`;
}
