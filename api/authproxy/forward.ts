// Forwarding one request the proxy has already authorised to the upstream, and WebSocket upgrades
// (docs/authproxy.md#what-the-upstream-receives). Headers are rebuilt from the client's raw list:
// hop-by-hop ones and the names the client lists in `Connection` go first, then every spelling of
// the identity headers, then the proxy adds its own identity and `X-Forwarded-*`, so nothing the
// client sends can remove or imitate what the proxy sets. Bodies are piped both ways, never held
// whole. Everything per request lives in one Exchange object that the event emitters reach
// through a symbol, so the handlers are module functions rather than fresh closures per request.
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import type stream from "node:stream";

export interface Upstream {
  /** http: or https: origin; the path is "/" or empty (requests keep their own path). */
  url: URL;
  /** Keeps connections to the upstream alive between requests (and carries the CA of an https upstream). */
  agent: http.Agent | https.Agent;
  /** How long a new connection to the upstream may take. */
  connectTimeoutMs: number;
  /** Time to first response byte (headers), counted from when the request has been sent whole. */
  responseTimeoutMs: number;
  /** How long the upstream socket may stay idle (nothing read or written) during a body, either way. */
  idleTimeoutMs: number;
}

export interface ForwardRequest {
  /** Path + optional query to send upstream (already normalised by the caller). */
  path: string;
  /** Identity headers the proxy sets after stripping, e.g. { "REMOTE-USER": "a@x.org" }; may be empty. */
  identity: Readonly<Record<string, string>>;
  /** Header names removed in every spelling: any letter case, "_" equal to "-", every duplicate. */
  strip: readonly string[];
  /** Cookie names removed from the Cookie header(s) (exact, case-sensitive); no Cookie header when none remain. */
  stripCookies: readonly string[];
  /** What the client connected over, for X-Forwarded-Proto. */
  proto: "http" | "https";
}

/** Defaults as nginx's proxy_read_timeout (60 s); a connection to a reachable upstream takes far less than 5 s. */
export const defaultTimeouts = { connectTimeoutMs: 5_000, responseTimeoutMs: 60_000, idleTimeoutMs: 60_000 } as const;

/**
 * How long an unused pooled connection is kept. Node's agent shortens it further when the upstream
 * announces `Keep-Alive: timeout=N`, so the proxy lets go of a connection before the upstream closes
 * it (a request sent on a connection the upstream is closing fails).
 */
const freeSocketTimeoutMs = 30_000;

export function createUpstream(
  url: string | URL,
  opts: Partial<Omit<Upstream, "url" | "agent">> & { ca?: string } = {},
): Upstream {
  let u: URL;
  try {
    u = new URL(String(url));
  } catch {
    throw new Error(`upstream "${String(url)}" is not a URL`);
  }
  const shown = u.username || u.password ? `${u.protocol}//${u.host}` : u.href;
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(`upstream "${shown}": the scheme must be http or https, not ${u.protocol.slice(0, -1)}`);
  if (u.username || u.password) throw new Error(`upstream "${shown}" must not carry credentials (user:password@)`);
  if (u.search || u.hash || u.href.includes("?") || u.href.includes("#")) throw new Error(`upstream "${shown}" must not have a query or fragment`);
  if (u.pathname !== "/" && u.pathname !== "") throw new Error(`upstream "${shown}" must be an origin (scheme://host:port): requests keep their own path`);
  const timeouts: Record<keyof typeof defaultTimeouts, number> = { ...defaultTimeouts };
  for (const k of ["connectTimeoutMs", "responseTimeoutMs", "idleTimeoutMs"] as const) {
    const v = opts[k];
    if (v === undefined) continue;
    if (!Number.isFinite(v) || v <= 0) throw new Error(`upstream "${shown}": ${k} must be a positive number of milliseconds, not ${String(v)}`);
    timeouts[k] = v;
  }
  if (opts.ca !== undefined && u.protocol !== "https:") throw new Error(`upstream "${shown}": a CA is only used for an https upstream`);
  // No cap on sockets: a request waiting for a pooled socket has no timer running, so a full pool
  // (clients that stopped reading, long polls) would stall every other request silently.
  const agentOptions = { keepAlive: true, maxFreeSockets: 256, scheduling: "lifo" as const, timeout: freeSocketTimeoutMs };
  const agent = u.protocol === "https:" ? new https.Agent({ ...agentOptions, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) }) : new http.Agent(agentOptions);
  return { url: u, agent, ...timeouts };
}

