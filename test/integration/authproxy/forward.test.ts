// forward.ts against a real upstream (test/helpers/echo-upstream.ts) through a tiny node:http
// server that calls forward/forwardUpgrade with fixed ForwardRequest values: header hygiene
// (identity spoofing, Connection-listed names, X-Forwarded-*, cookies, hop-by-hop both ways),
// streaming without buffering (in a separate proxy process whose memory is measured), upstream
// failures (502, 504, death mid-body, idle), client aborts, WebSocket upgrades, connection reuse.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import net, { type AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUpstream, forward, forwardUpgrade, respondOnSocket, type ForwardRequest, type Upstream } from "../../../api/authproxy/forward.ts";
import { makePki } from "../../helpers/certs.ts";
import { headerValues, headerValuesAnySpelling, startEchoUpstream, type EchoUpstream, type RecordedRequest } from "../../helpers/echo-upstream.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const strip = ["REMOTE-USER", "USER-GROUPS"];
const stripCookies = ["sso", "sso_csrf"];
const identity = { "REMOTE-USER": "alice@example.org", "USER-GROUPS": "dev,ops" };
type Fixed = Omit<ForwardRequest, "path">;
const protectedFr: Fixed = { identity, strip, stripCookies, proto: "https" };
const openFr: Fixed = { identity: {}, strip, stripCookies, proto: "http" };

interface Proxy {
  port: number;
  stop(): Promise<void>;
}

async function startProxy(up: Upstream, fr: Fixed): Promise<Proxy> {
  const sockets = new Set<Duplex>();
  const server = http.createServer((req, res) => forward(req, res, up, { ...fr, path: req.url ?? "/" }));
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => forwardUpgrade(req, socket, head, up, { ...fr, path: req.url ?? "/" }));
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    port: (server.address() as AddressInfo).port,
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

interface Answer {
  status: number;
  statusMessage: string;
  rawHeaders: string[];
  body: Buffer;
}

interface SendOptions {
  method?: string;
  path: string;
  /** Flat [name, value, ...] list sent exactly as given; Host "app.test" is added when absent. */
  headers?: string[];
  body?: string | Buffer;
  agent?: http.Agent;
}

function withHost(headers: string[]): string[] {
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === "host") return headers;
  return ["Host", "app.test", ...headers];
}

function send(port: number, o: SendOptions): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: o.method ?? "GET", path: o.path, headers: withHost(o.headers ?? []), agent: o.agent ?? false });
    req.on("error", reject);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("error", reject);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, statusMessage: res.statusMessage ?? "", rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }));
    });
    req.end(o.body);
  });
}

/** A response whose body may end early: how much arrived and whether it ended with an error. */
function sendCounting(port: number, path: string): Promise<{ status: number; received: number; declared: string | undefined; error: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path, headers: ["Host", "app.test"], agent: false });
    req.on("error", reject);
    req.on("response", (res) => {
      let received = 0;
      let settled = false;
      const done = (error: string | undefined) => {
        if (settled) return;
        settled = true;
        resolve({ status: res.statusCode ?? 0, received, declared: res.headers["content-length"], error });
      };
      res.on("data", (d: Buffer) => (received += d.length));
      res.on("error", (e: NodeJS.ErrnoException) => done(e.code ?? e.message));
      res.on("aborted", () => done("aborted"));
      res.on("end", () => done(res.complete ? undefined : "incomplete"));
      res.on("close", () => done(res.complete ? undefined : "closed"));
    });
    req.end();
  });
}

let pathCounter = 0;
function uniquePath(prefix: string, query = ""): string {
  return `/${prefix}/${++pathCounter}${query}`;
}

function recordOf(up: EchoUpstream, path: string): Promise<RecordedRequest> {
  return up.waitFor(`the upstream to record ${path}`, () => up.requests.find((r) => r.url === path));
}

async function closedPort(): Promise<number> {
  const s = net.createServer();
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** Connect a raw socket and read from it until `until` holds for everything read so far. */
function rawSocket(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => resolve(s));
    s.on("error", reject);
  });
}

function readUntil(s: net.Socket, until: (all: string) => boolean, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let all = "";
    const check = () => {
      if (until(all)) {
        cleanup();
        resolve(all);
      }
    };
    const onData = (d: Buffer) => {
      all += d.toString("latin1");
      check();
    };
    const onEnd = () => {
      cleanup();
      if (until(all)) resolve(all);
      else reject(new Error(`connection closed before ${what}; got ${JSON.stringify(all)}`));
    };
    const cleanup = () => {
      s.off("data", onData);
      s.off("end", onEnd);
      s.off("close", onEnd);
    };
    s.on("data", onData);
    s.on("end", onEnd);
    s.on("close", onEnd);
  });
}

/** Everything a raw socket receives until the peer closes it. */
function readToClose(s: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    let all = "";
    s.on("data", (d: Buffer) => (all += d.toString("latin1")));
    s.on("close", () => resolve(all));
    s.on("error", () => undefined);
  });
}

