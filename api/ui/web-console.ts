// The web console at /ui/ (docs/web-console.md): server-rendered pages, htmx for live parts, and
// every read and write done through the platform's HTTP APIs as the signed-in user.
//
//   GET  /ui/login, POST /ui/login       sign in with an access token
//   GET  /ui/login/sso[/callback]        sign in with the OpenID provider (when configured)
//   POST /ui/logout                      end the session
//   GET  /ui/static/*                    htmx, xterm.js, the console's own script and style
//   everything else                      pages (pages/*.ts); POSTs change things
//
// Order on every page request: security headers; the session (no valid token: to the login page);
// for a POST, the same-origin check and the CSRF token; then the page, which calls the APIs.
import { createHash, randomBytes } from "node:crypto";
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { html } from "hono/html";
import { anonymousAdmin, type Principal } from "../auth/index.ts";
import type { TokenVerifier } from "../auth/verifier.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { ApiCaller } from "./api-client.ts";
import { field, uiRequest, type UiEnv } from "./context.ts";
import { errorBox, notice, page, type Viewer } from "./layout.ts";
import { adminPages } from "./pages/admin.ts";
import { clusterPages } from "./pages/cluster.ts";
import { execPages } from "./pages/exec.ts";
import { logPages } from "./pages/logs.ts";
import { podGroupPages } from "./pages/podgroups.ts";
import { registryPages } from "./pages/registry.ts";
import { secretPages } from "./pages/secrets.ts";
import { csrfField, csrfHeader, csrfTokenFor, loginCookie, loginNonce, readCookie, sameSecret, sessionCookieName, setCookie, ssoCookie } from "./session.ts";
import { staticAssets } from "./static.ts";

/** The console's OpenID sign-in, done server side (the console's SSO service). */
export interface SsoLogin {
  start(req: { redirectUri: string; codeChallenge: string }): Promise<{ authorizationUrl: string; state: string }>;
  finish(req: { code: string; state: string; codeVerifier: string; redirectUri: string }): Promise<{ token: string; user: string; role: string; expiresAt?: string }>;
}

/**
 * The tokens behind sessions: a sign-in with a pasted token gets a session token of its own (the
 * pasted one never goes into a cookie), and a sign-out revokes the session's token.
 */
export interface SessionTokens {
  /** A new session token for the caller a pasted token names. */
  open(who: Principal): Promise<{ token: string }>;
  /** Revokes token `tokenId` when the console made it (a session, or a single sign-on login). */
  close(tokenId: string): Promise<void>;
}

export interface WebConsoleOptions {
  /** The process's APIs, called as the user. */
  api: ApiCaller;
  /** Checks the session's access token (the gate's verifier). */
  verifier: Pick<TokenVerifier, "verify">;
  /** Makes and ends session tokens (required with authMode "token"). */
  sessions?: SessionTokens;
  /** "none" (-auth none): no sign-in; every visitor is the anonymous admin, as on the APIs. */
  authMode: "token" | "none";
  /** Served over HTTPS (or behind an HTTPS -public-url): cookies get Secure. */
  secure: boolean;
  /** Where browsers reach the console (-public-url): the SSO callback is built on it, and a change must come from its origin or the request's own. */
  publicUrl?: URL | undefined;
  sso?: SsoLogin | undefined;
  /** The image registry's API, when this process runs one: the Registry pages call it. */
  registry?: ApiCaller;
  log?: Logger;
}

