// GET /api/events over real HTTP on loopback, on a real store (SQLite) with real access tokens
// checked by the token gate: who sees which events, since/limit, the 400s, and watch=true
// (docs/events.md, docs/security.md).
import { serve, type ServerType } from "@hono/node-server";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { TokenVerifier, tokenGate } from "../../../api/auth/index.ts";
import { appKey, generateToken, hashSecret, tokenKey } from "../../../api/console/index.ts";
import { createEventsApi, decodeEvent } from "../../../api/orchestrator/events.ts";
import { eventsKeyPrefix, type EventInput, type EventRecord } from "../../../api/resources/event.ts";
import { EventRecorder, eventId } from "../../../controllers/shared/events.ts";
import { Informer } from "../../../runtime/informer.ts";
import { pollUntil } from "../../helpers/poll.ts";

const dir = mkdtempSync(join(tmpdir(), "capstan-events-api-"));
const store = new SqliteStore({ path: join(dir, "state.db") });
const prefix = eventsKeyPrefix();
const informer = new Informer<EventRecord>({ name: "events", source: store, prefix, decode: decodeEvent });
const recorder = new EventRecorder({ store, prefix });
let server: ServerType;
let base = "";
const tokens: Record<"admin" | "maintainerA" | "maintainerB" | "viewerA" | "sync", string> = { admin: "", maintainerA: "", maintainerB: "", viewerA: "", sync: "" };
type Who = keyof typeof tokens | "none";

async function token(role: string, user: string, extra: object = {}): Promise<string> {
  const t = generateToken();
  await store.put(tokenKey(t.id), JSON.stringify({ id: t.id, user, role, hash: hashSecret(t.secret), createdAt: new Date().toISOString(), ...extra }));
  return t.token;
}

const event = (app: string | undefined, name: string, message: string, extra: Partial<EventInput> = {}): EventInput => ({
  type: "Normal",
  reason: "DeployStarted",
  kind: app === undefined ? "node" : "podgroup",
  name,
  ...(app !== undefined && { app }),
  message,
  ...extra,
});

async function get(who: Who, query: string): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = who === "none" ? {} : { authorization: `Bearer ${tokens[who]}` };
  const res = await fetch(`${base}/api/events${query}`, { headers, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: (await res.json()) as unknown };
}

async function list(who: Who, query = ""): Promise<EventRecord[]> {
  const a = await get(who, query);
  expect(a.status, JSON.stringify(a.body)).toBe(200);
  return a.body as EventRecord[];
}

const messages = (es: EventRecord[]) => es.map((e) => e.message);

/** Record, wait for the writes, and for the informer to have them. */
async function recordAll(events: EventInput[]): Promise<void> {
  for (const e of events) recorder.record(e);
  await recorder.idle();
  await informer.waitForRevision(await store.revision());
}

beforeAll(async () => {
  await store.put(appKey("shop"), JSON.stringify({ appname: "shop", maintainers: ["alice@example.com"], createdAt: "x" }));
  await store.put(appKey("blog"), JSON.stringify({ appname: "blog", maintainers: ["bob@example.com"], createdAt: "x" }));
  tokens.admin = await token("admin", "admin");
  tokens.maintainerA = await token("user", "alice@example.com");
  tokens.maintainerB = await token("user", "bob@example.com");
  tokens.viewerA = await token("viewer", "carol@example.com", { apps: ["shop"] });
  tokens.sync = await token("sync", "secret-sync");
  informer.start();
  await informer.waitForSync();
  const app = createEventsApi({ events: informer, access: { gate: tokenGate(new TokenVerifier({ store })) } });
  await new Promise<void>((resolve) => {
    server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
      base = `http://127.0.0.1:${info.port}`;
      resolve();
    });
  });
  // Two old events (written as the recorder would have, an hour ago), then current ones.
  for (const [i, app] of ["shop", "blog"].entries()) {
    const at = Date.now() - 60 * 60_000 + i;
    const id = eventId(at);
    const time = new Date(at).toISOString();
    await store.put(`${prefix}${id}`, JSON.stringify({ id, ...event(app, `${app}.web`, `old ${app}`), count: 1, firstTime: time, lastTime: time }));
  }
  await recordAll([
    event("shop", "shop.web", "shop 1"),
    event("blog", "blog.web", "blog 1"),
    event(undefined, "n1", "n1 ready", { reason: "NodeReady", node: "n1" }),
    event("shop", "shop.web", "shop 2", { reason: "InstanceCrashed", type: "Warning", instance: 0, node: "n1" }),
  ]);
});

