// The auth proxy's request path (docs/authproxy.md): normalise the request target as nginx does,
// pick the location, check the session when the location is protected, then forward, or send the
// browser to log in. Its own endpoints live under /_sso/: the callback (the default redirect_uri),
// logout, the checks nginx's auth_request calls, and probes. Plain node:http rather than Hono:
// a reverse proxy must stream both ways and take WebSocket upgrades, which a fetch-style
// framework buffers or cannot do.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Identity, OidcClient, VerifyResult } from "../../adapters/identity/oidc.ts";
import type { Logger } from "../../runtime/log.ts";
import { ssoPrefix, type AuthProxyConfig, type ProxyLocation } from "./config.ts";
import { CsrfSigner } from "./csrf.ts";
import { forward, forwardUpgrade, respondOnSocket, stripCookieValues, type ForwardRequest, type Upstream } from "./forward.ts";
import { LocationTable, normalizeRequestTarget } from "./locations.ts";
import { quoteReturnPath, safeReturnPath } from "./return-path.ts";

/** The spec's names. */
export const sessionCookie = "sso";
export const userHeader = "REMOTE-USER";
export const groupsHeader = "USER-GROUPS";
const identityHeaders = [userHeader, groupsHeader] as const;

/** The nginx fragment's auth_request endpoints: `/_sso/auth/<auth types joined by "+">[/groups]`. */
export const authCheckPrefix = `${ssoPrefix}auth/`;
export const logoutPath = `${ssoPrefix}logout`;

/** A csrf value is reused for a new login only with this much of its life left to complete it. */
const csrfReuseMarginMs = 5 * 60_000;

/** Browsers refuse cookies much over 4 KiB; a bigger ID token would loop through the login. */
export const maxCookieBytes = 4000;

export interface AuthProxyDeps {
  config: AuthProxyConfig;
  /** The provider, once its discovery document has been read; undefined until then. */
  oidc: () => OidcClient | undefined;
  upstream: Upstream;
  csrf: CsrfSigner;
  /** This listener serves HTTPS. */
  tls: boolean;
  /** Take the scheme and host from X-Forwarded-Proto/-Host: only behind a proxy that sets them (nginx). */
  trustForwarded: boolean;
  log: Logger;
}

interface Requirement {
  authTypes: readonly string[];
  groups: boolean;
}

type SessionCheck = { ok: true; identity: Identity } | { ok: false; reason: string; hadCookie: boolean } | { ok: "unavailable" };

