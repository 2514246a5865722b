// `capstan up`: every component in one process, on the embedded store by default.
//
// What runs: the store (with its compactor), leader election (a fenced lease on either store; on
// the embedded store one process per role, an OS lock, so it leads at once), the cluster adapter checked against every engine,
// the manager's /healthz, /readyz and /metrics, the orchestrator (/api/podgroups, its controllers),
// the console (/api/v1/...) and the secrets service (/v2/secrets, /v2/sys) with Secret-sync, each
// installed exactly as its own command installs it. The three APIs share one address: their paths
// do not overlap. All three check access tokens through the one gate of the process
// (docs/security.md). The image registry runs on a listener of its own (-registry-web, default
// 127.0.0.1:5000; its /v2/ would collide with the secrets service's): filesystem storage in
// DATA/registry, token auth from the store key this console publishes (./registry.ts).
//
// The controllers pull the registry's images as a service identity of the console: at start up
// makes (or reuses) a sync token for user capstan-controllers, kept in DATA/controllers-token
// (0600), and gives the orchestrator that file and -registry-web's address as -registry-token-file
// and -registry-host (either option given explicitly wins; docs/registry.md, "How the platform
// pulls"). That token never leaves this process: the orchestrator trades it, at up's own token
// endpoint, for a pull-only registry token per repository, and the engines get only that. Without
// HTTPS it calls the endpoint on loopback (-web's port on 127.0.0.1 for an every-interface -web);
// with HTTPS at the published realm, trusting up's own -tls-cert besides the system roots.
//
// The leader key is the orchestrator's: `capstan up` and `capstan orchestrator` processes sharing
// one etcd then elect a single leader between them, instead of both running the controllers.
// Secret-sync and the store compactor campaign under keys of their own (docs/runtime.md, "Work
// under its own leader key"), so an `up` beside a `capstan secrets` runs one Secret-sync between them.
import { installWebConsole, publicUrlOf, webConsoleOptionDefs } from "../web-console.ts";
import { chmodSync, mkdirSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { controllersTokenRole, controllersTokenUser, ensureServiceToken } from "../../api/console/service-token.ts";
import { createLogger } from "../../runtime/log.ts";
import { consoleSettings, installConsole } from "../console.ts";
import { orchestratorOptionDefs, orchestratorSettings } from "../orchestrator-options.ts";
import { installOrchestrator, orchestratorLeaderKey } from "../orchestrator.ts";
import { authFromOptions, authOptionDefs, isLoopbackHost } from "../auth-options.ts";
import { parseListenAddress } from "../listen.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";
import { installSecrets, type UnsealSettings } from "../secrets.ts";
import { defaultRegistryWeb, installUpRegistry, upRegistryCertFile, upRegistryRealm } from "./registry.ts";
import { ssoOptionDefs, ssoOptionsOf } from "../sso-options.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";
import { clusterOption, historyOption, serve, webOption } from "../serve.ts";
import { dockerTlsFromOptions, dockerTlsOptionDefs } from "../docker-tls-options.ts";
import { tlsFromOptions, tlsOptionDefs } from "../tls-options.ts";

const defs: OptionDef[] = [
  webOption,
  ...authOptionDefs,
  ...tlsOptionDefs,
  { name: "data", type: "string", help: "data directory of the embedded store", default: "./capstan-data" },
  { name: "store", type: "string", help: "store URL: sqlite://PATH, etcd://HOST:PORT[,HOST:PORT] or etcds://HOST:PORT[,...] (TLS) (default sqlite://DATA/state.db)" },
  ...storeConnectionOptionDefs,
  clusterOption,
  ...dockerTlsOptionDefs,
  { name: "admin-token-file", type: "string", help: "where the console writes the first admin token (default DATA/admin-token); CAPSTAN_ADMIN_TOKEN gives one instead" },
  historyOption,
  ...orchestratorOptionDefs,
  { name: "registry-web", type: "string", help: `listen address of the image registry (its own listener); "" runs none (default ${defaultRegistryWeb})` },
  ...ssoOptionDefs,
  ...webConsoleOptionDefs,
  {
    name: "unseal-key-file",
    type: "string",
    help: `auto-unseal the secrets service at start from this file (0600; made with the service's key when up initializes it); "" turns auto-unseal off (default DATA/unseal-key on the embedded store, none with -store)`,
  },
];

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(usage("up", "Runs every Capstan component in one process: orchestrator, console, secrets service.", defs));
    return 0;
  }
  const o = args.options as { web: string; data: string; store?: string; cluster: string; history: number; "admin-token-file"?: string; "registry-web"?: string; "unseal-key-file"?: string };
  const unseal = unsealSettings(o["unseal-key-file"], o.store === undefined ? join(o.data, "unseal-key") : undefined);
  const registryWeb = o["registry-web"] ?? defaultRegistryWeb;
  // The controllers' registry credentials: up's own registry and a token made for them, unless given.
  const registryHost = nonEmpty(args.options["registry-host"]) ?? upRegistryHost(registryWeb);
  const ownToken = nonEmpty(args.options["registry-token-file"]) === undefined && registryHost !== undefined;
  const controllersTokenFile = join(o.data, "controllers-token");
  // DATA is private (docs/store.md): it holds the store, tokens and keys. Made here, before anything writes to it.
  mkdirSync(o.data, { recursive: true, mode: 0o700 });
  // An existing one made before (or by hand) is made private too, when it is ours to change.
  const dataDir = statSync(o.data);
  if ((dataDir.mode & 0o077) !== 0 && dataDir.uid === process.getuid?.()) chmodSync(o.data, 0o700);
  const settings = orchestratorSettings({
    ...args.options,
    ...(registryHost !== undefined && { "registry-host": registryHost }),
    ...(ownToken && { "registry-token-file": controllersTokenFile }),
  });
  const tls = tlsFromOptions(args.options);
  const publicUrl = publicUrlOf(args.options);
  const ownRealm = tls === undefined ? upLoopbackRealm(o.web) : undefined;
  if (ownRealm !== undefined) settings.registryRealm = ownRealm;
  if (tls !== undefined) settings.registryCa ??= tls.cert;
  const consoleConf = consoleSettings({
    ...ssoOptionsOf(args.options),
    "admin-token-file": o["admin-token-file"] ?? join(o.data, "admin-token"),
    "registry-cert": upRegistryCertFile(o.data),
    "registry-realm": upRegistryRealm(o.web, tls !== undefined),
  });
  return serve(
    {
      name: "capstan",
      web: o.web,
      tls,
      storeUrl: o.store ?? `sqlite://${o.data}/state.db`,
      storeConnection: storeConnectionFromOptions(args.options),
      cluster: o.cluster,
      clusterTls: dockerTlsFromOptions(args.options),
      historyMs: o.history,
      auth: authFromOptions(args.options),
      leaderKey: orchestratorLeaderKey,
      lease: settings.lease,
      log: createLogger("capstan"),
    },
    async (ctx) => {
      if (ownToken) {
        const t = await ensureServiceToken({ store: ctx.store, file: controllersTokenFile, user: controllersTokenUser, role: controllersTokenRole });
        ctx.log.info({ tokenId: t.tokenId, user: controllersTokenUser, file: controllersTokenFile, created: t.created }, "controllers' registry token ready");
      }
      installOrchestrator(ctx, settings);
      const { ssoLogin } = await installConsole(ctx, consoleConf);
      const sealed = (await installSecrets(ctx, unseal)) === "sealed";
      // Said on stdout's log once, so an operator knows whether a restart needs their shares.
      if (unseal === undefined) ctx.log.info("auto-unseal is off: the secrets service starts sealed (capstan secrets init, then capstan secrets unseal after every restart)");
      else ctx.log.info({ unsealKeyFile: unseal.file, sealed }, sealed ? "auto-unseal: the secrets service stays sealed" : "auto-unseal: the secrets service is unsealed; -unseal-key-file '' turns auto-unseal off");
      const registryApi = registryWeb !== "" ? await installUpRegistry(ctx, { data: o.data, web: registryWeb, explicit: o["registry-web"] !== undefined, tls }) : undefined;
      installWebConsole(ctx, { secure: tls !== undefined, sso: ssoLogin, registry: registryApi, publicUrl });
    },
  );
}

