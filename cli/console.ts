// The console's assembly: its API (apps, maintainers, tokens, role checks) put on a process's
// manager, after making sure an admin can log in (the first admin token). `capstan console` and
// `capstan up` both install it through here.
import { existsSync } from "node:fs";
import { AdminTokenError, createConsoleApi, createSsoLogin, ensureAdminToken, ensureSsoStateKey, type SsoLogin } from "../api/console/index.ts";
import { UsageError, type OptionDef } from "./options.ts";
import { installRegistryToken, registryTokenOptionDefs, registryTokenSettings, type RegistryTokenSettings } from "./registry-token-options.ts";
import type { ServeContext } from "./serve.ts";
import { ssoOptionDefs, ssoSettings } from "./sso-options.ts";

/** The console's leader key. It runs no leader-only work today; the key keeps replicas apart. */
export const consoleLeaderKey = "/platform/console/leader";

export const consoleOptionDefs: OptionDef[] = [
  {
    name: "admin-token-file",
    type: "string",
    help: "where the first admin token is written (mode 0600) when the store holds none; CAPSTAN_ADMIN_TOKEN gives one instead",
  },
  ...registryTokenOptionDefs,
  ...ssoOptionDefs,
];

export interface ConsoleSettings {
  adminTokenFile?: string;
  /** CAPSTAN_ADMIN_TOKEN: registered as an admin token (only its hash is stored). */
  envToken?: string;
  /** The registry token endpoint (-registry-*; registry-token-options.ts). */
  registry?: RegistryTokenSettings;
  /** Single sign-on (-oidc-*, -sso-token-ttl; sso-options.ts); undefined: off. */
  sso?: ReturnType<typeof ssoSettings>;
}

/** What installConsole built, for other parts of the process (the web console's login page). */
export interface InstalledConsole {
  /** Single sign-on, in-process (start/finish, api/console/sso.ts); undefined when -oidc-issuer is not given. */
  ssoLogin: SsoLogin | undefined;
}

export function consoleSettings(options: Record<string, unknown>, env: Record<string, string | undefined> = process.env): ConsoleSettings {
  const file = options["admin-token-file"];
  const envToken = env.CAPSTAN_ADMIN_TOKEN;
  const sso = ssoSettings(options, env);
  return {
    ...(sso !== undefined ? { sso } : {}),
    ...(typeof file === "string" && file !== "" ? { adminTokenFile: file } : {}),
    ...(envToken !== undefined && envToken !== "" ? { envToken } : {}),
    registry: registryTokenSettings(options),
  };
}

export async function installConsole(ctx: ServeContext, settings: ConsoleSettings): Promise<InstalledConsole> {
  const { store, manager, log } = ctx;
  try {
    const { created } = await ensureAdminToken({ store, adminTokenFile: settings.adminTokenFile, envToken: settings.envToken });
    // The token itself is never logged: only where it went.
    if (created) log.info(settings.envToken !== undefined ? { from: "CAPSTAN_ADMIN_TOKEN" } : { file: settings.adminTokenFile }, "admin token created");
    // Say where the first admin token is on every start, so an operator finds it for capstan login.
    else if (settings.envToken === undefined && settings.adminTokenFile !== undefined && existsSync(settings.adminTokenFile)) {
      log.info({ file: settings.adminTokenFile }, "admin token file (capstan login CLUSTER -url URL < FILE)");
    }
  } catch (e) {
    if (e instanceof AdminTokenError) throw new UsageError(e.message);
    throw e;
  }
  const registryToken = await installRegistryToken(ctx, settings.registry ?? registryTokenSettings({}));
  let ssoLogin: SsoLogin | undefined;
  if (settings.sso !== undefined) {
    const { secretFile, secretFileReadable, ...sso } = settings.sso;
    if (secretFileReadable) log.warn({ file: secretFile }, "the OIDC client secret file is readable by every user of this machine (chmod 600 or 640)");
    const { key, created } = await ensureSsoStateKey(store);
    if (created) log.info("sso state key created");
    ssoLogin = createSsoLogin({ store, settings: sso, stateKey: key, log });
    // The secret is never logged.
    log.info({ issuer: sso.issuer, clientId: sso.clientId, admins: sso.admins.length, tokenTtlMs: sso.tokenTtlMs }, "single sign-on on");
  }
  manager.app.route("/", createConsoleApi({ store, log, gate: ctx.access.gate, changed: () => ctx.verifier.forget(), registryToken, ...(ssoLogin !== undefined ? { sso: ssoLogin } : {}) }));
  return { ssoLogin };
}
