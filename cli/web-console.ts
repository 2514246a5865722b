// The web console's place in a server process (docs/web-console.md): mounted at /ui/ on the
// process's own listener, beside the APIs it calls in memory as the signed-in user. `capstan up`
// and `capstan console` install it; a page whose API the process does not serve says so.
import type { Hono } from "hono";
import { inProcessApi } from "../api/ui/api-client.ts";
import { createWebConsole, type SsoLogin } from "../api/ui/web-console.ts";
import type { ServeContext } from "./serve.ts";

export interface WebConsoleSettings {
  /** The process serves HTTPS (-tls-cert): session cookies get Secure. */
  secure: boolean;
  /** The console's single sign-on, when -oidc-issuer is set. */
  sso?: SsoLogin | undefined;
  /** The image registry's API in this process (`capstan up`), for the Registry pages. */
  registry?: Pick<Hono, "request"> | undefined;
}

export function installWebConsole(ctx: ServeContext, settings: WebConsoleSettings): void {
  const { manager } = ctx;
  manager.app.route(
    "/",
    createWebConsole({
      api: inProcessApi(manager.app),
      verifier: ctx.verifier,
      authMode: ctx.access.gate.mode,
      secure: settings.secure,
      sso: settings.sso,
      ...(settings.registry !== undefined && { registry: inProcessApi(settings.registry) }),
      log: ctx.log,
    }),
  );
}
