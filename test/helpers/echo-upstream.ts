// An upstream application for proxy tests: a node:http server on 127.0.0.1 that records every
// request it receives (method, url, raw headers as they arrived, body bytes as they stream in)
// and answers as the request's query asks, so a test can drive it through capstan authproxy,
// through nginx, or through forward.ts alone. Waiting is on observations (waitFor), never sleeps.
//
//   const up = await startEchoUpstream();
//   ... send GET /x?status=404 through the proxy ...
//   const rec = await up.waitFor("the request", () => up.requests.find((r) => r.url.startsWith("/x")));
//   expect(headerValuesAnySpelling(rec, "REMOTE-USER")).toEqual(["alice@example.org"]);
//   await up.stop();
//
// Query parameters (any combination):
//   status=N     answer with status N (default 200)
//   delay=MS     wait MS before sending the response headers (after the request body arrived)
//   hang=1       never answer (the request is read; the connection waits until someone closes it)
//   bytes=N      answer with N bytes of "x" (application/octet-stream) instead of the JSON echo
//   chunked=1    ... without Content-Length (chunked), otherwise with it
//   chunk=N      ... written N bytes at a time (default 65536), honouring backpressure
//   pace=MS      ... pausing MS between chunks (a slow stream)
//   hold=1       ... all but the last chunk, then wait for release(id)
//   die=N        ... closing the connection abruptly after N body bytes
//   hop=1        add hop-by-hop response headers (Connection: keep-alive, X-Resp-Hop; X-Resp-Hop;
//                Keep-Alive: timeout=7, max=99; Proxy-Authenticate; Proxy-Connection; Upgrade),
//                two Set-Cookie headers, X-Kept: yes and the status message "Fine Thanks"
//   refuse=1     (upgrade requests) answer 403 "refused" instead of 101
//   close=1      (upgrade requests) close the tunnel after echoing the first bytes
// The default answer is JSON: { id, method, url, rawHeaders, bodyLength } of the request.
// Upgrade requests get 101 and then every byte sent is echoed back (no WebSocket framing: a
// proxy passes bytes through, so echoing raw bytes is enough to check it).
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";

export interface RecordedRequest {
  id: number;
  method: string;
  url: string;
  httpVersion: string;
  /** Header names and values as received: [name, value, name, value, ...], duplicates and spelling kept. */
  rawHeaders: string[];
  /** Body bytes received so far (grows while the body streams in). */
  bodyLength: number;
  /** The request body was received whole. */
  complete: boolean;
  /** Response body bytes handed to the socket so far. */
  sent: number;
  /** The response was sent whole. */
  answered: boolean;
  /** The connection closed before the response was sent whole. */
  aborted: boolean;
  /** Came as an upgrade request (WebSocket echo). */
  upgrade: boolean;
  /** Which upstream connection carried it: 1 for the first accepted, and so on. */
  connection: number;
}

export interface EchoUpstream {
  /** http://127.0.0.1:PORT */
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Connections accepted so far, and those still open. */
  readonly stats: { connections: number; open: number };
  /** Resolve with check()'s first value that is not undefined/false, re-checked on every change; reject naming `what` after timeoutMs. */
  waitFor<T>(what: string, check: () => T | undefined | false, timeoutMs?: number): Promise<T>;
  /** Let a `hold=1` answer send its last chunk. */
  release(id: number): void;
  stop(): Promise<void>;
}

/** Every value of the headers whose name equals `name` in any letter case. */
export function headerValues(rec: { rawHeaders: readonly string[] }, name: string): string[] {
  const want = name.toLowerCase();
  const out: string[] = [];
  for (let i = 0; i < rec.rawHeaders.length; i += 2) if (rec.rawHeaders[i]!.toLowerCase() === want) out.push(rec.rawHeaders[i + 1]!);
  return out;
}

/** Every value of the headers whose name equals `name` in any letter case and with "_" read as "-" (as CGI-style frameworks read them). */
export function headerValuesAnySpelling(rec: { rawHeaders: readonly string[] }, name: string): string[] {
  const norm = (s: string) => s.toLowerCase().replaceAll("_", "-");
  const want = norm(name);
  const out: string[] = [];
  for (let i = 0; i < rec.rawHeaders.length; i += 2) if (norm(rec.rawHeaders[i]!) === want) out.push(rec.rawHeaders[i + 1]!);
  return out;
}

const wsGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