afterAll(async () => {
  recorder.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await informer.stop();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("GET /api/events: who sees what", () => {
  it("needs a token", async () => {
    expect((await get("none", "")).status).toBe(401);
  });

  it("an admin and the sync identity see every event, newest last", async () => {
    const all = ["old shop", "old blog", "shop 1", "blog 1", "n1 ready", "shop 2"];
    expect(messages(await list("admin"))).toEqual(all);
    expect(messages(await list("sync"))).toEqual(all);
  });

  it("a maintainer of app B sees none of app A's events, and node events", async () => {
    const seen = await list("maintainerB");
    expect(messages(seen)).toEqual(["old blog", "blog 1", "n1 ready"]);
    expect(seen.some((e) => e.app === "shop")).toBe(false);
    expect(await list("maintainerB", "?kind=podgroup&name=shop.web")).toEqual([]);
    const a = await get("maintainerB", "?app=shop");
    expect(a.status).toBe(403);
    expect(a.body).toMatchObject({ code: "Forbidden", missing: "read on app shop" });
  });

  it("a viewer sees its apps' events and node events", async () => {
    expect(messages(await list("viewerA"))).toEqual(["old shop", "shop 1", "n1 ready", "shop 2"]);
    expect(messages(await list("viewerA", "?app=shop"))).toEqual(["old shop", "shop 1", "shop 2"]);
    expect((await get("viewerA", "?app=blog")).status).toBe(403);
  });

  it("filters by kind and name; records carry every field", async () => {
    expect(messages(await list("maintainerA", "?kind=node"))).toEqual(["n1 ready"]);
    const [crash] = await list("maintainerA", "?name=shop.web&limit=1");
    expect(crash).toMatchObject({ type: "Warning", reason: "InstanceCrashed", kind: "podgroup", name: "shop.web", app: "shop", instance: 0, node: "n1", message: "shop 2", count: 1 });
    expect(crash!.id).toMatch(/^\d{13}-/);
    expect(Date.parse(crash!.firstTime)).toBeGreaterThan(Date.now() - 60_000);
  });
});

describe("since and limit", () => {
  it("since takes a duration or an RFC 3339 time, on lastTime", async () => {
    expect(messages(await list("admin", "?since=10m"))).toEqual(["shop 1", "blog 1", "n1 ready", "shop 2"]);
    const t = new Date(Date.now() - 2 * 60 * 60_000).toISOString();
    expect(await list("admin", `?since=${encodeURIComponent(t)}`)).toHaveLength(6);
    expect(await list("admin", `?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).toEqual([]);
  });

  it("limit keeps the newest N, newest last", async () => {
    expect(messages(await list("admin", "?limit=2"))).toEqual(["n1 ready", "shop 2"]);
    expect(messages(await list("maintainerB", "?limit=1"))).toEqual(["n1 ready"]);
    expect(await list("admin", "?limit=5000")).toHaveLength(6);
  });

  it("bad input is a 400 naming the field", async () => {
    const cases: [string, string][] = [
      ["?limit=0", "limit"],
      ["?limit=5001", "limit"],
      ["?limit=ten", "limit"],
      ["?since=yesterday", "since"],
      ["?kind=pod", "kind"],
      ["?watch=maybe", "watch"],
      ["?app=Not_An_App", "app"],
      ["?name=", "name"],
      ["?limit=1&limit=2", "limit"],
    ];
    for (const [query, field] of cases) {
      const a = await get("admin", query);
      expect(a.status, query).toBe(400);
      expect((a.body as { code: string; details: { path: string }[] }).details.map((d) => d.path), query).toContain(field);
    }
  });
});

describe("watch=true", () => {
  /** Lines of an NDJSON answer as they arrive. */
  async function open(who: Who, query: string, signal: AbortSignal): Promise<{ status: number; type: string | null; lines: EventRecord[] }> {
    const res = await fetch(`${base}/api/events${query}`, { headers: { authorization: `Bearer ${tokens[who as keyof typeof tokens]}` }, signal });
    const out = { status: res.status, type: res.headers.get("content-type"), lines: [] as EventRecord[] };
    void (async () => {
      let rest = "";
      try {
        for await (const chunk of res.body!) {
          rest += Buffer.from(chunk).toString("utf8");
          let nl: number;
          while ((nl = rest.indexOf("\n")) >= 0) {
            out.lines.push(JSON.parse(rest.slice(0, nl)) as EventRecord);
            rest = rest.slice(nl + 1);
          }
        }
      } catch {
        // aborted
      }
    })();
    return out;
  }

  const handlers = () => (informer as unknown as { handlers: Set<unknown> }).handlers.size;

  it("streams the existing events, then new ones and repeats as they are written; a client that goes ends it", async () => {
    const before = handlers();
    const stopB = new AbortController();
    const stopA = new AbortController();
    const b = await open("maintainerB", "?watch=true&since=10m", stopB.signal);
    const a = await open("maintainerA", "?watch=true&app=shop&limit=1", stopA.signal);
    expect(b.status).toBe(200);
    expect(b.type).toBe("application/x-ndjson");
    await pollUntil("b.lines.length === 2 && a.lines.length === 1", async () => b.lines.length === 2 && a.lines.length === 1, 5_000, 20);
    expect(messages(b.lines)).toEqual(["blog 1", "n1 ready"]);
    expect(messages(a.lines)).toEqual(["shop 2"]);
    expect(handlers()).toBe(before + 2);

    await recordAll([event("blog", "blog.web", "blog 2"), event("shop", "shop.web", "shop 3"), event(undefined, "n2", "n2 down", { reason: "NodeDown", type: "Warning", node: "n2" })]);
    await pollUntil("b.lines.length === 4 && a.lines.length === 2", async () => b.lines.length === 4 && a.lines.length === 2, 5_000, 20);
    expect(messages(b.lines.slice(2))).toEqual(["blog 2", "n2 down"]);
    expect(messages(a.lines.slice(1))).toEqual(["shop 3"]); // the app filter holds for new events too

    // A repeat within 10 minutes: the same record again, counted.
    await recordAll([event("blog", "blog.web", "blog 2")]);
    await pollUntil("b.lines.length === 5", async () => b.lines.length === 5, 5_000, 20);
    expect(b.lines[4]).toMatchObject({ id: b.lines[2]!.id, message: "blog 2", count: 2 });

    stopB.abort();
    stopA.abort();
    await pollUntil("handlers() === before", async () => handlers() === before, 5_000, 20);
  });

  it("a watch ends once its token is revoked", async () => {
    const before = handlers();
    const t = generateToken();
    await store.put(tokenKey(t.id), JSON.stringify({ id: t.id, user: "carol@example.com", role: "admin", hash: hashSecret(t.secret), createdAt: new Date().toISOString() }));
    const stop = new AbortController();
    const res = await fetch(`${base}/api/events?watch=true`, { headers: { authorization: `Bearer ${t.token}` }, signal: stop.signal });
    expect(res.status).toBe(200);
    const ended = (async () => {
      for await (const _ of res.body!) {
        // read until the server ends the answer
      }
      return true;
    })();
    await pollUntil("the watch registered", async () => handlers() === before + 1, 5_000, 20);
    await store.delete(tokenKey(t.id));
    // The verifier reuses a token record for 2 s and the watch checks every 2 s.
    await pollUntil("the watch ended by the server", async () => handlers() === before, 10_000, 50);
    expect(await ended).toBe(true);
    stop.abort();
  });

  it("a watch is refused like a list: 401 without a token, 403 for another app, 400 for bad input", async () => {
    expect((await get("none", "?watch=true")).status).toBe(401);
    expect((await get("maintainerB", "?watch=true&app=shop")).status).toBe(403);
    expect((await get("admin", "?watch=true&limit=0")).status).toBe(400);
  });
});
