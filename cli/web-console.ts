// The web console's place in a server process (docs/web-console.md): mounted at /ui/ on the
// process's own listener, beside the APIs it calls in memory as the signed-in user. `capstan up`
// and `capstan console` install it; a page whose API the process does not serve says so.
import type { Hono } from "hono";
import { issueToken, revokeIssuedToken } from "../api/console/issued-tokens.ts";
import { ssoTokenOrigin } from "../api/console/sso.ts";
import { inProcessApi } from "../api/ui/api-client.ts";
import { createWebConsole, type SessionTokens, type SsoLogin } from "../api/ui/web-console.ts";
import { isLoopbackHost } from "../runtime/loopback.ts";
import { httpUrlOption, UsageError, type OptionDef } from "./options.ts";
import type { ServeContext } from "./serve.ts";

export const webConsoleOptionDefs: OptionDef[] = [
  {
    name: "public-url",
    type: "string",
    help: "the web console's address as browsers reach it (https://console.example.com), behind a proxy: the single sign-on callback and Secure cookies follow it (default: the request's own host)",
  },
];

/** -public-url as a URL, or undefined; a usage error names what is wrong with it. */
export function publicUrlOf(options: Record<string, unknown>): URL | undefined {
  const raw = typeof options["public-url"] === "string" ? options["public-url"].trim() : "";
  if (raw === "") return undefined;
  const u = httpUrlOption("public-url", raw);
  if (u.username || u.password || u.search || u.hash || (u.pathname !== "/" && u.pathname !== "")) {
    throw new UsageError(`-public-url: "${raw}" must be a scheme and host only (the console is served at /ui/ of it)`);
  }
  if (u.protocol === "http:" && !isLoopbackHost(u.hostname)) throw new UsageError(`-public-url: "${raw}" is plain http to another machine: sessions would cross the network in clear; use https://`);
  return u;
}

export interface WebConsoleSettings {
  /** The process serves HTTPS (-tls-cert): session cookies get Secure. */
  secure: boolean;
  /** The console's single sign-on, when -oidc-issuer is set. */
  sso?: SsoLogin | undefined;
  /** The image registry's API in this process (`capstan up`), for the Registry pages. */
  registry?: Pick<Hono, "request"> | undefined;
  /** -public-url. */
  publicUrl?: URL | undefined;
}

/** How long a session made by signing in with a pasted token lasts (docs/web-console.md). */
export const webSessionTtlMs = 12 * 3600_000;
/** The `origin` of a session token's record. */
export const webSessionOrigin = "web-session";

export function installWebConsole(ctx: ServeContext, settings: WebConsoleSettings): void {
  const { manager, store } = ctx;
  const sessions: SessionTokens = {
    open: (who) => issueToken(store, { user: who.user, role: who.role, apps: [...who.apps], ttlMs: webSessionTtlMs, origin: webSessionOrigin, nowMs: Date.now() }),
    async close(tokenId) {
      if (await revokeIssuedToken(store, tokenId, [webSessionOrigin, ssoTokenOrigin])) ctx.verifier.forget();
    },
  };
  manager.app.route(
    "/",
    createWebConsole({
      api: inProcessApi(manager.app),
      verifier: ctx.verifier,
      sessions,
      authMode: ctx.access.gate.mode,
      secure: settings.secure || settings.publicUrl?.protocol === "https:",
      publicUrl: settings.publicUrl,
      sso: settings.sso,
      ...(settings.registry !== undefined && { registry: inProcessApi(settings.registry) }),
      log: ctx.log,
    }),
  );
}