// ---------------------------------------------------------------------------------------------
// Headers

/** Hop-by-hop: never forwarded in either direction (docs/authproxy.md#what-the-upstream-receives). */
const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "trailer"]);

/**
 * Request headers describing the hop or the client that only the proxy may state. `proxy` goes too
 * (CGI-style upstreams read it as HTTP_PROXY), and `expect`: Node's server answers `100-continue`
 * to the client itself (when no 'checkContinue' listener is installed), so the expectation is met
 * on this hop and must not be replayed upstream.
 */
const requestOnly = new Set(["forwarded", "x-real-ip", "x-rewrite-url", "proxy", "expect"]);

/**
 * Connection-listed names that are not removed: the request's framing (dropping Content-Length
 * would let the body run into the next request on a kept-alive upstream connection) and Host,
 * which the proxy passes through as sent.
 */
const keptDespiteConnection = new Set(["host", "content-length"]);

/** Methods for which Node's client sends no framing header at all when there is no body. */
const bodilessByDefault = new Set(["GET", "HEAD", "DELETE", "OPTIONS", "TRACE", "CONNECT"]);

/** Methods whose bodiless requests may be sent again when a reused pooled connection turns out closed. */
const idempotent = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);

/** Like Node's own check (checkInvalidHeaderChar): what an HTTP/1.1 header value may carry. */
const validHeaderValue = /^[\t\x20-\x7e\x80-\xff]*$/;

function normName(name: string): string {
  const lower = name.toLowerCase();
  return lower.includes("_") ? lower.replaceAll("_", "-") : lower;
}

const stripSets = new WeakMap<readonly string[], Set<string>>();
const cookieSets = new WeakMap<readonly string[], Set<string>>();

/** The caller passes the same arrays on every request, so their Sets are built once. */
function stripSetOf(fr: ForwardRequest): Set<string> {
  let set = stripSets.get(fr.strip);
  if (set === undefined) {
    set = new Set(fr.strip.map(normName));
    stripSets.set(fr.strip, set);
  }
  // The proxy's own identity names are removed from the client's headers even if `strip` forgot one.
  let extended: Set<string> | undefined;
  for (const k in fr.identity) {
    const n = normName(k);
    if (!set.has(n)) (extended ??= new Set(set)).add(n);
  }
  return extended ?? set;
}

function cookieSetOf(names: readonly string[]): Set<string> {
  let set = cookieSets.get(names);
  if (set === undefined) {
    set = new Set(names);
    cookieSets.set(names, set);
  }
  return set;
}

/** The Cookie header values joined with "; ", without the named cookies; "" when nothing remains. */
export function stripCookieValues(values: readonly string[], strip: ReadonlySet<string>): string {
  let out = "";
  for (let i = 0; i < values.length; i++) {
    const parts = values[i]!.split(";");
    for (let j = 0; j < parts.length; j++) {
      const pair = parts[j]!.trim();
      if (pair === "") continue;
      const eq = pair.indexOf("=");
      // A pair without "=" is a value with an empty name (as browsers read it), never one of ours.
      if (eq > 0 && strip.has(pair.slice(0, eq).trim())) continue;
      out = out === "" ? pair : `${out}; ${pair}`;
    }
  }
  return out;
}

function addTokens(into: Set<string> | undefined, value: string): Set<string> {
  const set = into ?? new Set<string>();
  const tokens = value.split(",");
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!.trim().toLowerCase();
    if (t !== "") set.add(t);
  }
  return set;
}

/** Names from Connection that are not already dropped; undefined when there are none. */
function extraTokens(tokens: Set<string> | undefined, alsoDropped?: ReadonlySet<string>): Set<string> | undefined {
  if (tokens === undefined) return undefined;
  let extra: Set<string> | undefined;
  for (const t of tokens) {
    if (hopByHop.has(t) || alsoDropped?.has(t)) continue;
    (extra ??= new Set()).add(t);
  }
  return extra;
}

class IdentityHeaderError extends Error {}

interface BuiltRequest {
  headers: string[];
  hasBody: boolean;
}

/** The client's address as the upstream should see it (a v4 client of a dual-stack listener without "::ffff:"). */
function clientAddress(req: http.IncomingMessage): string {
  const a = req.socket.remoteAddress ?? "";
  return a.startsWith("::ffff:") && a.includes(".") ? a.slice(7) : a;
}