export async function startEchoUpstream(): Promise<EchoUpstream> {
  const requests: RecordedRequest[] = [];
  const changes = new EventEmitter();
  changes.setMaxListeners(0);
  const changed = () => changes.emit("change");
  const releases = new Map<number, () => void>();
  const released = new Set<number>();
  const sockets = new Set<Duplex>();
  const connectionOf = new WeakMap<object, number>();
  const stats = { connections: 0, open: 0 };
  let nextId = 1;

  const record = (req: http.IncomingMessage, upgrade: boolean): RecordedRequest => {
    const rec: RecordedRequest = {
      id: nextId++,
      method: req.method ?? "",
      url: req.url ?? "",
      httpVersion: req.httpVersion,
      rawHeaders: [...req.rawHeaders],
      bodyLength: 0,
      complete: upgrade,
      sent: 0,
      answered: false,
      aborted: false,
      upgrade,
      connection: connectionOf.get(req.socket) ?? 0,
    };
    requests.push(rec);
    changed();
    return rec;
  };

  const server = http.createServer((req, res) => {
    const rec = record(req, false);
    const q = new URL(req.url ?? "/", "http://x").searchParams;
    res.on("close", () => {
      if (!res.writableFinished) rec.aborted = true;
      changed();
    });
    req.on("data", (d: Buffer) => {
      rec.bodyLength += d.length;
      changed();
    });
    req.on("end", () => {
      rec.complete = true;
      changed();
      void answer(req, res, rec, q);
    });
  });

  const closedOrDrained = (res: http.ServerResponse) =>
    new Promise<void>((resolve) => {
      const done = () => {
        res.off("drain", done);
        res.off("close", done);
        resolve();
      };
      res.on("drain", done);
      res.on("close", done);
    });

  const answer = async (req: http.IncomingMessage, res: http.ServerResponse, rec: RecordedRequest, q: URLSearchParams) => {
    if (q.has("hang")) return;
    const delay = Number(q.get("delay") ?? 0);
    if (delay > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        res.on("close", () => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    if (res.destroyed) return;
    const status = Number(q.get("status") ?? 200);
    const headers: string[] = [];
    let message: string | undefined;
    if (q.has("hop")) {
      message = "Fine Thanks";
      headers.push(
        "Connection", "keep-alive, X-Resp-Hop",
        "X-Resp-Hop", "secret",
        "Keep-Alive", "timeout=7, max=99",
        "Proxy-Authenticate", "Basic realm=upstream",
        "Proxy-Connection", "keep-alive",
        "Upgrade", "h2c",
        "Set-Cookie", "a=1; Path=/",
        "Set-Cookie", "b=2; Path=/",
        "X-Kept", "yes",
      );
    }
    const finish = () => {
      rec.answered = true;
      changed();
    };
    if (!q.has("bytes")) {
      const noBody = status === 204 || status === 304;
      const body = noBody ? "" : JSON.stringify({ id: rec.id, method: rec.method, url: rec.url, rawHeaders: rec.rawHeaders, bodyLength: rec.bodyLength });
      if (!noBody) headers.push("Content-Type", "application/json", "Content-Length", String(Buffer.byteLength(body)));
      if (message !== undefined) res.writeHead(status, message, headers);
      else res.writeHead(status, headers);
      res.end(body, finish);
      return;
    }
    const total = Number(q.get("bytes"));
    const chunkSize = Number(q.get("chunk") ?? 65536);
    const pace = Number(q.get("pace") ?? 0);
    const die = q.has("die") ? Number(q.get("die")) : undefined;
    headers.push("Content-Type", "application/octet-stream");
    if (!q.has("chunked")) headers.push("Content-Length", String(total));
    if (message !== undefined) res.writeHead(status, message, headers);
    else res.writeHead(status, headers);
    if (req.method === "HEAD") {
      res.end(finish);
      return;
    }
    res.flushHeaders();
    const chunk = Buffer.alloc(chunkSize, "x");
    while (rec.sent < total && !res.destroyed) {
      let n = Math.min(chunkSize, total - rec.sent);
      if (die !== undefined) n = Math.min(n, die - rec.sent);
      if (q.has("hold") && rec.sent + n >= total && !released.has(rec.id)) {
        await new Promise<void>((resolve) => {
          releases.set(rec.id, resolve);
          res.on("close", () => resolve());
          changed();
        });
        if (res.destroyed) return;
      }
      const ok = res.write(n === chunkSize ? chunk : chunk.subarray(0, n));
      rec.sent += n;
      changed();
      if (die !== undefined && rec.sent >= die) {
        res.socket?.destroy();
        return;
      }
      if (!ok) await closedOrDrained(res);
      if (pace > 0) await new Promise((r) => setTimeout(r, pace));
    }
    if (!res.destroyed) res.end(finish);
  };

  server.on("connection", (socket: Socket) => {
    stats.connections++;
    stats.open++;
    connectionOf.set(socket, stats.connections);
    sockets.add(socket);
    socket.on("close", () => {
      stats.open--;
      sockets.delete(socket);
      changed();
    });
    changed();
  });

  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const rec = record(req, true);
    socket.on("error", () => socket.destroy());
    socket.on("close", () => {
      if (!rec.answered) rec.aborted = true;
      changed();
    });
    const q = new URL(req.url ?? "/", "http://x").searchParams;
    if (q.has("refuse")) {
      socket.end("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nX-Refused: yes\r\nConnection: close\r\n\r\nrefused", () => {
        rec.answered = true;
        changed();
      });
      return;
    }
    const key = req.headers["sec-websocket-key"];
    const accept = typeof key === "string" ? createHash("sha1").update(key + wsGuid).digest("base64") : undefined;
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        (accept !== undefined ? `Sec-WebSocket-Accept: ${accept}\r\n` : "") +
        "X-Echo-Upgrade: yes\r\n\r\n",
    );
    rec.answered = true;
    changed();
    if (head.length > 0) socket.write(head);
    socket.on("data", (d: Buffer) => {
      rec.bodyLength += d.length;
      socket.write(d);
      if (q.has("close")) socket.end();
      changed();
    });
    socket.on("end", () => socket.end());
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  const waitFor = <T>(what: string, check: () => T | undefined | false, timeoutMs = 10_000): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      let last: unknown;
      const attempt = (): boolean => {
        try {
          const v = check();
          last = v;
          if (v !== undefined && v !== false) {
            resolve(v);
            return true;
          }
        } catch (e) {
          last = e;
        }
        return false;
      };
      if (attempt()) return;
      const onChange = () => {
        if (attempt()) cleanup();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last)})`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        changes.off("change", onChange);
      };
      changes.on("change", onChange);
    });

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    stats,
    waitFor,
    release(id: number) {
      released.add(id);
      releases.get(id)?.();
      releases.delete(id);
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
