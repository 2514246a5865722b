// The gate every API handler passes first: the credential of a request, checked, as a Principal
// (docs/security.md). A token is accepted in the `access-token` header (docs/api-reference.md, "Credentials") or as
// `Authorization: Bearer <token>` (the kubectl and Nomad habit). Handlers call `gate.authenticate(c)`
// before they read their input, so a caller without a credential learns nothing about the rules.
//
// With authentication off (`-auth none`, allowed on loopback listeners only) every caller is the
// anonymous admin; the listener check is the process's (cli/auth-options.ts).
import type { Context } from "hono";
import { createHmac, timingSafeEqual } from "node:crypto";
import { readCookie } from "../http/cookies.ts";
import { forbidden, unauthorized } from "../http/index.ts";
import { remember } from "./audit.ts";
import { anonymousAdmin, type Principal } from "./principal.ts";
import type { TokenVerifier } from "./verifier.ts";

export const tokenHeader = "access-token";
/**
 * The web console's session cookie: a session token the console made at sign-in (docs/web-console.md).
 * Behind HTTPS it is named with the `__Host-` prefix: the browser then keeps it to this host, path
 * "/" and Secure, and no sibling domain can set one.
 */
export const sessionCookie = "capstan_session";
export const secureSessionCookie = "__Host-capstan_session";
/** The only API path a session cookie may authenticate: the exec terminal's WebSocket. */
export const browserSocketPath = "/api/podgroups/exec";

/** Compares two secrets in constant time (for equal lengths); an absent or empty one never matches. */
export function sameSecret(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined || a === "") return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The CSRF token of the session that holds `accessToken` (docs/web-console.md, "Sessions and CSRF"). */
export function csrfTokenFor(accessToken: string): string {
  return createHmac("sha256", accessToken).update("capstan web console csrf v1").digest("base64url");
}

export interface Gate {
  /** The caller; throws 401 (with WWW-Authenticate) for a missing or bad credential. */
  authenticate(c: Context): Promise<Principal>;
  /** "token" or "none" (-auth). */
  readonly mode: "token" | "none";
}

/** The token a request carries, or undefined; `access-token` wins when both are sent. */
export function requestToken(header: (name: string) => string | undefined): string | undefined {
  const direct = header(tokenHeader)?.trim();
  if (direct) return direct;
  const authz = header("authorization")?.trim();
  if (!authz) return undefined;
  const m = /^bearer\s+(\S+)$/i.exec(authz);
  return m ? m[1] : undefined;
}

/**
 * The session cookie's token, for the web console's exec terminal only: a GET upgrade to a
 * WebSocket on the exec path (a browser cannot set headers on a WebSocket), from a page of this
 * same origin (the browser's Origin header), carrying the session's CSRF token in `csrf_token`
 * (so a page that merely opens the terminal's URL runs nothing). Every other request must carry
 * its token in a header: a cookie never authenticates a cross-site form or fetch.
 */
export function browserSocketToken(req: { method: string; path: string; header: (name: string) => string | undefined; query: (name: string) => string | undefined }): string | undefined {
  const { header } = req;
  if (req.method !== "GET" || req.path !== browserSocketPath) return undefined;
  if (header("upgrade")?.toLowerCase() !== "websocket") return undefined;
  const origin = header("origin");
  const host = header("host");
  if (origin === undefined || host === undefined) return undefined;
  try {
    if (new URL(origin).host !== host) return undefined;
  } catch {
    return undefined;
  }
  const cookies = header("cookie");
  const token = readCookie(cookies, secureSessionCookie) ?? readCookie(cookies, sessionCookie);
  return token !== undefined && sameSecret(req.query("csrf_token"), csrfTokenFor(token)) ? token : undefined;
}

export function tokenGate(verifier: TokenVerifier): Gate {
  return {
    mode: "token",
    async authenticate(c) {
      const header = (name: string) => c.req.header(name);
      const token = requestToken(header) ?? browserSocketToken({ method: c.req.method, path: c.req.path, header, query: (name) => c.req.query(name) });
      if (token === undefined) throw unauthorized(`missing access token: send it as "${tokenHeader}: <token>" or "Authorization: Bearer <token>"`);
      const who = await verifier.verify(token);
      remember(c.req.raw, who);
      return who;
    },
  };
}

/**
 * `-auth none`: everyone is the anonymous admin. Only for loopback listeners, and only for requests
 * addressed to a loopback name: a web page a local browser loaded from elsewhere can reach
 * 127.0.0.1 by DNS rebinding, but its requests then carry its own host name (403).
 */
export const openGate: Gate = {
  mode: "none",
  async authenticate(c) {
    const host = c.req.header("host");
    if (host !== undefined && !loopbackHostHeader(host)) {
      throw forbidden(`-auth none answers requests for a loopback address only, not for host ${JSON.stringify(host.slice(0, 100))}`, "a loopback Host header");
    }
    remember(c.req.raw, anonymousAdmin);
    return anonymousAdmin;
  },
};

/** "localhost:9000", "127.0.0.1", "[::1]:9000": a Host header that names this machine's loopback. */
export function loopbackHostHeader(host: string): boolean {
  const name = host.trim().toLowerCase().replace(/:\d+$/, "");
  return name === "localhost" || name === "[::1]" || /^127(\.\d{1,3}){3}$/.test(name);
}
