// The notifier against a real store (SQLite, as `capstan up` runs it) and a real HTTP receiver on
// loopback (docs/notify.md): events in order and once each, retries after 500s without a
// duplicate, a new notifier (a new leader) sending nothing twice, the per-app rate limit, a
// NotifyFailed event for a refusing receiver, and the webhook URL in no log line.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fencedStore, type Fence } from "../../../adapters/store/fenced.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { decodeEvent } from "../../../api/orchestrator/events.ts";
import { decodeEventRecord, eventsKeyPrefix, type EventRecord } from "../../../api/resources/event.ts";
import { notifyKeys } from "../../../api/resources/notify.ts";
import { createNotifyController } from "../../../controllers/notify/index.ts";
import { webhookPoster } from "../../../controllers/notify/post.ts";
import { EventRecorder } from "../../../controllers/shared/events.ts";
import { Informer } from "../../../runtime/informer.ts";
import { pollUntil } from "../../helpers/poll.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-notify-"));
const store = new SqliteStore({ path: join(dir, "state.db") });
const events = new Informer<EventRecord>({ name: "events", source: store, prefix: eventsKeyPrefix(), decode: decodeEvent });
let logText = "";
const log = pino({ level: "debug" }, new Writable({ write: (chunk: Buffer, _e, done) => ((logText += chunk.toString()), done()) }));

interface Received {
  at: number;
  path: string;
  body: { text: string; channel: string; event: EventRecord };
}
let server: Server;
let base = "";
const received: Received[] = [];
/** Per path: how many more requests answer this status before 200. */
const failures = new Map<string, { left: number; status: number }>();

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const f = failures.get(req.url ?? "");
      if (f && f.left > 0) {
        f.left--;
        res.writeHead(f.status).end("no");
        return;
      }
      received.push({ at: Date.now(), path: req.url ?? "", body: JSON.parse(body) as Received["body"] });
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  events.start();
});