/**
 * The upstream request's headers as a flat [name, value, ...] list. The order of the steps is the
 * point: the client's hop-by-hop and Connection-listed headers go, then all identity spellings,
 * and only then does the proxy add its own headers, which no client header can touch.
 */
function buildRequestHeaders(req: http.IncomingMessage, fr: ForwardRequest, upgrade: boolean, fallbackHost: string): BuiltRequest {
  const raw = req.rawHeaders;
  const strip = stripSetOf(fr);
  // Host first, as clients send it; filled in below.
  let out: string[] = ["Host", ""];
  let host: string | undefined;
  let contentLength: string | undefined;
  let chunked = false;
  let cookies: string[] | undefined;
  let connection: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    const lower = name.toLowerCase();
    switch (lower) {
      case "host":
        // Node's req.headers.host (what the caller matched on) is the first one; so is ours.
        host ??= value;
        continue;
      case "content-length":
        contentLength ??= value;
        continue;
      case "transfer-encoding":
        chunked = true;
        continue;
      case "cookie":
        (cookies ??= []).push(value);
        continue;
      case "connection":
        connection = addTokens(connection, value);
        continue;
    }
    if (hopByHop.has(lower) || lower.startsWith("proxy-")) continue;
    // Frameworks that map headers to CGI-style variables read "_" as "-": compare in that form.
    const norm = lower.includes("_") ? lower.replaceAll("_", "-") : lower;
    if (strip.has(norm) || requestOnly.has(norm) || norm.startsWith("x-forwarded-") || norm.startsWith("x-original-")) continue;
    out.push(name, value);
  }
  const extra = extraTokens(connection, keptDespiteConnection);
  if (extra !== undefined) {
    const kept: string[] = [];
    for (let i = 0; i < out.length; i += 2) {
      if (i === 0 || !extra.has(out[i]!.toLowerCase())) kept.push(out[i]!, out[i + 1]!);
    }
    out = kept;
  }
  out[1] = host ?? fallbackHost;

  // Framing: Node has already decoded the client's body; state how the upstream copy is framed.
  // A request with Transfer-Encoding is sent chunked whatever the method, because Node sends an
  // unframed body of a GET as raw bytes that a kept-alive upstream connection would read as the
  // next request. (Node's server refuses Content-Length together with Transfer-Encoding.)
  let hasBody = false;
  if (!upgrade) {
    if (chunked) {
      out.push("Transfer-Encoding", "chunked");
      hasBody = true;
    } else if (contentLength !== undefined) {
      out.push("Content-Length", contentLength);
      hasBody = contentLength !== "0";
    } else if (!bodilessByDefault.has(req.method ?? "")) {
      // No framing header means no body; said explicitly, or Node would announce a chunked one.
      out.push("Content-Length", "0");
    }
  }
  if (cookies !== undefined && !(extra?.has("cookie") ?? false)) {
    const stripCookies = cookieSetOf(fr.stripCookies);
    const value = cookies.length === 1 && stripCookies.size === 0 ? cookies[0]! : stripCookieValues(cookies, stripCookies);
    if (value !== "") out.push("Cookie", value);
  }
  // The identity comes from a verified token, so a value HTTP cannot carry (CR, LF, other control
  // characters, anything above U+00FF) is the caller's bug; the request fails with 500 rather than
  // reaching the upstream with an identity altered or dropped.
  for (const k in fr.identity) {
    const v = fr.identity[k]!;
    if (!validHeaderValue.test(v)) throw new IdentityHeaderError(`identity header ${k} has characters an HTTP header cannot carry`);
    out.push(k, v);
  }
  // The proxy is the trust edge: the client's address replaces any chain the client sent.
  out.push("X-Forwarded-For", clientAddress(req), "X-Forwarded-Proto", fr.proto);
  if (host !== undefined) out.push("X-Forwarded-Host", host);
  if (upgrade) out.push("Connection", "upgrade", "Upgrade", req.headers.upgrade ?? "");
  return { headers: out, hasBody };
}