/**
 * The secrets service's unseal key file (docs/secrets.md, "Auto-unseal"): the one given (required
 * to exist once initialized), none for "", else up's default (its absence only warns).
 */
function unsealSettings(given: string | undefined, fallback: string | undefined): UnsealSettings | undefined {
  if (given !== undefined) return given.trim() === "" ? undefined : { file: given.trim(), required: true };
  return fallback === undefined ? undefined : { file: fallback, required: false };
}

function nonEmpty(v: unknown): string | undefined {
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}

/**
 * up's own registry token endpoint on a loopback address, for its controllers without HTTPS (the
 * access token they ask with must not cross a network): -web's when it is loopback, 127.0.0.1 (::1)
 * with -web's port for every interface; undefined otherwise (then the published realm is asked).
 */
function upLoopbackRealm(web: string): string | undefined {
  let listen: { host: string; port: number };
  try {
    listen = parseListenAddress(web);
  } catch {
    return undefined;
  }
  const host = listen.host === "0.0.0.0" ? "127.0.0.1" : listen.host === "::" ? "::1" : listen.host;
  if (listen.port === 0 || !isLoopbackHost(host)) return undefined;
  return upRegistryRealm(`${host.includes(":") ? `[${host}]` : host}:${listen.port}`, false);
}

/**
 * The registry host images of up's own registry are named by: -registry-web's address (an
 * every-interface listener by this machine's host name, as the registry's realm is). Undefined
 * when up runs no registry, or listens on port 0 (its port is not known before it listens).
 */
function upRegistryHost(web: string): string | undefined {
  if (web === "") return undefined;
  let listen: { host: string; port: number };
  try {
    listen = parseListenAddress(web, "-registry-web");
  } catch {
    return undefined; // installUpRegistry names the problem
  }
  if (listen.port === 0) return undefined;
  const host = listen.host === "0.0.0.0" || listen.host === "::" ? hostname() : listen.host;
  return `${host.includes(":") ? `[${host}]` : host}:${listen.port}`;
}