afterAll(async () => {
  await events.stop();
  await new Promise((r) => server.close(r));
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

let seq = 0;
async function writeEvent(app: string, reason: EventRecord["reason"], over: Partial<EventRecord> = {}): Promise<EventRecord> {
  const now = new Date().toISOString();
  const id = `${String(Date.now()).padStart(13, "0")}-${String(++seq).padStart(6, "0")}-000000`;
  const e: EventRecord = { id, type: "Normal", reason, kind: "podgroup", name: `${app}.web.web`, app, message: `${reason} of ${app}`, count: 1, firstTime: now, lastTime: now, ...over };
  await store.put(`${eventsKeyPrefix()}${id}`, JSON.stringify(e));
  return e;
}

async function setChannel(kind: string, webhook: string): Promise<void> {
  await store.put(notifyKeys.channel(kind), JSON.stringify({ kind, webhook, updatedAt: "", updatedBy: "test" }));
}
async function setRoutes(app: string, routes: Record<string, string>): Promise<void> {
  await store.put(notifyKeys.route(app), JSON.stringify({ app, routes, updatedAt: "", updatedBy: "test" }));
}

/** A notifier as the orchestrator's leader runs it, with short waits; stop() ends its term. */
function startNotifier(opts: { burst?: number; refillMs?: number; fenced?: Store } = {}) {
  const recorder = new EventRecorder({ store, log });
  const { informers, notifier } = createNotifyController({
    store,
    fenced: opts.fenced ?? store,
    events,
    recorder,
    log,
    retry: { attempts: 4, initialMs: 50, maxMs: 200 },
    rateLimit: { burst: opts.burst ?? 100, refillMs: opts.refillMs ?? 1_000 },
    postTimeoutMs: 2_000,
  });
  for (const i of informers) i.start();
  const abort = new AbortController();
  const done = notifier.start(abort.signal);
  return {
    notifier,
    recorder,
    async stop() {
      abort.abort();
      await done;
      await recorder.idle();
      recorder.close();
      for (const i of informers) await i.stop();
    },
  };
}

const of = (path: string) => received.filter((r) => r.path === path);
const secretPath = (name: string) => `/hooks/${name}/T0123456789/B9876543210/s3cr3tW3bh00kT0k3n`;

describe("the notifier", () => {
  it("POSTs an app's events in order, once each, to the routed channel; a new leader sends none again", async () => {
    const path = secretPath("order");
    await setChannel("ordered", `${base}${path}`);
    await setRoutes("nfa", { ordered: "#nfa-alerts" });
    await setRoutes("nfb", {}); // routes to nothing
    const n = startNotifier();
    try {
      const sent: EventRecord[] = [];
      for (const reason of ["DeployStarted", "InstanceCrashed", "InstanceRestarted", "CrashLooping", "DeploySucceeded"] as const) sent.push(await writeEvent("nfa", reason));
      await writeEvent("nfb", "DeployStarted");
      await pollUntil("5 events received", async () => of(path).length >= 5, 10_000);
      // A repeat (count 2) of one event goes out again, with its count.
      const again = { ...sent[1]!, count: 2, lastTime: new Date().toISOString() };
      await store.put(`${eventsKeyPrefix()}${again.id}`, JSON.stringify(again));
      await pollUntil("the repeat", async () => of(path).length >= 6, 10_000);
      const got = of(path).map((r) => r.body);
      expect(got.map((b) => b.event.reason)).toEqual(["DeployStarted", "InstanceCrashed", "InstanceRestarted", "CrashLooping", "DeploySucceeded", "InstanceCrashed"]);
      expect(got.map((b) => b.event.count)).toEqual([1, 1, 1, 1, 1, 2]);
      expect(got.every((b) => b.channel === "#nfa-alerts" && b.text.startsWith("[nfa] "))).toBe(true);
      expect(got[0]!.event).toEqual(sent[0]);
      const marker = await store.get(notifyKeys.deliveredTo(sent[1]!.id, "ordered"));
      expect(JSON.parse(marker!.value)).toMatchObject({ count: 2 });
    } finally {
      await n.stop();
    }
    // The next leader: the markers say everything was delivered.
    const before = of(path).length;
    const next = startNotifier();
    try {
      const last = await writeEvent("nfa", "Drifted");
      await pollUntil("the new event", async () => of(path).some((r) => r.body.event.id === last.id), 10_000);
      await next.notifier.idle();
      expect(of(path).length).toBe(before + 1);
    } finally {
      await next.stop();
    }
  }, 40_000);

  it("retries a receiver that answers 500 twice, and delivers each event exactly once", async () => {
    const path = secretPath("flaky");
    failures.set(path, { left: 2, status: 500 });
    await setChannel("flaky", `${base}${path}`);
    await setRoutes("nfc", { flaky: "#nfc" });
    const n = startNotifier();
    try {
      const a = await writeEvent("nfc", "DeployStarted");
      const b = await writeEvent("nfc", "DeploySucceeded");
      await pollUntil("both events", async () => of(path).length >= 2, 10_000);
      await n.notifier.idle();
      expect(failures.get(path)!.left).toBe(0);
      expect(of(path).map((r) => r.body.event.id)).toEqual([a.id, b.id]);
    } finally {
      await n.stop();
    }
  }, 30_000);

  it("holds each app to its rate: burst at once, then one per refill interval", async () => {
    const path = secretPath("rate");
    await setChannel("rated", `${base}${path}`);
    await setRoutes("nfd", { rated: "#nfd" });
    const n = startNotifier({ burst: 2, refillMs: 400 });
    try {
      for (let i = 0; i < 5; i++) await writeEvent("nfd", "InstanceCrashed", { message: `crash ${i}` });
      await pollUntil("5 events", async () => of(path).length >= 5, 10_000);
      const at = of(path).map((r) => r.at);
      // 2 at once, then 3 more at least ~400 ms apart: at least 1.2 s after the first.
      expect(at[4]! - at[0]!).toBeGreaterThanOrEqual(3 * 400 - 50);
      for (let i = 2; i < 5; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(400 - 50);
      expect(of(path).map((r) => r.body.event.message)).toEqual(["crash 0", "crash 1", "crash 2", "crash 3", "crash 4"]);
    } finally {
      await n.stop();
    }
  }, 30_000);

  it("reports a receiver that refuses as a NotifyFailed event on the event's object, without the URL", async () => {
    const path = secretPath("refusing");
    failures.set(path, { left: 1_000, status: 404 });
    await setChannel("refusing", `${base}${path}`);
    await setRoutes("nfe", { refusing: "#nfe" });
    const n = startNotifier();
    try {
      await writeEvent("nfe", "DeployFailed", { type: "Warning" });
      const failed = await pollUntil(
        "a NotifyFailed event",
        async () => events.list().find((e) => e.reason === "NotifyFailed" && e.app === "nfe"),
        10_000,
      );
      expect(failed).toMatchObject({ type: "Warning", kind: "podgroup", name: "nfe.web.web", message: "notify refusing #nfe: DeployFailed not delivered: HTTP 404" });
      await n.notifier.idle();
      expect(failures.get(path)!.left).toBe(999); // a 404 is not retried
      const stored = (await store.list(eventsKeyPrefix())).items.map((kv) => decodeEventRecord(kv.value));
      expect(JSON.stringify(stored)).not.toContain(path);
    } finally {
      await n.stop();
    }
  }, 30_000);

  it("a deposed leader sends nothing more; the next one sends what has no marker (the one event of the gap again)", async () => {
    const path = secretPath("failover");
    await setChannel("failover", `${base}${path}`);
    await setRoutes("nff", { failover: "#nff" });
    const leaderKey = "/test/notify-leader";
    await store.put(leaderKey, "first");
    let fence: Fence | null = { key: leaderKey, createRevision: (await store.get(leaderKey))!.createRevision };
    const n = startNotifier({ fenced: fencedStore(store, () => fence) });
    const ids = () => of(path).map((r) => r.body.event.id);
    let a: EventRecord, b: EventRecord, c: EventRecord;
    try {
      a = await writeEvent("nff", "DeployStarted");
      await pollUntil("the first event", async () => ids().includes(a.id), 10_000);
      await n.notifier.idle();
      fence = null; // leadership lost: the store refuses its writes
      b = await writeEvent("nff", "DeploySucceeded");
      await pollUntil("the second event (its marker is refused)", async () => ids().includes(b.id), 10_000);
      await n.notifier.idle();
      c = await writeEvent("nff", "Drifted");
      // Handlers run as the informer applies a change: once the cache holds it, the notifier has seen it.
      await pollUntil("the third event in the informer", async () => events.get(`${eventsKeyPrefix()}${c.id}`) !== undefined, 10_000);
      await n.notifier.idle();
      expect(ids()).toEqual([a.id, b.id]);
      expect(await store.get(notifyKeys.deliveredTo(b.id, "failover"))).toBeNull();
    } finally {
      await n.stop();
    }
    const next = startNotifier();
    try {
      await pollUntil("the third event from the next leader", async () => ids().includes(c.id), 10_000);
      await next.notifier.idle();
      expect(ids()).toEqual([a.id, b.id, b.id, c.id]);
    } finally {
      await next.stop();
    }
  }, 30_000);

  it("gives up a POST to a receiver that does not answer at its deadline, naming no URL", async () => {
    const silent = createServer(() => {}); // reads the request, never answers
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hooks/s3cr3t`;
      const started = Date.now();
      const outcome = await webhookPoster(300)(url, { text: "x" }, new AbortController().signal);
      expect(outcome).toEqual({ ok: false, problem: "no answer within 300 ms" });
      expect(Date.now() - started).toBeLessThan(3_000);
      const refused = await webhookPoster(300)("http://127.0.0.1:1/hooks/s3cr3t", { text: "x" }, new AbortController().signal);
      expect(refused).toEqual({ ok: false, problem: "connection failed (ECONNREFUSED)" });
    } finally {
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    }
  });

  it("writes no webhook URL to its log", () => {
    expect(logText).toContain("notifier started");
    expect(logText).toContain("event not delivered");
    expect(logText).not.toContain("s3cr3tW3bh00kT0k3n");
    expect(logText).not.toContain("/hooks/");
  });
});