/** Response headers without hop-by-hop ones and without the names the response's Connection lists. */
function filterResponseHeaders(raw: readonly string[]): string[] {
  let out: string[] = [];
  let connection: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (lower === "connection") {
      connection = addTokens(connection, raw[i + 1]!);
      continue;
    }
    if (hopByHop.has(lower) || lower.startsWith("proxy-")) continue;
    out.push(name, raw[i + 1]!);
  }
  const extra = extraTokens(connection);
  if (extra !== undefined) {
    const kept: string[] = [];
    for (let i = 0; i < out.length; i += 2) if (!extra.has(out[i]!.toLowerCase())) kept.push(out[i]!, out[i + 1]!);
    out = kept;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Exchanges

interface Target {
  request: (options: http.RequestOptions) => http.ClientRequest;
  protocol: string;
  hostname: string;
  port: number;
  host: string;
  origin: string;
}

const targets = new WeakMap<Upstream, Target>();

function targetOf(u: Upstream): Target {
  let t = targets.get(u);
  if (t === undefined) {
    const tls = u.url.protocol === "https:";
    const hostname = u.url.hostname.startsWith("[") ? u.url.hostname.slice(1, -1) : u.url.hostname;
    t = {
      request: tls ? https.request : http.request,
      protocol: u.url.protocol,
      hostname,
      port: u.url.port ? Number(u.url.port) : tls ? 443 : 80,
      host: u.url.host,
      origin: u.url.origin,
    };
    targets.set(u, t);
  }
  return t;
}

const kEx = Symbol("capstan.authproxy.exchange");
const kTimeoutHandled = Symbol("capstan.authproxy.timeoutHandled");

interface Tagged {
  [kEx]?: Exchange;
  [kTimeoutHandled]?: true;
}

function exOf(o: object): Exchange | undefined {
  return (o as Tagged)[kEx];
}

function tag(o: object, ex: Exchange): void {
  (o as Tagged)[kEx] = ex;
}

// Phases of an exchange.
/** Sending the request (headers, body). */
const SENDING = 0;
/** Sent whole; waiting for the response headers. */
const WAITING = 1;
/** Relaying the response body. */
const STREAMING = 2;
/** WebSocket (or other upgraded protocol) bytes flowing both ways. */
const TUNNEL = 3;
/** Over (answered, failed or abandoned): later events are ignored. */
const DONE = 4;

function seconds(ms: number): string {
  return String(ms / 1000);
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[A-Za-z0-9_]{1,64}$/.test(code) ? code : "error";
}

abstract class Exchange {
  phase = SENDING;
  ureq: http.ClientRequest | undefined = undefined;
  usock: net.Socket | undefined = undefined;
  connected = false;
  retried = false;
  readonly options: http.RequestOptions;

  constructor(
    readonly req: http.IncomingMessage,
    readonly upstream: Upstream,
    readonly target: Target,
    headers: string[],
    readonly hasBody: boolean,
    path: string,
  ) {
    this.options = {
      protocol: target.protocol,
      hostname: target.hostname,
      port: target.port,
      method: req.method,
      path,
      headers,
      agent: upstream.agent,
      setHost: false,
    };
  }

  start(): void {
    this.phase = SENDING;
    const ureq = this.target.request(this.options);
    this.ureq = ureq;
    tag(ureq, this);
    ureq.on("socket", onUpstreamRequestSocket);
    ureq.on("error", onUpstreamRequestError);
    ureq.on("finish", onUpstreamRequestFinish);
    ureq.on("response", onUpstreamResponse);
    ureq.on("close", onUpstreamRequestClose);
    this.send(ureq);
  }

  /** Attach the protocol-specific listeners and send the body (or end the request). */
  abstract send(ureq: http.ClientRequest): void;
  abstract onResponse(ures: http.IncomingMessage): void;
  /** Answer the client with an error of the proxy's own (nothing of the upstream's answer sent yet). */
  abstract fail(status: number, text: string): void;
  /** Cut the client off: part of the upstream's answer has been sent already. */
  abstract abortClient(): void;

  phaseTimeout(): number {
    return this.phase === WAITING ? this.upstream.responseTimeoutMs : this.upstream.idleTimeoutMs;
  }

  onSocket(socket: net.Socket): void {
    if (this.phase === DONE) return;
    this.usock = socket;
    tag(socket, this);
    const t = socket as Tagged;
    if (t[kTimeoutHandled] === undefined) {
      t[kTimeoutHandled] = true;
      socket.on("timeout", onUpstreamSocketTimeout);
    }
    if (socket.connecting) {
      this.connected = false;
      socket.setTimeout(this.upstream.connectTimeoutMs);
      socket.once("connect", onUpstreamSocketConnect);
    } else {
      this.connected = true;
      socket.setTimeout(this.phaseTimeout());
    }
  }

  onConnect(socket: net.Socket): void {
    this.connected = true;
    if (this.phase !== DONE) socket.setTimeout(this.phaseTimeout());
  }

  onFinish(): void {
    if (this.phase !== SENDING) return;
    this.phase = WAITING;
    // Time to the response's headers counts from here: a slow upload is not the upstream's delay.
    if (this.connected) this.usock?.setTimeout(this.upstream.responseTimeoutMs);
  }

  onTimeout(socket: net.Socket): void {
    const up = this.upstream;
    if (!this.connected) return this.timeOut(504, `504 Gateway Timeout: upstream did not answer within ${seconds(up.connectTimeoutMs)} s`);
    switch (this.phase) {
      case SENDING:
        if (this.ureq?.writableNeedDrain) return this.timeOut(504, `504 Gateway Timeout: upstream stopped reading the request for ${seconds(up.idleTimeoutMs)} s`);
        return this.timeOut(408, `408 Request Timeout: the request body stalled for ${seconds(up.idleTimeoutMs)} s`);
      case WAITING:
        return this.timeOut(504, `504 Gateway Timeout: upstream did not answer within ${seconds(up.responseTimeoutMs)} s`);
      case STREAMING:
        // Nothing moved for a whole idle period: the upstream stalled, or the client has not read
        // anything for that long (as nginx's send_timeout, a client that does not read does not
        // hold an upstream connection for ever). A client that reads, however slowly, lets the
        // upstream socket move and re-arms this timer.
        this.phase = DONE;
        this.ureq?.destroy();
        return this.abortClient();
      case TUNNEL:
        this.phase = DONE;
        socket.destroy();
        return this.abortClient();
    }
  }

  timeOut(status: number, text: string): void {
    this.phase = DONE;
    this.ureq?.destroy();
    this.fail(status, text);
  }

  onError(err: Error): void {
    if (this.phase === DONE || this.phase === TUNNEL) return;
    if (this.phase === STREAMING) {
      this.phase = DONE;
      return this.abortClient();
    }
    const code = errorCode(err);
    // A pooled connection the upstream closed just as it was reused: send once more on a new one,
    // as long as the request can be replayed (no body, idempotent method).
    if (!this.retried && !this.hasBody && this.ureq?.reusedSocket && (code === "ECONNRESET" || code === "EPIPE") && idempotent.has(this.options.method ?? "")) {
      this.retried = true;
      try {
        this.start();
        return;
      } catch {
        // The same options went through once; should they not now, the answer is the 502 below.
      }
    }
    this.phase = DONE;
    const origin = this.target.origin;
    this.fail(502, this.connected ? `502 Bad Gateway: upstream ${origin} failed (${code})` : `502 Bad Gateway: upstream ${origin} unreachable (${code})`);
  }

  /** The client went away before the exchange was over: the upstream request goes too. */
  abandon(): void {
    if (this.phase === DONE) return;
    this.phase = DONE;
    this.ureq?.destroy();
  }
}

function onUpstreamRequestSocket(this: http.ClientRequest, socket: net.Socket): void {
  const ex = exOf(this);
  if (ex !== undefined && ex.ureq === this) ex.onSocket(socket);
}

function onUpstreamSocketConnect(this: net.Socket): void {
  const ex = exOf(this);
  if (ex !== undefined && ex.usock === this) ex.onConnect(this);
}

function onUpstreamSocketTimeout(this: net.Socket): void {
  // A pooled socket no exchange is using: the agent's own listener closes it.
  const ex = exOf(this);
  if (ex !== undefined && ex.usock === this && ex.phase !== DONE) ex.onTimeout(this);
}

function onUpstreamRequestError(this: http.ClientRequest, err: Error): void {
  const ex = exOf(this);
  if (ex !== undefined && ex.ureq === this) ex.onError(err);
}

function onUpstreamRequestClose(this: http.ClientRequest): void {
  // Closed with neither a response nor an error: Node does that when the upstream answers a plain
  // request with 101, dropping the connection without telling the request.
  const ex = exOf(this);
  if (ex !== undefined && ex.ureq === this && (ex.phase === SENDING || ex.phase === WAITING)) ex.onError(Object.assign(new Error("upstream connection closed"), { code: "closed" }));
}

function onUpstreamRequestFinish(this: http.ClientRequest): void {
  const ex = exOf(this);
  if (ex !== undefined && ex.ureq === this) ex.onFinish();
}

function onUpstreamResponse(this: http.ClientRequest, ures: http.IncomingMessage): void {
  const ex = exOf(this);
  if (ex === undefined || ex.ureq !== this || ex.phase === DONE) {
    ures.resume();
    return;
  }
  ex.phase = STREAMING;
  ex.usock?.setTimeout(ex.upstream.idleTimeoutMs);
  tag(ures, ex);
  ex.onResponse(ures);
}

function destroyThis(this: stream.Duplex): void {
  this.destroy();
}

function destroyArg(s: stream.Duplex): void {
  s.destroy();
}

/** End a socket gracefully (what was written still arrives), then close it even if the peer keeps its half open. */
function endThenDestroy(s: stream.Duplex, lingerMs: number, chunk?: string): void {
  if (s.destroyed) return;
  if (s.writableFinished) {
    s.destroy();
    return;
  }
  s.once("finish", destroyThis);
  if (chunk !== undefined) s.end(chunk);
  else s.end();
  // A peer that stops reading would hold the socket forever otherwise.
  const timer = setTimeout(destroyArg, lingerMs, s);
  timer.unref();
  s.once("close", () => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------------
// Plain requests

class HttpExchange extends Exchange {
  ures: http.IncomingMessage | undefined = undefined;

  constructor(
    req: http.IncomingMessage,
    readonly res: http.ServerResponse,
    upstream: Upstream,
    target: Target,
    built: BuiltRequest,
    path: string,
  ) {
    super(req, upstream, target, built.headers, built.hasBody, path);
  }

  send(ureq: http.ClientRequest): void {
    if (this.hasBody) this.req.pipe(ureq);
    else ureq.end();
  }

  onResponse(ures: http.IncomingMessage): void {
    this.ures = ures;
    const res = this.res;
    try {
      const headers = filterResponseHeaders(ures.rawHeaders);
      const status = ures.statusCode ?? 502;
      const message = ures.statusMessage ?? "";
      // The fast path hands the list to Node as is; headers the caller set already would make
      // Node merge with setHeader, which keeps only the last Set-Cookie, so those append.
      if (res.getHeaderNames().length === 0) res.writeHead(status, message, headers);
      else {
        for (let i = 0; i < headers.length; i += 2) res.appendHeader(headers[i]!, headers[i + 1]!);
        res.writeHead(status, message);
      }
    } catch {
      // Node's parser admitted something its writer refuses (a status message or header value).
      this.phase = DONE;
      this.ureq?.destroy();
      this.fail(502, `502 Bad Gateway: upstream ${this.target.origin} sent a response that cannot be relayed`);
      return;
    }
    ures.on("close", onHttpResponseClose);
    ures.pipe(res);
  }

  fail(status: number, text: string): void {
    sendPlain(this.req, this.res, status, text);
  }

  abortClient(): void {
    this.res.destroy();
  }

  override onError(err: Error): void {
    if (this.phase === DONE && !this.req.complete) {
      // The answer is complete but the upstream stopped taking the body: read the rest into the
      // void so the client's kept-alive connection can carry its next request.
      this.req.unpipe();
      this.req.resume();
      return;
    }
    super.onError(err);
  }
}

function onHttpResponseClose(this: http.IncomingMessage): void {
  const ex = exOf(this);
  if (!(ex instanceof HttpExchange) || ex.ures !== this) return;
  if (this.complete) {
    ex.phase = DONE;
    // The pooled socket may already serve another exchange; only our own mark is removed, so an
    // idle pooled socket does not keep this request's objects alive.
    if (ex.usock !== undefined && exOf(ex.usock) === ex) (ex.usock as Tagged)[kEx] = undefined;
    return;
  }
  // The upstream died mid-body. Ending the client's response would pass a truncated body off as
  // whole (a chunked one gets its terminating chunk), so the client's connection is cut instead.
  if (ex.phase !== DONE) ex.phase = DONE;
  ex.abortClient();
}

function onClientResponseClose(this: http.ServerResponse): void {
  if (this.writableFinished) return;
  exOf(this)?.abandon();
}

function sendPlain(req: http.IncomingMessage, res: http.ServerResponse, status: number, text: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (res.destroyed || res.writableEnded) return;
  const body = `${text}\n`;
  const headers = ["Content-Type", "text/plain; charset=utf-8", "Content-Length", String(Buffer.byteLength(body)), "Cache-Control", "no-store"];
  // An unread request body would otherwise hold the kept-alive connection.
  if (!req.complete) headers.push("Connection", "close");
  try {
    res.writeHead(status, headers);
    res.end(body);
  } catch {
    res.destroy();
  }
}

/**
 * Forward one authorised request to the upstream and relay the answer. Never throws: failures are
 * answered (500 for a caller's bad input, 502/504 for the upstream) or cut the client off when
 * part of the answer has been sent already.
 */
export function forward(req: http.IncomingMessage, res: http.ServerResponse, upstream: Upstream, fr: ForwardRequest): void {
  try {
    if (res.destroyed || req.socket.destroyed) return;
    const target = targetOf(upstream);
    if (fr.path[0] !== "/") throw new Error("the path to forward must start with /");
    const built = buildRequestHeaders(req, fr, false, target.host);
    const ex = new HttpExchange(req, res, upstream, target, built, fr.path);
    tag(res, ex);
    res.on("close", onClientResponseClose);
    ex.start();
  } catch (e) {
    const why = e instanceof IdentityHeaderError ? e.message : "the request cannot be forwarded";
    sendPlain(req, res, 500, `500 Internal Server Error: ${why}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Upgrades (WebSocket)

class UpgradeExchange extends Exchange {
  ures: http.IncomingMessage | undefined = undefined;

  constructor(
    req: http.IncomingMessage,
    readonly client: stream.Duplex,
    readonly head: Buffer,
    upstream: Upstream,
    target: Target,
    built: BuiltRequest,
    path: string,
  ) {
    super(req, upstream, target, built.headers, false, path);
  }

  send(ureq: http.ClientRequest): void {
    ureq.on("upgrade", onUpstreamUpgrade);
    ureq.end();
  }

  onUpgrade(ures: http.IncomingMessage, usock: net.Socket, uhead: Buffer): void {
    const client = this.client;
    if (this.phase === DONE || client.destroyed) {
      this.phase = DONE;
      usock.destroy();
      return;
    }
    this.phase = TUNNEL;
    this.usock = usock;
    tag(usock, this);
    // Node detached the socket from the request and dropped its listeners; the tunnel owns it now.
    usock.on("error", onTunnelError);
    usock.on("close", onTunnelClose);
    usock.setTimeout(this.upstream.idleTimeoutMs);
    client.on("close", onTunnelClose);
    let head = `HTTP/1.1 101 ${ures.statusMessage ?? "Switching Protocols"}\r\n`;
    const headers = filterResponseHeaders(ures.rawHeaders);
    for (let i = 0; i < headers.length; i += 2) head += `${headers[i]!}: ${headers[i + 1]!}\r\n`;
    head += `Connection: Upgrade\r\n`;
    if (ures.headers.upgrade !== undefined) head += `Upgrade: ${ures.headers.upgrade}\r\n`;
    client.write(`${head}\r\n`, "latin1");
    if (uhead.length > 0) client.write(uhead);
    if (this.head.length > 0) usock.write(this.head);
    usock.pipe(client);
    client.pipe(usock);
  }

  onResponse(ures: http.IncomingMessage): void {
    // The upstream refused the upgrade: relay its answer as a plain response and close.
    this.ures = ures;
    let head = `HTTP/1.1 ${ures.statusCode ?? 502} ${ures.statusMessage ?? ""}\r\n`;
    const headers = filterResponseHeaders(ures.rawHeaders);
    for (let i = 0; i < headers.length; i += 2) head += `${headers[i]!}: ${headers[i + 1]!}\r\n`;
    // Without Transfer-Encoding the body ends where the connection does (unless Content-Length says so).
    head += "Connection: close\r\n\r\n";
    this.client.write(head, "latin1");
    ures.on("close", onRefusalClose);
    ures.pipe(this.client, { end: false });
  }

  fail(status: number, text: string): void {
    respondOnSocket(this.client, status, { "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store" }, `${text}\n`);
  }

  abortClient(): void {
    this.client.destroy();
  }
}

function onUpstreamUpgrade(this: http.ClientRequest, ures: http.IncomingMessage, usock: net.Socket, uhead: Buffer): void {
  const ex = exOf(this);
  if (ex instanceof UpgradeExchange && ex.ureq === this) ex.onUpgrade(ures, usock, uhead);
  else usock.destroy();
}

function onRefusalClose(this: http.IncomingMessage): void {
  const ex = exOf(this);
  if (!(ex instanceof UpgradeExchange) || ex.ures !== this) return;
  ex.phase = DONE;
  if (this.complete) endThenDestroy(ex.client, ex.upstream.idleTimeoutMs);
  else ex.abortClient();
}

function onUpgradeClientClose(this: stream.Duplex): void {
  const ex = exOf(this);
  if (ex !== undefined && ex.phase !== TUNNEL) ex.abandon();
}

function onClientSocketError(this: stream.Duplex): void {
  // 'close' follows, which abandons the upstream side.
  this.destroy();
}

function onTunnelError(this: stream.Duplex): void {
  this.destroy();
}

function onTunnelClose(this: stream.Duplex, hadError?: boolean): void {
  const ex = exOf(this);
  if (!(ex instanceof UpgradeExchange)) return;
  const other = this === ex.client ? ex.usock : ex.client;
  ex.phase = DONE;
  if (other === undefined || other.destroyed) return;
  // A clean close lets what is still buffered for the other side arrive; an error cuts both.
  if (hadError === true) other.destroy();
  else endThenDestroy(other, ex.upstream.idleTimeoutMs);
}

/**
 * Forward an upgrade request (a WebSocket handshake) the proxy has authorised. On the upstream's
 * 101 the two sockets are joined; any other answer is relayed and the client's socket closed.
 */
export function forwardUpgrade(req: http.IncomingMessage, socket: stream.Duplex, head: Buffer, upstream: Upstream, fr: ForwardRequest): void {
  socket.on("error", onClientSocketError);
  try {
    if (socket.destroyed) return;
    if (req.headers.upgrade === undefined) {
      respondOnSocket(socket, 400, { "Content-Type": "text/plain; charset=utf-8" }, "400 Bad Request: no Upgrade header\n");
      return;
    }
    const target = targetOf(upstream);
    if (fr.path[0] !== "/") throw new Error("the path to forward must start with /");
    const built = buildRequestHeaders(req, fr, true, target.host);
    const ex = new UpgradeExchange(req, socket, head, upstream, target, built, fr.path);
    tag(socket, ex);
    socket.on("close", onUpgradeClientClose);
    ex.start();
  } catch (e) {
    const why = e instanceof IdentityHeaderError ? e.message : "the request cannot be forwarded";
    respondOnSocket(socket, 500, { "Content-Type": "text/plain; charset=utf-8" }, `500 Internal Server Error: ${why}\n`);
  }
}

function onRawSocketError(this: stream.Duplex): void {
  this.destroy();
}

/** Linger after the answer on a raw socket: enough for a small answer to leave. */
const respondLingerMs = 10_000;

/**
 * Answer on a raw socket (upgrade path) with a status, headers and small body, then end it: the
 * server uses it to refuse an upgrade (401/302/400). Names and values are checked as Node checks
 * them, so a value with CR/LF cannot add a header; a bad one turns the answer into a plain 500.
 */
export function respondOnSocket(socket: stream.Duplex, status: number, headers: Record<string, string | string[]>, body = ""): void {
  socket.on("error", onRawSocketError);
  if (socket.destroyed) return;
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  let head: string;
  try {
    if (!Number.isInteger(status) || status < 100 || status > 999) throw new Error("bad status");
    head = `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? "Unknown"}\r\n`;
    let hasType = false;
    for (const name of Object.keys(headers)) {
      const lower = name.toLowerCase();
      // The framing is this function's: the body's exact length, then the connection closes.
      if (lower === "content-length" || lower === "transfer-encoding" || lower === "connection") continue;
      http.validateHeaderName(name);
      const v = headers[name]!;
      const values = Array.isArray(v) ? v : [v];
      for (const value of values) {
        http.validateHeaderValue(name, value);
        head += `${name}: ${value}\r\n`;
      }
      if (lower === "content-type") hasType = true;
    }
    if (body !== "" && !hasType) head += "Content-Type: text/plain; charset=utf-8\r\n";
  } catch {
    body = "500 Internal Server Error\n";
    head = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n";
  }
  head += `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  socket.write(head, "latin1");
  endThenDestroy(socket, respondLingerMs, body);
}
