// The notifier's decisions (docs/notify.md): routing, the retry schedule, the per-app rate limit,
// the at-most-once check, the body, and how a webhook URL may be shown.
import { describe, expect, it } from "vitest";
import type { EventRecord } from "../../../api/resources/event.ts";
import { NotifyRoutesInput, redactWebhook } from "../../../api/resources/notify.ts";
import {
  defaultRateLimit,
  eventText,
  failureMessage,
  fullBucket,
  needsDelivery,
  notifyBody,
  retryable,
  retryDelayMs,
  routeEvent,
  takeToken,
  type Bucket,
} from "../../../controllers/notify/decisions.ts";

const event = (over: Partial<EventRecord> = {}): EventRecord => ({
  id: "0001764150000000-000001-abcdef",
  type: "Warning",
  reason: "CrashLooping",
  kind: "podgroup",
  name: "shop.web.web",
  app: "shop",
  instance: 0,
  message: "instance 0 keeps exiting: back-off restarting it",
  count: 1,
  firstTime: "2026-11-26T10:00:00.000Z",
  lastTime: "2026-11-26T10:00:00.000Z",
  ...over,
});

describe("routeEvent", () => {
  const kinds = new Set(["slack", "hook"]);
  it("sends an app's event to each routed kind that has a channel, and names the kinds without one", () => {
    expect(routeEvent(event(), { slack: "#shop", mail: "ops@example.com", hook: "x" }, kinds)).toEqual({
      deliveries: [
        { kind: "hook", target: "x" },
        { kind: "slack", target: "#shop" },
      ],
      missing: ["mail"],
    });
  });
  it("sends nothing for an app without routes, a node event, or a NotifyFailed event", () => {
    expect(routeEvent(event(), undefined, kinds).deliveries).toEqual([]);
    expect(routeEvent(event({ app: undefined, kind: "node" }), { slack: "#x" }, kinds).deliveries).toEqual([]);
    expect(routeEvent(event({ reason: "NotifyFailed" }), { slack: "#x" }, kinds).deliveries).toEqual([]);
  });
});

describe("retry schedule", () => {
  it("is immediate, then 1 s doubling, 5 attempts in all (15 s of waits)", () => {
    const waits = [1, 2, 3, 4, 5, 6].map((a) => retryDelayMs(a));
    expect(waits).toEqual([0, 1_000, 2_000, 4_000, 8_000, undefined]);
    expect(retryDelayMs(0)).toBeUndefined();
  });
  it("is capped at maxMs", () => {
    expect(retryDelayMs(10, { attempts: 10, initialMs: 1_000, maxMs: 30_000 })).toBe(30_000);
  });
  it("retries no answer, 408, 429 and 5xx; not other 4xx, not a success", () => {
    expect(retryable({ ok: false, problem: "connection failed" })).toBe(true);
    for (const status of [408, 429, 500, 503]) expect(retryable({ ok: false, status, problem: `HTTP ${status}` })).toBe(true);
    for (const status of [400, 403, 404, 410]) expect(retryable({ ok: false, status, problem: `HTTP ${status}` })).toBe(false);
    expect(retryable({ ok: true, status: 200 })).toBe(false);
  });
});

describe("per-app rate limit (token bucket)", () => {
  it("lets `burst` through at once, then one per refillMs, and says how long to wait", () => {
    const limit = { burst: 3, refillMs: 1_000 };
    let b: Bucket = fullBucket(limit, 0);
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = takeToken(b, 0, limit);
      b = r.bucket;
      waits.push(r.waitMs);
    }
    expect(waits).toEqual([0, 0, 0, 1_000]);
    expect(takeToken(b, 400, limit).waitMs).toBe(600);
    const later = takeToken(b, 1_000, limit);
    expect(later.waitMs).toBe(0);
    expect(takeToken(later.bucket, 1_000, limit).waitMs).toBe(1_000);
  });
  it("never holds more than burst however long it was idle; the default is 10 at once, then one per 6 s", () => {
    const b = takeToken({ tokens: 0, at: 0 }, 10 * 60_000, defaultRateLimit).bucket;
    expect(b.tokens).toBe(defaultRateLimit.burst - 1);
    expect(defaultRateLimit).toEqual({ burst: 10, refillMs: 6_000 });
  });
});

describe("needsDelivery", () => {
  const now = Date.parse("2026-11-26T10:01:00.000Z");
  it("sends an event not yet delivered at its count", () => {
    expect(needsDelivery(event(), undefined, now)).toBe(true);
    expect(needsDelivery(event({ count: 3 }), { count: 2 }, now)).toBe(true);
  });
  it("does not send it again at a count already delivered", () => {
    expect(needsDelivery(event({ count: 2 }), { count: 2 }, now)).toBe(false);
    expect(needsDelivery(event({ count: 1 }), { count: 2 }, now)).toBe(false);
  });
  it("does not send events last seen more than 10 minutes before the notifier saw them", () => {
    expect(needsDelivery(event(), undefined, now + 10 * 60_000)).toBe(false);
    expect(needsDelivery(event({ lastTime: "bad" }), undefined, now)).toBe(false);
  });
});

describe("the body", () => {
  it("is Slack's text and channel plus the structured event", () => {
    const e = event({ count: 4 });
    expect(notifyBody(e, "#shop-alerts")).toEqual({ text: "[shop] Warning CrashLooping podgroup/shop.web.web/0: instance 0 keeps exiting: back-off restarting it (x4)", channel: "#shop-alerts", event: e });
    expect(eventText(event({ instance: undefined, type: "Normal", reason: "DeploySucceeded", message: "done" }))).toBe("[shop] Normal DeploySucceeded podgroup/shop.web.web: done");
  });
  it("a failure message names the channel and the problem, never a URL", () => {
    expect(failureMessage("slack", "#shop", "DeployStarted", "HTTP 500")).toBe("notify slack #shop: DeployStarted not delivered: HTTP 500");
  });
});

describe("redactWebhook", () => {
  it("shows scheme, host and port, and the last 4 characters of a long path only", () => {
    expect(redactWebhook("https://hooks.slack.com/services/T000/B000/XXXXsecret1234")).toBe("https://hooks.slack.com/…1234");
    expect(redactWebhook("http://127.0.0.1:8080/h")).toBe("http://127.0.0.1:8080/…");
    expect(redactWebhook("https://user:pw@example.com/a/very/long/secret/path?token=abcd9876")).toBe("https://example.com/…9876");
    expect(redactWebhook("not a url")).toBe("<redacted>");
  });
});

describe("routes input", () => {
  it("takes lower-case kinds and non-empty targets, naming the bad field", () => {
    expect(NotifyRoutesInput.safeParse({ routes: { slack: "#x" } }).success).toBe(true);
    expect(NotifyRoutesInput.safeParse({ routes: { Slack: "#x" } }).success).toBe(false);
    expect(NotifyRoutesInput.safeParse({ routes: { slack: "" } }).success).toBe(false);
    expect(NotifyRoutesInput.safeParse({ routes: { slack: "a\nb" } }).success).toBe(false);
  });
});