/** The Content-Security-Policy of every answer: scripts and styles from this origin only, no inline script. */
export const contentSecurityPolicy =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export function createWebConsole(opts: WebConsoleOptions): Hono<UiEnv> {
  const log = (opts.log ?? silentLogger).child({ component: "web-console" });
  // Keys the CSRF token when there is no session token to key it on (-auth none): per process,
  // so a page reloaded after a restart gets a fresh one.
  const anonymousKey = randomBytes(32).toString("base64url");
  const app = new Hono<UiEnv>();
  const sessionCookie = sessionCookieName(opts.secure);
  const sessions = opts.sessions;
  if (opts.authMode === "token" && sessions === undefined) throw new Error("the web console needs session tokens when authentication is on");

  // "/ui/*", never "*": this app is mounted on the process's root app beside the APIs.
  app.use("/ui/*", async (c, next) => {
    await next();
    c.header("Content-Security-Policy", contentSecurityPolicy);
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "same-origin");
    c.header("X-Frame-Options", "DENY");
    if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store");
  });
  app.onError((err, c) => {
    log.error({ err, path: c.req.path }, "web console page failed");
    return c.html(page("Something went wrong", undefined, "", errorBox("The page could not be built; the console's log has the cause.")), 500);
  });

  // Form bodies are small: refuse big ones before they are read (a sign-in form is refused larger
  // than 16 KiB, every other form larger than 1 MiB, a secret file's limit).
  const tooLarge = (c: Context) => c.text("request body too large", 413);
  app.post("/ui/login", bodyLimit({ maxSize: 16 << 10, onError: tooLarge }));
  app.use("/ui/*", bodyLimit({ maxSize: (1 << 20) + (64 << 10), onError: tooLarge }));

  app.route("/ui/static", staticAssets());
  app.get("/ui", (c) => c.redirect("/ui/", 302));

  // --- sign in and out -------------------------------------------------------------------------
  const cookie = (name: string, value: string, maxAge?: number, sameSite: "Strict" | "Lax" = "Strict", path = "/") =>
    setCookie(name, value, { secure: opts.secure, sameSite, path, ...(maxAge !== undefined && { maxAge }) });

  const loginPage = (c: Context, message?: string, status: 200 | 400 | 401 | 403 = 200) => {
    const nonce = loginNonce();
    c.header("Set-Cookie", cookie(loginCookie, nonce, 900, "Strict", "/ui/login"), { append: true });
    return c.html(
      page(
        "Sign in",
        undefined,
        "",
        html`${message !== undefined ? errorBox(message) : ""}
<form method="post" action="/ui/login" class="card login">
<input type="hidden" name="${csrfField}" value="${nonce}">
<label>Access token <input type="password" name="token" autocomplete="off" required placeholder="cst_..."></label>
<button type="submit">Sign in</button>
</form>
${opts.sso !== undefined ? html`<p><a class="button" href="/ui/login/sso" data-testid="sso-login">Sign in with single sign-on</a></p>` : ""}
<p class="hint">An admin makes tokens with <code>capstan tokens create</code>; the first admin token is in the data directory (<code>capstan-data/admin-token</code>).</p>`,
      ),
      status,
    );
  };

  app.get("/ui/login", (c) => (opts.authMode === "none" ? c.redirect("/ui/", 302) : loginPage(c)));
  app.post("/ui/login", async (c) => {
    if (!sameOrigin(c, opts.publicUrl)) return c.text("cross-site request refused", 403);
    // The form's own cookie first: a request that never loaded the form is refused unread.
    const nonce = readCookie(c.req.header("cookie"), loginCookie);
    if (nonce === undefined || !(c.req.header("content-type") ?? "").startsWith("application/x-www-form-urlencoded")) return loginPage(c, "The sign-in form expired; try again.", 403);
    const form = await c.req.parseBody();
    if (!sameSecret(field(form, csrfField), nonce)) return loginPage(c, "The sign-in form expired; try again.", 403);
    const pasted = field(form, "token").trim();
    let who: Principal;
    try {
      who = await opts.verifier.verify(pasted);
    } catch {
      return loginPage(c, "That access token is invalid, expired or revoked.", 401);
    }
    if (sessions === undefined) return loginPage(c, "Sign-in is off.", 403);
    const { token } = await sessions.open(who);
    log.info({ tokenId: who.tokenId, user: who.user, role: who.role }, "web console session opened");
    c.header("Set-Cookie", cookie(sessionCookie, token), { append: true });
    c.header("Set-Cookie", cookie(loginCookie, "", 0, "Strict", "/ui/login"), { append: true });
    return c.redirect("/ui/", 303);
  });

  if (opts.sso !== undefined) {
    const sso = opts.sso;
    const callbackOf = (c: Context) =>
      opts.publicUrl !== undefined ? new URL("/ui/login/sso/callback", opts.publicUrl).href : `${opts.secure ? "https" : "http"}://${c.req.header("host") ?? "localhost"}/ui/login/sso/callback`;
    app.get("/ui/login/sso", async (c) => {
      const verifier = randomBytes(32).toString("base64url");
      const challenge = createHash("sha256").update(verifier).digest("base64url");
      let started: { authorizationUrl: string; state: string };
      try {
        started = await sso.start({ redirectUri: callbackOf(c), codeChallenge: challenge });
      } catch (e) {
        log.warn({ err: e }, "single sign-on could not start");
        return loginPage(c, `Single sign-on could not start: ${(e as Error).message}`, 400);
      }
      const flight = Buffer.from(JSON.stringify({ v: verifier, s: started.state })).toString("base64url");
      // Lax, not Strict: the browser comes back to the callback from the provider's site.
      c.header("Set-Cookie", cookie(ssoCookie, flight, 600, "Lax", "/ui/login/sso"), { append: true });
      return c.redirect(started.authorizationUrl, 302);
    });
    app.get("/ui/login/sso/callback", async (c) => {
      const clear = cookie(ssoCookie, "", 0, "Lax", "/ui/login/sso");
      c.header("Set-Cookie", clear, { append: true });
      const error = c.req.query("error");
      // Fixed words only: this URL can be linked from anywhere, so it must not put its own text on our page.
      if (error !== undefined) return loginPage(c, `The identity provider refused the sign-in (${providerErrors[error] ?? "an error"}). Start again.`, 403);
      let flight: { v?: unknown; s?: unknown } = {};
      try {
        flight = JSON.parse(Buffer.from(readCookie(c.req.header("cookie"), ssoCookie) ?? "", "base64url").toString("utf8")) as typeof flight;
      } catch {
        flight = {};
      }
      const state = c.req.query("state") ?? "";
      const code = c.req.query("code") ?? "";
      if (typeof flight.v !== "string" || typeof flight.s !== "string" || !sameSecret(state, flight.s) || code === "") {
        return loginPage(c, "The single sign-on answer does not match a sign-in started here; start again.", 400);
      }
      let done: { token: string };
      try {
        done = await sso.finish({ code, state, codeVerifier: flight.v, redirectUri: callbackOf(c) });
      } catch (e) {
        return loginPage(c, `Single sign-on failed: ${(e as Error).message}`, 403);
      }
      c.header("Set-Cookie", cookie(sessionCookie, done.token), { append: true });
      // A page, not a redirect: this navigation started on the provider's site, so a Strict
      // cookie set here is not sent on a redirect within it; the refresh below is same-site.
      return c.html(html`<!doctype html><html><head><meta http-equiv="refresh" content="0;url=/ui/"><title>Signed in</title></head><body><p>Signed in. <a href="/ui/">Continue</a></p></body></html>`);
    });
  }

  // --- the session ---------------------------------------------------------------------------
  app.use("/ui/*", async (c, next) => {
    const token = opts.authMode === "none" ? undefined : readCookie(c.req.header("cookie"), sessionCookie);
    let who: Principal;
    if (opts.authMode === "none") {
      who = anonymousAdmin;
    } else {
      try {
        if (token === undefined || token === "") throw new Error("no session");
        who = await opts.verifier.verify(token);
      } catch {
        if (c.req.header("hx-request") !== undefined) {
          c.header("HX-Redirect", "/ui/login");
          return c.body(null, 401);
        }
        if (c.req.method !== "GET") return c.text("your session ended; sign in again", 401);
        return c.redirect("/ui/login", 303);
      }
    }
    const csrf = csrfTokenFor(token ?? anonymousKey);
    const viewer: Viewer = { who, csrf, signedIn: opts.authMode !== "none", registry: opts.registry !== undefined };
    if (c.req.method !== "GET" && c.req.method !== "HEAD") {
      if (!sameOrigin(c, opts.publicUrl)) return c.text("cross-site request refused", 403);
      let sent = c.req.header(csrfHeader);
      if (sent === undefined && (c.req.header("content-type") ?? "").match(/^(application\/x-www-form-urlencoded|multipart\/form-data)/)) {
        sent = field(await c.req.parseBody(), csrfField);
      }
      if (!sameSecret(sent, csrf)) return c.html(page("Refused", viewer, "", errorBox("This request carries no valid CSRF token; reload the page and try again.")), 403);
    }
    c.set("ui", uiRequest(opts.api, viewer, token, c.req.header("host")));
    await next();
  });

  app.post("/ui/logout", async (c) => {
    const { who } = c.get("ui").viewer;
    if (sessions !== undefined && who.tokenId !== "-") await sessions.close(who.tokenId);
    c.header("Set-Cookie", cookie(sessionCookie, "", 0), { append: true });
    return c.redirect(opts.authMode === "none" ? "/ui/" : "/ui/login", 303);
  });

  app.route("/", podGroupPages());
  app.route("/", logPages());
  app.route("/", execPages());
  app.route("/", clusterPages());
  app.route("/", adminPages());
  app.route("/", secretPages());
  if (opts.registry !== undefined) app.route("/", registryPages(opts.registry));
  app.all("/ui/*", (c) => c.html(page("Not found", undefined, "", html`${notice("No such page.")}<p><a href="/ui/">Overview</a></p>`), 404));
  return app;
}

/** The OAuth error codes a provider sends back (RFC 6749, 4.1.2.1; OpenID Connect 3.1.2.6), in words. */
const providerErrors: Record<string, string> = {
  access_denied: "access denied",
  login_required: "login required",
  consent_required: "consent required",
  interaction_required: "interaction required",
  invalid_request: "invalid request",
  unauthorized_client: "this console is not allowed to sign in there",
  invalid_scope: "invalid scope",
  server_error: "the provider failed",
  temporarily_unavailable: "the provider is unavailable",
};

/**
 * A state-changing request must come from one of our own pages: when the browser names the
 * request's origin (Origin, or Sec-Fetch-Site), it must be this host. SameSite=Strict and the CSRF
 * token already refuse others; this check refuses them before the body is read.
 */
function sameOrigin(c: Context, publicUrl: URL | undefined): boolean {
  const site = c.req.header("sec-fetch-site");
  if (site !== undefined && site !== "same-origin" && site !== "none") return false;
  const origin = c.req.header("origin");
  if (origin === undefined || origin === "null") return origin === undefined;
  try {
    const from = new URL(origin);
    return from.host === c.req.header("host") || (publicUrl !== undefined && from.origin === publicUrl.origin);
  } catch {
    return false;
  }
}