export interface AuthProxyHandler {
  request(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export function createAuthProxy(deps: AuthProxyDeps): AuthProxyHandler {
  const { config, csrf, log } = deps;
  const table = new LocationTable(config.locations.map((l) => l.match));
  const csrfName = config.client.csrfCookieName;
  const callbackPath = config.client.redirectUri ? new URL(config.client.redirectUri).pathname : ssoPrefix;
  const stripCookies = [sessionCookie, csrfName];
  const stripCookieSet = new Set(stripCookies);

  const proto = (req: IncomingMessage): "http" | "https" => {
    if (deps.tls) return "https";
    if (deps.trustForwarded && firstValue(req.headers["x-forwarded-proto"]) === "https") return "https";
    return "http";
  };
  const secureCookies = (req: IncomingMessage) => proto(req) === "https" || (config.client.redirectUri?.startsWith("https:") ?? false);
  const redirectUri = (req: IncomingMessage): string => {
    if (config.client.redirectUri) return config.client.redirectUri;
    const host = (deps.trustForwarded ? firstValue(req.headers["x-forwarded-host"]) : undefined) ?? req.headers.host ?? "localhost";
    return `${proto(req)}://${host}${ssoPrefix}`;
  };
  const cookieAttrs = (req: IncomingMessage) => `Path=/; HttpOnly${secureCookies(req) ? "; Secure; SameSite=Lax" : ""}`;

  /** The session check of docs/authproxy.md ("The login"), in its order: cookie, signature and expiry (and iss, aud), scopes, groups. */
  const checkSession = (req: IncomingMessage, need: Requirement): SessionCheck | Promise<SessionCheck> => {
    const tokens = cookieValues(req.headers.cookie, sessionCookie).slice(0, 3);
    if (tokens.length === 0) return { ok: false, reason: "no session cookie", hadCookie: false };
    const oidc = deps.oidc();
    if (oidc === undefined) return { ok: "unavailable" };
    const judge = (v: VerifyResult): SessionCheck => {
      if (!v.ok) return { ok: false, reason: v.reason, hadCookie: true };
      const missing = unmet(v.identity, need);
      return missing === undefined ? { ok: true, identity: v.identity } : { ok: false, reason: missing, hadCookie: true };
    };
    // Several sso cookies (a stale one on a parent domain, say): the first that passes wins.
    // Tokens verified before are judged at once; the first that needs a signature check makes
    // the rest wait for it.
    const from = (i: number, last: SessionCheck): SessionCheck | Promise<SessionCheck> => {
      for (; i < tokens.length; i++) {
        const cached = oidc.cachedIdToken(tokens[i]!);
        if (cached === undefined) {
          const next = i + 1;
          return oidc.verifyIdToken(tokens[i]!).then((v) => {
            const r = judge(v);
            return r.ok === true ? r : from(next, r);
          });
        }
        last = judge(cached);
        if (last.ok === true) return last;
      }
      return last;
    };
    return from(0, { ok: false, reason: "no session cookie", hadCookie: true });
  };

  /** The spec's 302 to the authorization endpoint (or 401 for an API client), as status + headers. */
  const loginAnswer = (req: IncomingMessage, need: Requirement, returnTo: string, hadCookie: boolean): { status: number; headers: Record<string, string | string[]>; body: string } => {
    const oidc = deps.oidc();
    if (oidc === undefined) return unavailable();
    if (wantsJson(req)) {
      const headers: Record<string, string | string[]> = { "content-type": "application/json", "cache-control": "no-store" };
      if (hadCookie) headers["set-cookie"] = [clearCookie(sessionCookie, req)];
      return { status: 401, headers, body: JSON.stringify({ error: "login required", login: returnTo }) + "\n" };
    }
    const reused = cookieValues(req.headers.cookie, csrfName).find((v) => csrf.check(v, csrfReuseMarginMs).ok);
    const value = reused ?? csrf.issue();
    const { challenge } = csrf.pkce(value);
    const params = new URLSearchParams({ response_type: "code", redirect_uri: redirectUri(req) });
    if (config.realm !== undefined) params.set("realm", config.realm);
    params.set("client_id", config.client.id);
    params.set("scope", ["openid", ...need.authTypes].join(" "));
    params.set("state", `${value}:${quoteReturnPath(returnTo)}`);
    params.set("nonce", csrf.nonce(value));
    params.set("code_challenge", challenge);
    params.set("code_challenge_method", "S256");
    const auth = oidc.endpoints.authorization;
    const cookies = [`${csrfName}=${value}; ${cookieAttrs(req)}`];
    if (hadCookie) cookies.push(clearCookie(sessionCookie, req));
    return {
      status: 302,
      headers: { location: `${auth}${auth.includes("?") ? "&" : "?"}${params}`, "set-cookie": cookies, "cache-control": "no-store" },
      body: "",
    };
  };
  const clearCookie = (name: string, req: IncomingMessage) => `${name}=; ${cookieAttrs(req)}; Max-Age=0`;

  const forwardRequest = (req: IncomingMessage, path: string, identity: Identity | undefined, location: ProxyLocation | undefined): ForwardRequest => {
    const headers: Record<string, string> = {};
    if (identity !== undefined) {
      headers[userHeader] = identity.email;
      if (location?.groups) headers[groupsHeader] = groupsValue(identity);
    }
    return { path, identity: headers, strip: identityHeaders, stripCookies, proto: proto(req) };
  };

  /**
   * Decide for one request: forward it, or answer. Synchronous when no signature must be checked
   * (an unprotected location, a session verified before), so that the common request is forwarded
   * in the tick it arrived in.
   */
  const route = (req: IncomingMessage, upgrade: boolean): Routed | Promise<Routed> => {
    const target = normalizeRequestTarget(req.url ?? "");
    if (!target.ok) return { answer: text(400, `400 Bad Request: ${target.error}\n`) };
    // WebSocket only: after a 101 the tunnel is a byte pipe no header rule applies to.
    if (upgrade && req.headers.upgrade?.toLowerCase() !== "websocket") return { answer: text(400, "400 Bad Request: only WebSocket upgrades are proxied\n") };
    const pathAndQuery = target.query ? `${target.forwardPath}?${target.query}` : target.forwardPath;
    if (target.path === callbackPath || target.path.startsWith(ssoPrefix)) {
      if (upgrade) return { answer: text(404, "404 Not Found\n") };
      return ownEndpoint(req, target.path, target.query).then((answer) => ({ answer }));
    }
    const index = table.match(target.path);
    const location = index === undefined ? undefined : config.locations[index];
    if (location === undefined || location.authTypes.length === 0) return { forward: forwardRequest(req, pathAndQuery, undefined, location) };
    const session = checkSession(req, location);
    if (session instanceof Promise) return session.then((s) => afterSession(req, upgrade, s, location, target.path, pathAndQuery));
    return afterSession(req, upgrade, session, location, target.path, pathAndQuery);
  };

  const afterSession = (req: IncomingMessage, upgrade: boolean, session: SessionCheck, location: ProxyLocation, path: string, pathAndQuery: string): Routed => {
    if (session.ok === true) return { forward: forwardRequest(req, pathAndQuery, session.identity, location) };
    if (session.ok === "unavailable") return { answer: unavailable() };
    log.debug({ path, reason: session.reason }, "login required");
    if (upgrade) {
      const refused = wantsJson(req) ? loginAnswer(req, location, pathAndQuery, session.hadCookie) : text(401, "401 Unauthorized: log in first\n");
      if (session.hadCookie && !wantsJson(req)) refused.headers["set-cookie"] = [clearCookie(sessionCookie, req)];
      return { answer: refused };
    }
    return { answer: loginAnswer(req, location, pathAndQuery, session.hadCookie) };
  };

  const ownEndpoint = async (req: IncomingMessage, path: string, query: string): Promise<Answer> => {
    if (path === callbackPath) return callback(req, new URLSearchParams(query));
    if (path === logoutPath) {
      // A page rather than a redirect to "/" by default: "/" is often protected, and the
      // provider's own session would log the user straight back in.
      const rd = new URLSearchParams(query).get("rd");
      if (rd === null) return page(200, "Logged out", "You are logged out of this application.", "/", [clearCookie(sessionCookie, req)]);
      return redirect(safeReturnPath(encodeURIComponent(rd)), [clearCookie(sessionCookie, req)]);
    }
    if (path === `${ssoPrefix}healthz`) return text(200, "ok\n");
    if (path === `${ssoPrefix}readyz`) return deps.oidc() ? text(200, "ok\n") : text(503, "503 Service Unavailable: the provider's discovery document has not been read yet\n");
    if (path.startsWith(authCheckPrefix)) return authCheck(req, path.slice(authCheckPrefix.length));
    return text(404, "404 Not Found\n");
  };

  /** nginx's auth_request: 200 with the identity, or 401 with where to send the browser. */
  const authCheck = async (req: IncomingMessage, spec: string): Promise<Answer> => {
    const [words = "", flag, ...rest] = spec.split("/");
    const need: Requirement = { authTypes: words.split("+").filter((w) => w !== ""), groups: flag === "groups" };
    if (need.authTypes.length === 0 || rest.length > 0 || (flag !== undefined && flag !== "groups")) return text(404, "404 Not Found\n");
    const original = normalizeRequestTarget(firstValue(req.headers["x-original-uri"]) ?? "/");
    const returnTo = original.ok ? (original.query ? `${original.forwardPath}?${original.query}` : original.forwardPath) : "/";
    const session = await checkSession(req, need);
    if (session.ok === "unavailable") return unavailable();
    if (session.ok === true) {
      const headers: Record<string, string> = { "x-auth-request-email": session.identity.email, "cache-control": "no-store" };
      if (need.groups) headers["x-auth-request-groups"] = groupsValue(session.identity);
      const kept = stripCookieValues(req.headers.cookie ? [req.headers.cookie] : [], stripCookieSet);
      if (kept) headers["x-auth-request-cookie"] = kept;
      return { status: 200, headers, body: "" };
    }
    const login = loginAnswer(req, need, returnTo, false);
    if (login.status !== 302) return login;
    const headers = login.headers as { location: string; "set-cookie": string[] };
    return { status: 401, headers: { "x-sso-location": headers.location, "x-sso-set-cookie": headers["set-cookie"][0]!, "cache-control": "no-store" }, body: "" };
  };

  /** The spec's callback: csrf against state, the code exchange, the sso cookie, back to where the user was. */
  const callback = async (req: IncomingMessage, q: URLSearchParams): Promise<Answer> => {
    // Its URL may carry a code and state too: no Referer with them, as on the callback's pages.
    // GET only: a HEAD (a link checker, a prefetch) would spend the login's csrf value and code.
    if (req.method !== "GET") return text(405, "405 Method Not Allowed\n", { allow: "GET", "referrer-policy": "no-referrer" });
    const state = q.get("state") ?? "";
    const colon = state.indexOf(":");
    const value = colon < 0 ? state : state.slice(0, colon);
    const returnTo = colon < 0 ? "/" : safeReturnPath(state.slice(colon + 1));
    const cookies = cookieValues(req.headers.cookie, csrfName);
    if (cookies.length === 0) return page(403, "Login refused", "The login cookie is missing: cookies may be blocked, or the login started elsewhere. Start again.", returnTo);
    if (value === "" || !cookies.some((c) => CsrfSigner.same(c, value))) return page(403, "Login refused", "The login's state does not match this browser's login cookie. Start again.", returnTo);
    const check = csrf.check(value);
    if (!check.ok) {
      // The second tab of two parallel logins: the first one already logged this browser in.
      if (check.reason === "used" && (await hasSession(req))) return redirect(returnTo, []);
      return page(403, "Login refused", `This login's state is ${check.reason === "used" ? "already used" : check.reason === "expired" ? "too old" : "not one this proxy issued"}. Start again.`, returnTo);
    }
    // Before the value is spent: with the provider unknown, the login can be retried as it is.
    const oidc = deps.oidc();
    if (oidc === undefined) return unavailable();
    csrf.consume(value);
    const cleared = clearCookie(csrfName, req);
    const error = q.get("error");
    if (error !== null) {
      log.info({ error: error.slice(0, 100) }, "the provider refused the login");
      return page(403, "Login refused by the provider", `The identity provider answered: ${error.slice(0, 100)}.`, returnTo, [cleared]);
    }
    const code = q.get("code");
    if (!code) return page(400, "Login failed", "The provider's answer carries no code.", returnTo, [cleared]);
    const exchanged = await oidc.exchangeCode(code, redirectUri(req), csrf.pkce(value).verifier);
    if (!exchanged.ok) {
      log.warn({ reason: exchanged.reason }, "login failed at the token endpoint");
      return page(exchanged.status, "Login failed", `The login could not be completed: ${exchanged.reason}.`, returnTo, [cleared]);
    }
    const verified = await oidc.verifyIdToken(exchanged.idToken);
    if (!verified.ok) {
      log.warn({ reason: verified.reason }, "the provider's ID token did not verify");
      return page(502, "Login failed", `The provider's ID token did not verify (${verified.reason}).`, returnTo, [cleared]);
    }
    if (verified.identity.nonce === undefined || !CsrfSigner.same(verified.identity.nonce, csrf.nonce(value))) {
      return page(403, "Login refused", "The ID token was not issued for this login (nonce).", returnTo, [cleared]);
    }
    const tokenBytes = Buffer.byteLength(exchanged.idToken);
    if (tokenBytes > maxCookieBytes) {
      return page(500, "Login failed", `The provider's ID token is ${tokenBytes} bytes, more than a browser keeps in a cookie (${maxCookieBytes}); ask for fewer claims (groups) in it.`, returnTo, [cleared]);
    }
    const maxAge = Math.max(0, Math.floor(verified.identity.exp - Date.now() / 1000));
    const session = `${sessionCookie}=${exchanged.idToken}; ${cookieAttrs(req)}; Max-Age=${maxAge}`;
    log.info({ user: verified.identity.email }, "logged in");
    // Where the user is going needs more than this login gives (a scope the provider does not
    // grant, no groups claim): sending them back would loop through the provider for ever.
    const target = normalizeRequestTarget(returnTo);
    const index = target.ok ? table.match(target.path) : undefined;
    const location = index === undefined ? undefined : config.locations[index];
    const missing = location && location.authTypes.length > 0 ? unmet(verified.identity, location) : undefined;
    if (missing !== undefined) {
      return page(403, "Not allowed", `You are logged in as ${verified.identity.email}, but this page needs more than the provider granted: ${missing}.`, undefined, [session, cleared]);
    }
    return redirect(returnTo, [session, cleared]);
  };

  const hasSession = async (req: IncomingMessage): Promise<boolean> => {
    const oidc = deps.oidc();
    for (const token of cookieValues(req.headers.cookie, sessionCookie).slice(0, 3)) if (oidc && (await oidc.verifyIdToken(token)).ok) return true;
    return false;
  };

  const failed = (what: string) => (e: unknown) => log.error({ err: e }, `auth proxy ${what} failed`);
  return {
    request(req, res) {
      const apply = (r: Routed) => {
        if ("forward" in r) forward(req, res, deps.upstream, r.forward);
        else send(res, r.answer);
      };
      const fail = (e: unknown) => {
        failed("request")(e);
        if (!res.headersSent) send(res, text(500, "500 Internal Server Error\n"));
        else res.destroy();
      };
      try {
        const r = route(req, false);
        if (r instanceof Promise) r.then(apply).catch(fail);
        else apply(r);
      } catch (e) {
        fail(e);
      }
    },
    upgrade(req, socket, head) {
      socket.on("error", () => {});
      const apply = (r: Routed) => {
        if ("forward" in r) forwardUpgrade(req, socket, head, deps.upstream, r.forward);
        else respondOnSocket(socket, r.answer.status, r.answer.headers, r.answer.body);
      };
      const fail = (e: unknown) => {
        failed("upgrade")(e);
        socket.destroy();
      };
      try {
        const r = route(req, true);
        if (r instanceof Promise) r.then(apply).catch(fail);
        else apply(r);
      } catch (e) {
        fail(e);
      }
    },
  };
}

type Routed = { forward: ForwardRequest } | { answer: Answer };

interface Answer {
  status: number;
  headers: Record<string, string | string[]>;
  body: string;
}

function send(res: ServerResponse, a: Answer): void {
  const headers: Record<string, string | string[] | number> = { ...a.headers, "content-length": Buffer.byteLength(a.body) };
  // A body the proxy did not read (a 302 to a POST): close rather than keep a connection whose
  // client may trickle that body for ever.
  if (!res.req.complete) headers.connection = "close";
  res.writeHead(a.status, headers);
  res.end(a.body);
}

function text(status: number, body: string, headers: Record<string, string> = {}): Answer {
  return { status, headers: { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store", ...headers }, body };
}

function unavailable(): Answer {
  return text(503, "503 Service Unavailable: the identity provider has not been reached yet; try again shortly\n", { "retry-after": "5" });
}

function redirect(location: string, cookies: string[]): Answer {
  return { status: 302, headers: { location, "set-cookie": cookies, "cache-control": "no-store", "referrer-policy": "no-referrer" }, body: "" };
}

/** A small HTML page for the login's dead ends; never a redirect, so a failure cannot loop. */
function page(status: number, title: string, message: string, again: string | undefined, cookies: string[] = []): Answer {
  const link = again === undefined ? "" : `<p><a href="${escapeHtml(again)}">${status === 200 ? "Log in again" : "Start again"}</a></p>`;
  const body = `<!doctype html><meta charset="utf-8"><title>${escapeHtml(title)}</title><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>${link}\n`;
  return {
    status,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
      "content-security-policy": "default-src 'none'",
      ...(cookies.length > 0 ? { "set-cookie": cookies } : {}),
    },
    body,
  };
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** What a verified identity lacks for `need`, or undefined. */
function unmet(identity: Identity, need: Requirement): string | undefined {
  const missing = need.authTypes.filter((s) => !identity.scopes.has(s));
  if (missing.length > 0) return `scope ${missing.join(" ")}`;
  if (need.groups && identity.groups === undefined) return "a groups claim";
  return undefined;
}

/** Group names a header can carry: printable ASCII without a comma (the list's separator). */
const headerSafeGroup = /^[\x20-\x2b\x2d-\x7e]+$/;

function groupsValue(identity: Identity): string {
  return (identity.groups ?? []).filter((g) => headerSafeGroup.test(g)).join(",");
}

function wantsJson(req: IncomingMessage): boolean {
  const accept = req.headers.accept ?? "";
  return accept.includes("application/json") && !accept.includes("text/html");
}

function firstValue(v: string | string[] | undefined): string | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  return s?.split(",")[0]?.trim() || undefined;
}

/** Every value of cookie `name` in a Cookie header, in order (duplicates kept). */
export function cookieValues(header: string | undefined, name: string): string[] {
  if (!header) return [];
  const out: string[] = [];
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) out.push(part.slice(eq + 1).trim());
  }
  return out;
}


