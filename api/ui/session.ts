// The web console's browser session (docs/web-console.md, "Sessions and CSRF").
//
// The session cookie holds the caller's console access token: the console keeps no session state
// of its own, every replica accepts the cookie, and revoking the token (`capstan tokens`, the
// Tokens page) ends the session everywhere. The cookie is HttpOnly (no script reads it),
// SameSite=Strict (no other site's page sends it) and Secure behind HTTPS.
//
// Every mutating request also carries a CSRF token: HMAC-SHA256 of a fixed label keyed by the
// session's access token. It is stateless (any replica checks it), differs per session, and a
// page of another origin cannot compute it without the token, which it cannot read.
import { randomBytes } from "node:crypto";
import { csrfTokenFor, sameSecret, secureSessionCookie, sessionCookie } from "../auth/gate.ts";

export { readCookie } from "../http/cookies.ts";
export { csrfTokenFor, sameSecret, secureSessionCookie, sessionCookie };

/** The session cookie's name: `__Host-` prefixed behind HTTPS. */
export const sessionCookieName = (secure: boolean) => (secure ? secureSessionCookie : sessionCookie);

/** Double-submit cookie of the login forms (before a session exists there is no token to key on). */
export const loginCookie = "capstan_login";
/** The SSO login in flight: PKCE verifier and state, for the callback (SameSite=Lax: it comes back from the provider). */
export const ssoCookie = "capstan_sso";
export const csrfHeader = "x-csrf-token";
export const csrfField = "_csrf";


/** A fresh random value for the login form's double-submit cookie. */
export function loginNonce(): string {
  return randomBytes(18).toString("base64url");
}

export interface CookieOptions {
  secure: boolean;
  sameSite: "Strict" | "Lax";
  /** Seconds; 0 clears the cookie; undefined makes a browser-session cookie. */
  maxAge?: number;
  path?: string;
}

/** A Set-Cookie value. Values are base64url or token characters only; anything else is refused. */
export function setCookie(name: string, value: string, o: CookieOptions): string {
  if (!/^[A-Za-z0-9_.~-]*$/.test(value)) throw new Error(`cookie ${name}: value has characters outside the token set`);
  const parts = [`${name}=${value}`, `Path=${o.path ?? "/"}`, "HttpOnly", `SameSite=${o.sameSite}`];
  if (o.secure) parts.push("Secure");
  if (o.maxAge !== undefined) parts.push(`Max-Age=${o.maxAge}`);
  return parts.join("; ");
}
