// Notify channels (docs/notify.md): where an app's events are sent.
//
// Stored forms, under the orchestrator's root (never under events/, which the event pruner owns):
//   notify/channels/<kind>          NotifyChannelRecord: the admin's delivery of a channel kind (a webhook URL)
//   notify/routes/<app>             NotifyRoutesRecord: the app definition's `notify.<kind>: "<target>"` map
//   notify/delivered/<event>/<kind> DeliveredRecord: the count of event <event> already delivered to <kind>
//
// The webhook URL is a secret (whoever has it may post to the channel): it is stored as it was
// given (the store has no encryption facility; store access is an operator's) and everything else
// shows it through `redactWebhook` only.
import { z } from "zod";
import { orchestratorPrefix } from "./keys.ts";

export const notifyKeys = {
  channels: `${orchestratorPrefix}notify/channels/`,
  routes: `${orchestratorPrefix}notify/routes/`,
  delivered: `${orchestratorPrefix}notify/delivered/`,
  channel: (kind: string) => `${orchestratorPrefix}notify/channels/${kind}`,
  route: (app: string) => `${orchestratorPrefix}notify/routes/${app}`,
  deliveredOf: (eventId: string) => `${orchestratorPrefix}notify/delivered/${eventId}/`,
  deliveredTo: (eventId: string, kind: string) => `${orchestratorPrefix}notify/delivered/${eventId}/${kind}`,
} as const;

/** A channel kind ("slack", "ops-hook"): a lower-case word, as in `notify.<kind>` of app.yaml. */
export const channelKindPattern = /^[a-z][a-z0-9_-]{0,31}$/;
export const ChannelKind = z.string().regex(channelKindPattern, "must be a lower-case word: a-z first, then a-z, 0-9, _ or -, at most 32 characters");

/** Routes an app may have, and the length of a target ("#shop-alerts"). */
export const maxRoutes = 16;
export const maxTargetLength = 256;

export const NotifyChannelInput = z.strictObject({
  webhook: z
    .string()
    .max(2048, "must be at most 2048 characters")
    .refine((u) => isHttpUrl(u), "must be an http:// or https:// URL with a host"),
});
export type NotifyChannelInput = z.infer<typeof NotifyChannelInput>;

export const NotifyTarget = z
  .string()
  .min(1, "must not be empty")
  .max(maxTargetLength, `must be at most ${maxTargetLength} characters`)
  .refine((t) => ![...t].some((ch) => ch.charCodeAt(0) < 0x20), "must not contain control characters");

export const NotifyRoutesInput = z.strictObject({
  routes: z.record(ChannelKind, NotifyTarget).refine((r) => Object.keys(r).length <= maxRoutes, `at most ${maxRoutes} channels`),
});
export type NotifyRoutesInput = z.infer<typeof NotifyRoutesInput>;

export interface NotifyChannelRecord {
  kind: string;
  /** The secret: never logged, never answered. */
  webhook: string;
  updatedAt: string;
  updatedBy: string;
}

/** What GET /api/notify/channels answers: the webhook redacted. */
export interface NotifyChannelView {
  kind: string;
  webhook: string;
  updatedAt: string;
  updatedBy: string;
}

export interface NotifyRoutesRecord {
  app: string;
  /** Channel kind -> target ("slack" -> "#shop-alerts"). */
  routes: Record<string, string>;
  updatedAt: string;
  updatedBy: string;
}

/** Written after a 2xx: the event's count as delivered to that kind. */
export interface DeliveredRecord {
  count: number;
  at: string;
}

export function isHttpUrl(u: string): boolean {
  try {
    const url = new URL(u);
    return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "";
  } catch {
    return false;
  }
}

/**
 * A webhook URL as it may be shown: scheme, host and port, then "…" and the last 4 characters when
 * the rest (path and query) is long enough that they give nothing away (at least 16 characters).
 * User info, the path and the query (where webhook secrets live) are never shown.
 */
export function redactWebhook(u: string): string {
  let url: URL;
  try {
    url = new URL(u);
  } catch {
    return "<redacted>";
  }
  const rest = `${url.pathname}${url.search}`;
  const tail = rest.length >= 16 ? rest.slice(-4) : "";
  return `${url.protocol}//${url.host}/…${tail}`;
}

export function channelView(r: NotifyChannelRecord): NotifyChannelView {
  return { kind: r.kind, webhook: redactWebhook(r.webhook), updatedAt: r.updatedAt, updatedBy: r.updatedBy };
}

function parseObject(value: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(value);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function decodeChannelRecord(value: string): NotifyChannelRecord | undefined {
  const v = parseObject(value);
  if (!v || typeof v.kind !== "string" || typeof v.webhook !== "string" || !isHttpUrl(v.webhook)) return undefined;
  return { kind: v.kind, webhook: v.webhook, updatedAt: String(v.updatedAt ?? ""), updatedBy: String(v.updatedBy ?? "") };
}

export function decodeRoutesRecord(value: string): NotifyRoutesRecord | undefined {
  const v = parseObject(value);
  if (!v || typeof v.app !== "string" || !v.routes || typeof v.routes !== "object") return undefined;
  const routes: Record<string, string> = {};
  for (const [k, t] of Object.entries(v.routes as Record<string, unknown>)) if (channelKindPattern.test(k) && typeof t === "string") routes[k] = t;
  return { app: v.app, routes, updatedAt: String(v.updatedAt ?? ""), updatedBy: String(v.updatedBy ?? "") };
}

export function decodeDeliveredRecord(value: string): DeliveredRecord | undefined {
  const v = parseObject(value);
  if (!v || typeof v.count !== "number") return undefined;
  return { count: v.count, at: String(v.at ?? "") };
}