function splitResponse(raw: string): { statusLine: string; rawHeaders: string[]; body: string } {
  const end = raw.indexOf("\r\n\r\n");
  const lines = raw.slice(0, end).split("\r\n");
  const headers: string[] = [];
  for (const l of lines.slice(1)) {
    const colon = l.indexOf(":");
    headers.push(l.slice(0, colon), l.slice(colon + 1).trim());
  }
  return { statusLine: lines[0]!, rawHeaders: headers, body: raw.slice(end + 4) };
}

describe("forward", () => {
  let up: EchoUpstream;
  let upstream: Upstream;
  let open: Proxy;
  let prot: Proxy;

  beforeAll(async () => {
    up = await startEchoUpstream();
    upstream = createUpstream(up.url);
    open = await startProxy(upstream, openFr);
    prot = await startProxy(upstream, protectedFr);
  });

  afterAll(async () => {
    await open?.stop();
    await prot?.stop();
    upstream?.agent.destroy();
    await up?.stop();
  });

  describe("identity spoofing: every spelling goes, the proxy's value is the only one", () => {
    const cases: [string, string[]][] = [
      ["REMOTE-USER", ["REMOTE-USER", "admin"]],
      ["Remote-User", ["Remote-User", "admin"]],
      ["remote-user", ["remote-user", "admin"]],
      ["REMOTE_USER", ["REMOTE_USER", "admin"]],
      ["Remote_User", ["Remote_User", "admin"]],
      ["USER-GROUPS", ["USER-GROUPS", "admins"]],
      ["USER_GROUPS", ["USER_GROUPS", "admins"]],
      ["duplicates", ["REMOTE-USER", "admin", "REMOTE-USER", "root", "user-groups", "a", "USER-GROUPS", "b"]],
      ["a folded value", ["REMOTE-USER", "attacker, alice@example.org", "USER-GROUPS", "admins, dev"]],
      ["all at once", ["REMOTE-USER", "a", "Remote-User", "b", "remote-user", "c", "REMOTE_USER", "d", "Remote_User", "e", "remote_user", "f", "USER-GROUPS", "g", "USER_GROUPS", "h", "User_Groups", "i"]],
    ];

    it.each(cases)("unprotected location, %s: the upstream receives none", async (_name, spoofed) => {
      const path = uniquePath("open");
      const a = await send(open.port, { path, headers: [...spoofed, "X-Custom", "kept"] });
      expect(a.status).toBe(200);
      const rec = await recordOf(up, path);
      expect(headerValuesAnySpelling(rec, "REMOTE-USER")).toEqual([]);
      expect(headerValuesAnySpelling(rec, "USER-GROUPS")).toEqual([]);
      expect(headerValues(rec, "X-Custom")).toEqual(["kept"]);
    });

    it.each(cases)("protected location, %s: exactly the proxy's values", async (_name, spoofed) => {
      const path = uniquePath("prot");
      const a = await send(prot.port, { path, headers: [...spoofed, "X-Custom", "kept"] });
      expect(a.status).toBe(200);
      const rec = await recordOf(up, path);
      expect(headerValuesAnySpelling(rec, "REMOTE-USER")).toEqual(["alice@example.org"]);
      expect(headerValuesAnySpelling(rec, "USER-GROUPS")).toEqual(["dev,ops"]);
      expect(headerValues(rec, "X-Custom")).toEqual(["kept"]);
    });

    it("names listed in Connection remove neither the identity, Host, the framing nor X-Forwarded-*", async () => {
      const path = uniquePath("conn");
      const a = await send(prot.port, {
        method: "POST",
        path,
        headers: [
          "Host", "app.example.test",
          "Connection", "close, REMOTE-USER, USER-GROUPS, X-Listed",
          "Connection", "Host, Content-Length, X-Forwarded-For, X-Forwarded-Proto",
          "REMOTE-USER", "evil",
          "X-Listed", "1",
          "X-Other", "2",
          "Content-Length", "5",
        ],
        body: "hello",
      });
      expect(a.status).toBe(200);
      const rec = await recordOf(up, path);
      expect(headerValues(rec, "REMOTE-USER")).toEqual(["alice@example.org"]);
      expect(headerValues(rec, "USER-GROUPS")).toEqual(["dev,ops"]);
      expect(headerValues(rec, "X-Listed")).toEqual([]);
      expect(headerValues(rec, "X-Other")).toEqual(["2"]);
      expect(headerValues(rec, "Host")).toEqual(["app.example.test"]);
      expect(headerValues(rec, "Content-Length")).toEqual(["5"]);
      expect(rec.bodyLength).toBe(5);
      expect(headerValues(rec, "X-Forwarded-For")).toEqual(["127.0.0.1"]);
      expect(headerValues(rec, "X-Forwarded-Proto")).toEqual(["https"]);
      // The upstream connection's own header (the proxy keeps it alive), not the client's "close".
      expect(headerValues(rec, "Connection")).toEqual(["keep-alive"]);
    });

    it("an identity value HTTP cannot carry is refused with 500 and nothing reaches the upstream", async () => {
      const bad = await startProxy(upstream, { ...protectedFr, identity: { "REMOTE-USER": "a@x.org\r\nX-Evil: 1" } });
      try {
        const path = uniquePath("crlf");
        const a = await send(bad.port, { path });
        expect(a.status).toBe(500);
        expect(a.body.toString()).toContain("identity header REMOTE-USER");
        // A request sent afterwards through the other proxy is recorded; the refused one never was.
        const after = uniquePath("crlf-after");
        await send(open.port, { path: after });
        await recordOf(up, after);
        expect(up.requests.some((r) => r.url === path)).toBe(false);
      } finally {
        await bad.stop();
      }
    });
  });

  describe("forwarding headers", () => {
    it("X-Forwarded-For/Proto/Host are the proxy's; Forwarded, X-Real-IP, X-Original-* and other X-Forwarded-* go", async () => {
      const path = uniquePath("xff");
      await send(prot.port, {
        path,
        headers: [
          "Host", "app.example.test:8443",
          "X-Forwarded-For", "6.6.6.6",
          "X_Forwarded_For", "7.7.7.7",
          "X-Forwarded-Proto", "http",
          "X-Forwarded-Host", "evil.test",
          "X-Forwarded-Uri", "/public",
          "X-Forwarded-Port", "1",
          "Forwarded", "for=6.6.6.6;proto=http",
          "X-Real-IP", "6.6.6.6",
          "X-Original-URI", "/public",
          "X-Original-URL", "/public",
          "X-Rewrite-URL", "/public",
        ],
      });
      const rec = await recordOf(up, path);
      expect(headerValuesAnySpelling(rec, "X-Forwarded-For")).toEqual(["127.0.0.1"]);
      expect(headerValuesAnySpelling(rec, "X-Forwarded-Proto")).toEqual(["https"]);
      expect(headerValuesAnySpelling(rec, "X-Forwarded-Host")).toEqual(["app.example.test:8443"]);
      expect(headerValues(rec, "Host")).toEqual(["app.example.test:8443"]);
      for (const gone of ["X-Forwarded-Uri", "X-Forwarded-Port", "Forwarded", "X-Real-IP", "X-Original-URI", "X-Original-URL", "X-Rewrite-URL"]) {
        expect(headerValuesAnySpelling(rec, gone), gone).toEqual([]);
      }
    });

    it("X-Forwarded-Proto follows the client's scheme", async () => {
      const path = uniquePath("xfp");
      await send(open.port, { path, headers: ["X-Forwarded-Proto", "https"] });
      expect(headerValues(await recordOf(up, path), "X-Forwarded-Proto")).toEqual(["http"]);
    });

    const cookieCases: [string, string[], string[]][] = [
      ["sso and csrf removed, two Cookie headers merged", ["Cookie", "sso=tok; a=1; sso_csrf=c", "Cookie", "sso2=keep; b=2"], ["a=1; sso2=keep; b=2"]],
      ["only sso: no Cookie header at all", ["Cookie", "sso=tok"], []],
      ["spacing and letter case", ["Cookie", "a=1;b=2;  sso=x ;Sso=y"], ["a=1; b=2; Sso=y"]],
      ["sso in both headers", ["Cookie", "sso=a", "Cookie", "sso_csrf=b; sso=c"], []],
      ["a name-less value is kept", ["Cookie", "sso; a=1"], ["sso; a=1"]],
      ["other cookies untouched", ["Cookie", "a=1; ssox=2"], ["a=1; ssox=2"]],
      ["no cookie", [], []],
    ];
    it.each(cookieCases)("cookies: %s", async (_name, sent, want) => {
      const path = uniquePath("cookie");
      await send(prot.port, { path, headers: sent });
      expect(headerValues(await recordOf(up, path), "Cookie")).toEqual(want);
    });

    it("hop-by-hop request headers are not forwarded", async () => {
      const path = uniquePath("hop");
      const a = await send(open.port, {
        method: "POST",
        path,
        headers: [
          "Keep-Alive", "timeout=99",
          "Proxy-Connection", "keep-alive",
          "TE", "trailers",
          "Proxy-Authorization", "Basic eDp5",
          "Proxy", "http://evil.test:3128",
          "Trailer", "X-T",
          "Upgrade", "h2c",
          "X-Kept", "yes",
          "Transfer-Encoding", "chunked",
        ],
        body: "hi",
      });
      expect(a.status).toBe(200);
      const rec = await recordOf(up, path);
      for (const gone of ["Keep-Alive", "Proxy-Connection", "TE", "Proxy-Authorization", "Proxy", "Trailer", "Upgrade"]) expect(headerValues(rec, gone), gone).toEqual([]);
      expect(headerValues(rec, "X-Kept")).toEqual(["yes"]);
      expect(rec.bodyLength).toBe(2);
    });

    it("hop-by-hop response headers are not relayed; every Set-Cookie and the status message are", async () => {
      const a = await send(open.port, { path: uniquePath("hop-resp", "?hop=1") });
      expect(a.status).toBe(200);
      expect(a.statusMessage).toBe("Fine Thanks");
      expect(headerValues(a, "X-Resp-Hop")).toEqual([]);
      expect(headerValues(a, "Proxy-Authenticate")).toEqual([]);
      expect(headerValues(a, "Proxy-Connection")).toEqual([]);
      expect(headerValues(a, "Upgrade")).toEqual([]);
      // The proxy's own connection headers, not the upstream's.
      expect(headerValues(a, "Keep-Alive")).not.toContain("timeout=7, max=99");
      expect(headerValues(a, "Connection").join(",").toLowerCase()).not.toContain("x-resp-hop");
      expect(headerValues(a, "Set-Cookie")).toEqual(["a=1; Path=/", "b=2; Path=/"]);
      expect(headerValues(a, "X-Kept")).toEqual(["yes"]);
    });
  });

  describe("bodies", () => {
    it("a chunked request body arrives whole, re-chunked", async () => {
      const path = uniquePath("chunked-in");
      const a = await new Promise<Answer>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port: open.port, method: "PUT", path, headers: ["Host", "app.test", "Transfer-Encoding", "chunked"], agent: false });
        req.on("error", reject);
        req.on("response", (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (d: Buffer) => chunks.push(d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, statusMessage: "", rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }));
        });
        req.write("a".repeat(1000));
        req.write("b".repeat(2000));
        req.end("c".repeat(3000));
      });
      expect(a.status).toBe(200);
      const rec = await recordOf(up, path);
      expect(rec.bodyLength).toBe(6000);
      expect(headerValues(rec, "Transfer-Encoding")).toEqual(["chunked"]);
      expect(headerValues(rec, "Content-Length")).toEqual([]);
    });

    it("a GET with a chunked body is framed upstream, so its body cannot become a second request", async () => {
      const path = uniquePath("smuggle");
      const smuggled = uniquePath("smuggled");
      const body = `GET ${smuggled} HTTP/1.1\r\nHost: app.test\r\n\r\n`;
      const a = await send(open.port, { path, headers: ["Transfer-Encoding", "chunked"], body });
      expect(a.status).toBe(200);
      const rec = await recordOf(up, path);
      expect(rec.bodyLength).toBe(body.length);
      // The next request travels on the same pooled upstream connection: had the body gone
      // unframed, the upstream would have read the smuggled request there first.
      const after = uniquePath("after-smuggle");
      await send(open.port, { path: after });
      const afterRec = await recordOf(up, after);
      expect(afterRec.connection).toBe(rec.connection);
      expect(up.requests.some((r) => r.url === smuggled)).toBe(false);
    });

    it("Content-Length: 0 with no body", async () => {
      const path = uniquePath("empty");
      const a = await send(open.port, { method: "POST", path, headers: ["Content-Length", "0"] });
      expect(a.status).toBe(200);
      const rec = await recordOf(up, path);
      expect(headerValues(rec, "Content-Length")).toEqual(["0"]);
      expect(rec.bodyLength).toBe(0);
      expect(rec.complete).toBe(true);
    });

    it("a POST without any framing header has no body, and says so upstream", async () => {
      const path = uniquePath("unframed-post");
      const s = await rawSocket(open.port);
      try {
        s.write(`POST ${path} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n`);
        const r = splitResponse(await readToClose(s));
        expect(r.statusLine).toBe("HTTP/1.1 200 OK");
      } finally {
        s.destroy();
      }
      const rec = await recordOf(up, path);
      expect(rec.bodyLength).toBe(0);
      expect(headerValues(rec, "Content-Length")).toEqual(["0"]);
    });

    it("Expect: 100-continue is met by the proxy's server and not replayed upstream", async () => {
      const path = uniquePath("expect");
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port: open.port, method: "PUT", path, headers: ["Host", "app.test", "Expect", "100-continue", "Content-Length", "5"], agent: false });
        req.on("error", reject);
        req.on("continue", () => req.end("12345"));
        req.on("response", (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
      });
      expect(status).toBe(200);
      const rec = await recordOf(up, path);
      expect(rec.bodyLength).toBe(5);
      expect(headerValues(rec, "Expect")).toEqual([]);
    });

    it("HEAD keeps Content-Length without a body, and the kept-alive client connection stays in step", async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const head = await send(open.port, { method: "HEAD", path: uniquePath("head", "?bytes=5000"), agent });
        expect(head.status).toBe(200);
        expect(headerValues(head, "Content-Length")).toEqual(["5000"]);
        expect(head.body.length).toBe(0);
        const next = await send(open.port, { path: uniquePath("after-head"), agent });
        expect(next.status).toBe(200);
        expect(JSON.parse(next.body.toString()).method).toBe("GET");
      } finally {
        agent.destroy();
      }
    });

    it.each([204, 304])("%i passes without a body and the connection stays in step", async (status) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const a = await send(open.port, { path: uniquePath("nobody", `?status=${status}`), agent });
        expect(a.status).toBe(status);
        expect(a.body.length).toBe(0);
        const next = await send(open.port, { path: uniquePath("after-nobody"), agent });
        expect(next.status).toBe(200);
      } finally {
        agent.destroy();
      }
    });

    it("a response streamed slowly in chunks arrives whole", async () => {
      const a = await sendCounting(open.port, uniquePath("slow", "?bytes=200000&chunked=1&chunk=20000&pace=5"));
      expect(a).toEqual({ status: 200, received: 200000, declared: undefined, error: undefined });
    });
  });

  describe("upstream failures and client aborts", () => {
    it("a closed port: 502 naming the upstream and the error, nothing else", async () => {
      const port = await closedPort();
      const dead = createUpstream(`http://127.0.0.1:${port}`);
      const p = await startProxy(dead, openFr);
      try {
        const a = await send(p.port, { path: "/x" });
        expect(a.status).toBe(502);
        expect(a.body.toString()).toBe(`502 Bad Gateway: upstream http://127.0.0.1:${port} unreachable (ECONNREFUSED)\n`);
        expect(headerValues(a, "Content-Type")).toEqual(["text/plain; charset=utf-8"]);
        // With a request body too.
        const b = await send(p.port, { method: "POST", path: "/x", headers: ["Content-Length", "1024"], body: Buffer.alloc(1024) });
        expect(b.status).toBe(502);
      } finally {
        await p.stop();
        dead.agent.destroy();
      }
    });

    it("response headers later than responseTimeoutMs: 504, and the upstream request is let go", async () => {
      const slow = createUpstream(up.url, { responseTimeoutMs: 300 });
      const p = await startProxy(slow, openFr);
      try {
        const path = uniquePath("late", "?delay=20000");
        const a = await send(p.port, { path });
        expect(a.status).toBe(504);
        expect(a.body.toString()).toBe("504 Gateway Timeout: upstream did not answer within 0.3 s\n");
        const rec = await recordOf(up, path);
        await up.waitFor("the upstream to see the request closed", () => rec.aborted);
      } finally {
        await p.stop();
        slow.agent.destroy();
      }
    });

    it.each([
      ["with Content-Length", "?bytes=1048576&die=100000"],
      ["chunked", "?bytes=1048576&chunked=1&die=100000"],
    ])("the upstream dying mid-body (%s) cuts the client off, and the next request is served", async (_name, query) => {
      const a = await sendCounting(open.port, uniquePath("die", query));
      expect(a.status).toBe(200);
      expect(a.error).toBeDefined();
      expect(a.received).toBeLessThan(1048576);
      const next = await send(open.port, { path: uniquePath("after-die") });
      expect(next.status).toBe(200);
    });

    it("an upstream idle mid-body for idleTimeoutMs: the client is cut off and the upstream let go", async () => {
      const idle = createUpstream(up.url, { idleTimeoutMs: 300 });
      const p = await startProxy(idle, openFr);
      try {
        const path = uniquePath("idle", "?bytes=300000&chunked=1&hold=1");
        const a = await sendCounting(p.port, path);
        expect(a.status).toBe(200);
        expect(a.error).toBeDefined();
        expect(a.received).toBe(300000 - (300000 % 65536));
        const rec = await recordOf(up, path);
        await up.waitFor("the upstream to see the request closed", () => rec.aborted);
      } finally {
        await p.stop();
        idle.agent.destroy();
      }
    });

    it("a client that stops reading is cut off after idleTimeoutMs and the upstream let go (as nginx's send_timeout)", async () => {
      const idle = createUpstream(up.url, { idleTimeoutMs: 300 });
      const p = await startProxy(idle, openFr);
      const req = http.request({ host: "127.0.0.1", port: p.port, path: uniquePath("stalled-client", "?bytes=67108864&chunked=1"), headers: ["Host", "app.test"], agent: false });
      try {
        // 64 MiB: far more than the socket buffers of both hops hold, so the upstream must wait.
        const path = req.path;
        req.on("error", () => undefined);
        const status = new Promise<number>((resolve) =>
          req.on("response", (res) => {
            res.pause(); // never read
            res.on("error", () => undefined);
            resolve(res.statusCode ?? 0);
          }),
        );
        req.end();
        expect(await status).toBe(200);
        const rec = await recordOf(up, path);
        await up.waitFor("the upstream to see the request closed", () => rec.aborted, 10_000);
        expect(rec.answered).toBe(false);
        expect(rec.sent).toBeLessThan(67108864);
        // The proxy serves on.
        expect((await send(p.port, { path: uniquePath("after-stall") })).status).toBe(200);
      } finally {
        req.destroy();
        await p.stop();
        idle.agent.destroy();
      }
    });

    it("the client going away closes the upstream request", async () => {
      const path = uniquePath("abort", "?hang=1");
      const req = http.request({ host: "127.0.0.1", port: open.port, path, headers: ["Host", "app.test"], agent: false });
      req.on("error", () => undefined);
      req.end();
      const rec = await recordOf(up, path);
      expect(rec.aborted).toBe(false);
      req.destroy();
      await up.waitFor("the upstream to see the request closed", () => rec.aborted);
    });

    it("the client going away mid-response closes the upstream request", async () => {
      const path = uniquePath("abort-body", "?bytes=10485760&chunked=1&hold=1");
      const req = http.request({ host: "127.0.0.1", port: open.port, path, headers: ["Host", "app.test"], agent: false });
      req.on("error", () => undefined);
      const firstBytes = new Promise<void>((resolve) => req.on("response", (res) => res.once("data", () => resolve())));
      req.end();
      await firstBytes;
      req.destroy();
      const rec = await recordOf(up, path);
      await up.waitFor("the upstream to see the request closed", () => rec.aborted);
      expect(rec.answered).toBe(false);
    });
  });

  describe("WebSocket upgrades", () => {
    const handshake = (path: string, extra = "") =>
      `GET ${path} HTTP/1.1\r\nHost: app.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`;

    it("101 and bytes echo both ways, with the same header rules as plain requests", async () => {
      const path = uniquePath("ws");
      const s = await rawSocket(prot.port);
      try {
        // Bytes right behind the handshake reach the upstream (as the server's `head`, or after it).
        s.write(handshake(path, "REMOTE_USER: evil\r\nremote-user: evil2\r\nCookie: sso=t; a=1\r\nX-Forwarded-For: 6.6.6.6\r\n") + "early;");
        const got = await readUntil(s, (all) => all.includes("\r\n\r\n") && all.includes("early;"), "the 101 and the early bytes");
        const r = splitResponse(got);
        expect(r.statusLine).toBe("HTTP/1.1 101 Switching Protocols");
        expect(headerValues(r, "Sec-WebSocket-Accept")).toEqual(["s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]);
        expect(headerValues(r, "X-Echo-Upgrade")).toEqual(["yes"]);
        expect(headerValues(r, "Upgrade")).toEqual(["websocket"]);
        expect(r.body).toBe("early;");
        s.write("ping-1;");
        await readUntil(s, (all) => all === "ping-1;", "the echo");
        s.write(Buffer.alloc(256 * KiB, 7));
        await readUntil(s, (all) => all.length === 256 * KiB, "the large echo");

        const rec = await recordOf(up, path);
        expect(rec.upgrade).toBe(true);
        expect(headerValuesAnySpelling(rec, "REMOTE-USER")).toEqual(["alice@example.org"]);
        expect(headerValues(rec, "Connection")).toEqual(["upgrade"]);
        expect(headerValues(rec, "Upgrade")).toEqual(["websocket"]);
        expect(headerValues(rec, "Cookie")).toEqual(["a=1"]);
        expect(headerValues(rec, "X-Forwarded-For")).toEqual(["127.0.0.1"]);
        expect(headerValues(rec, "Sec-WebSocket-Key")).toEqual(["dGhlIHNhbXBsZSBub25jZQ=="]);

        // Closing the client closes the upstream side of the tunnel.
        const openBefore = up.stats.open;
        s.end();
        await up.waitFor("the upstream tunnel socket to close", () => up.stats.open < openBefore);
      } finally {
        s.destroy();
      }
    });

    it("the upstream closing the tunnel closes the client", async () => {
      const path = uniquePath("ws-upclose", "?close=1");
      const s = await rawSocket(open.port);
      const closed = readToClose(s);
      s.write(handshake(path));
      await readUntil(s, (all) => all.includes("\r\n\r\n"), "the 101");
      s.write("last words");
      const all = await closed;
      expect(all.startsWith("HTTP/1.1 101 ")).toBe(true);
      expect(all.endsWith("\r\n\r\nlast words")).toBe(true);
    });

    it("a refused upgrade is relayed as is, then the connection closes", async () => {
      const s = await rawSocket(open.port);
      const all = readToClose(s);
      s.write(handshake(uniquePath("ws", "?refuse=1")));
      const r = splitResponse(await all);
      expect(r.statusLine).toBe("HTTP/1.1 403 Forbidden");
      expect(headerValues(r, "X-Refused")).toEqual(["yes"]);
      expect(headerValues(r, "Content-Length")).toEqual(["7"]);
      expect(r.body).toBe("refused");
    });

    it("an unreachable upstream: 502 on the socket", async () => {
      const port = await closedPort();
      const dead = createUpstream(`http://127.0.0.1:${port}`);
      const p = await startProxy(dead, openFr);
      try {
        const s = await rawSocket(p.port);
        const all = readToClose(s);
        s.write(handshake("/ws"));
        const r = splitResponse(await all);
        expect(r.statusLine).toBe("HTTP/1.1 502 Bad Gateway");
        expect(r.body).toBe(`502 Bad Gateway: upstream http://127.0.0.1:${port} unreachable (ECONNREFUSED)\n`);
      } finally {
        await p.stop();
        dead.agent.destroy();
      }
    });

    it("no 101 within responseTimeoutMs: 504 on the socket", async () => {
      // An upstream that accepts the connection and never answers.
      const silent = net.createServer((c) => c.on("error", () => undefined));
      silent.listen(0, "127.0.0.1");
      await once(silent, "listening");
      const slow = createUpstream(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, { responseTimeoutMs: 300 });
      const p = await startProxy(slow, openFr);
      try {
        const s = await rawSocket(p.port);
        const all = readToClose(s);
        s.write(handshake("/ws"));
        const r = splitResponse(await all);
        expect(r.statusLine).toBe("HTTP/1.1 504 Gateway Timeout");
        expect(r.body).toBe("504 Gateway Timeout: upstream did not answer within 0.3 s\n");
      } finally {
        await p.stop();
        slow.agent.destroy();
        silent.close();
      }
    });
  });

  describe("respondOnSocket", () => {
    let server: http.Server;
    let port: number;
    let answerWith: (socket: Duplex) => void = () => undefined;

    beforeAll(async () => {
      server = http.createServer((_req, res) => res.end());
      server.on("upgrade", (_req: http.IncomingMessage, socket: Duplex) => answerWith(socket));
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    const refuse = async (): Promise<ReturnType<typeof splitResponse>> => {
      const s = await rawSocket(port);
      const all = readToClose(s);
      s.write("GET /ws HTTP/1.1\r\nHost: app.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
      return splitResponse(await all);
    };

    it("writes the status, every header value, the body with its length, then closes", async () => {
      answerWith = (socket) => respondOnSocket(socket, 401, { "WWW-Authenticate": 'Bearer realm="capstan"', "Set-Cookie": ["a=1", "b=2"], "Cache-Control": "no-store" }, "log in first");
      const r = await refuse();
      expect(r.statusLine).toBe("HTTP/1.1 401 Unauthorized");
      expect(headerValues(r, "WWW-Authenticate")).toEqual(['Bearer realm="capstan"']);
      expect(headerValues(r, "Set-Cookie")).toEqual(["a=1", "b=2"]);
      expect(headerValues(r, "Content-Length")).toEqual(["12"]);
      expect(headerValues(r, "Connection")).toEqual(["close"]);
      expect(r.body).toBe("log in first");
    });

    it("a header value with CR LF cannot add a header: the answer becomes a plain 500", async () => {
      answerWith = (socket) => respondOnSocket(socket, 302, { Location: "/x\r\nSet-Cookie: sso=evil" });
      const r = await refuse();
      expect(r.statusLine).toBe("HTTP/1.1 500 Internal Server Error");
      expect(headerValues(r, "Set-Cookie")).toEqual([]);
      expect(headerValues(r, "Location")).toEqual([]);
    });
  });

  describe("upstream connections", () => {
    it("sequential requests reuse one kept-alive upstream connection", async () => {
      const fresh = await startEchoUpstream();
      const u = createUpstream(fresh.url);
      const p = await startProxy(u, openFr);
      try {
        for (let i = 0; i < 25; i++) {
          const a = await send(p.port, { path: `/seq/${i}` });
          expect(a.status).toBe(200);
        }
        expect(fresh.requests).toHaveLength(25);
        expect(fresh.stats.connections).toBe(1);
        expect(new Set(fresh.requests.map((r) => r.connection))).toEqual(new Set([1]));
      } finally {
        await p.stop();
        u.agent.destroy();
        await fresh.stop();
      }
    });

    it("concurrent requests each get their own answer, on at most one connection per request in flight", async () => {
      const fresh = await startEchoUpstream();
      const u = createUpstream(fresh.url);
      const p = await startProxy(u, openFr);
      try {
        for (let round = 0; round < 4; round++) {
          const answers = await Promise.all(Array.from({ length: 32 }, (_, i) => send(p.port, { path: `/c/${round}/${i}` })));
          answers.forEach((a, i) => expect(JSON.parse(a.body.toString()).url).toBe(`/c/${round}/${i}`));
        }
        expect(fresh.requests).toHaveLength(128);
        expect(fresh.stats.connections).toBeLessThanOrEqual(32);
      } finally {
        await p.stop();
        u.agent.destroy();
        await fresh.stop();
      }
    });

    it("an https upstream is verified against the given CA", async () => {
      const pki = await makePki();
      const other = await makePki("another-ca");
      const cert = await pki.issue("server", { ip: ["127.0.0.1"] });
      const tls = https.createServer({ cert: await readFile(cert.cert), key: await readFile(cert.key) }, (req, res) => {
        res.end(`tls ok ${req.headers["x-forwarded-proto"]} ${req.headers.host}`);
      });
      tls.listen(0, "127.0.0.1");
      await once(tls, "listening");
      const url = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`;
      const good = createUpstream(url, { ca: await readFile(pki.ca, "utf8") });
      const bad = createUpstream(url, { ca: await readFile(other.ca, "utf8") });
      const pGood = await startProxy(good, openFr);
      const pBad = await startProxy(bad, openFr);
      try {
        const a = await send(pGood.port, { path: "/tls", headers: ["Host", "app.test"] });
        expect(a.status).toBe(200);
        expect(a.body.toString()).toBe("tls ok http app.test");
        const b = await send(pBad.port, { path: "/tls" });
        expect(b.status).toBe(502);
        expect(b.body.toString()).toMatch(new RegExp(`^502 Bad Gateway: upstream ${url.replaceAll(".", "\\.")} (unreachable|failed) \\([A-Z_]+\\)\\n$`));
      } finally {
        await pGood.stop();
        await pBad.stop();
        good.agent.destroy();
        bad.agent.destroy();
        tls.closeAllConnections();
        tls.close();
        await pki.remove();
        await other.remove();
      }
    });
  });
});

describe("createUpstream", () => {
  it.each([
    ["ftp://127.0.0.1/", /scheme must be http or https/],
    ["http://user:pw@127.0.0.1/", /must not carry credentials/],
    ["http://127.0.0.1/?a=1", /query or fragment/],
    ["http://127.0.0.1/?", /query or fragment/],
    ["http://127.0.0.1/#x", /query or fragment/],
    ["http://127.0.0.1/app", /must be an origin/],
    ["not a url", /is not a URL/],
  ])("refuses %s", (url, message) => {
    expect(() => createUpstream(url)).toThrow(message);
  });

  it("never repeats credentials in its message", () => {
    expect(() => createUpstream("http://user:secret@127.0.0.1/")).toThrow(/^(?!.*secret)/s);
  });

  it("refuses bad timeouts and a CA for plain http", () => {
    expect(() => createUpstream("http://127.0.0.1", { responseTimeoutMs: 0 })).toThrow(/responseTimeoutMs must be a positive/);
    expect(() => createUpstream("http://127.0.0.1", { idleTimeoutMs: Number.NaN })).toThrow(/idleTimeoutMs/);
    expect(() => createUpstream("http://127.0.0.1", { ca: "x" })).toThrow(/only used for an https upstream/);
  });

  it("keeps an origin with or without the trailing slash, with defaults", () => {
    const u = createUpstream("http://127.0.0.1:8080");
    expect(u.url.origin).toBe("http://127.0.0.1:8080");
    expect(u.connectTimeoutMs).toBeGreaterThan(0);
    expect((u.agent as http.Agent & { keepAlive?: boolean }).keepAlive).toBe(true);
    u.agent.destroy();
  });
});

describe("streaming through a separate proxy process (no buffering, bounded memory)", () => {
  const total = 10 * MiB;
  const chunk = 64 * KiB;
  let up: EchoUpstream;
  let child: ChildProcess;
  let port: number;

  beforeAll(async () => {
    up = await startEchoUpstream();
    const forwardUrl = pathToFileURL(fileURLToPath(new URL("../../../api/authproxy/forward.ts", import.meta.url))).href;
    const code = `
      import http from "node:http";
      import { createUpstream, forward } from ${JSON.stringify(forwardUrl)};
      const up = createUpstream(process.env.ECHO_UPSTREAM);
      const fr = { identity: { "REMOTE-USER": "alice@example.org" }, strip: ["REMOTE-USER", "USER-GROUPS"], stripCookies: ["sso"], proto: "http" };
      const server = http.createServer((req, res) => {
        if (req.url === "/__mem") { globalThis.gc(); globalThis.gc(); const m = process.memoryUsage(); res.end(String(m.heapUsed + m.external)); return; }
        forward(req, res, up, { ...fr, path: req.url });
      });
      server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\\n"));
    `;
    const root = fileURLToPath(new URL("../../../", import.meta.url));
    child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", "--input-type=module", "-e", code], {
      cwd: root,
      env: { ...process.env, ECHO_UPSTREAM: up.url },
      stdio: ["ignore", "pipe", "inherit"],
    });
    port = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        if (out.includes("\n")) resolve(Number(out.trim()));
      });
      child.on("exit", (c) => reject(new Error(`proxy process exited (${c}) before listening`)));
    });
  });

  afterAll(async () => {
    if (child !== undefined && child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
    await up?.stop();
  });

  // Live memory after a full GC: the JS heap plus Buffers (external). Not RSS: freed memory the
  // allocator has not yet returned to the system counts there, and on a loaded machine that
  // swings by more than the bound below.
  const live = async (): Promise<number> => Number((await send(port, { path: "/__mem" })).body.toString());

  /** Upload `total` bytes; before the last chunk, the upstream must already have all the others. */
  const upload = async (): Promise<{ liveMidway: number }> => {
    const path = uniquePath("upload");
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path, headers: ["Host", "app.test", "Content-Length", String(total)], agent: false });
    const answered = new Promise<string>((resolve, reject) => {
      req.on("error", reject);
      req.on("response", (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => resolve(body));
      });
    });
    const buf = Buffer.alloc(chunk, "u");
    for (let sent = 0; sent < total - chunk; sent += chunk) if (!req.write(buf)) await once(req, "drain");
    const rec = await up.waitFor("the upstream to receive all but the last chunk while the client is still sending", () =>
      up.requests.find((r) => r.url === path && r.bodyLength >= total - chunk),
    );
    expect(rec.complete).toBe(false);
    const liveMidway = await live();
    req.end(buf);
    expect(JSON.parse(await answered).bodyLength).toBe(total);
    return { liveMidway };
  };

  /** Download `total` bytes; the client must hold all but the last chunk before the upstream sends it. */
  const download = async (): Promise<{ liveMidway: number }> => {
    const path = uniquePath("download", `?bytes=${total}&chunked=1&hold=1`);
    let received = 0;
    let nearlyAll!: () => void;
    const reachedNearlyAll = new Promise<void>((r) => (nearlyAll = r));
    const ended = new Promise<void>((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, path, headers: ["Host", "app.test"], agent: false });
      req.on("error", reject);
      req.on("response", (res) => {
        res.on("data", (d: Buffer) => {
          received += d.length;
          if (received >= total - chunk) nearlyAll();
        });
        res.on("error", reject);
        res.on("end", () => resolve());
      });
      req.end();
    });
    await reachedNearlyAll;
    const rec = await recordOf(up, path);
    expect(rec.answered).toBe(false);
    const liveMidway = await live();
    up.release(rec.id);
    await ended;
    expect(received).toBe(total);
    return { liveMidway };
  };

  it("10 MiB up and 10 MiB down stream through while the proxy's memory stays well below one body", async () => {
    // A first round lets the process reach its steady state (code compiled, pools allocated).
    await upload();
    await download();
    const baseline = await live();
    const up1 = await upload();
    const down1 = await download();
    const growth = Math.max(up1.liveMidway, down1.liveMidway) - baseline;
    expect(growth).toBeLessThan(total / 2);
  });
});
