// `capstan up`: every component in one process, on the embedded store by default.
//
// What runs: the store (with its compactor), leader election (trivially single-process on the
// embedded store; a real fenced lease on etcd), the cluster adapter checked against every engine,
// the manager's /healthz, /readyz and /metrics, the orchestrator (/api/podgroups, its controllers),
// the console (/api/v1/...) and the secrets service (/v2/secrets, /v2/sys) with Secret-sync, each
// installed exactly as its own command installs it. The three APIs share one address: their paths
// do not overlap. The secrets service asks the console for roles over HTTP, as it does when they
// are separate processes, so it is pointed at this process's own address.
//
// The leader key is the orchestrator's: `capstan up` and `capstan orchestrator` processes sharing
// one etcd then elect a single leader between them, instead of both running the controllers.
import { freePort } from "../free-port.ts";
import { join } from "node:path";
import { createLogger } from "../../runtime/log.ts";
import { consoleSettings, installConsole } from "../console.ts";
import { parseListenAddress } from "../listen.ts";
import { orchestratorOptionDefs, orchestratorSettings } from "../orchestrator-options.ts";
import { installOrchestrator, orchestratorLeaderKey } from "../orchestrator.ts";
import { authFromOptions, authOptionDefs } from "../auth-options.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { installSecrets } from "../secrets.ts";
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
];

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(usage("up", "Runs every Capstan component in one process: orchestrator, console, secrets service.", defs));
    return 0;
  }
  const o = args.options as { web: string; data: string; store?: string; cluster: string; history: number; "admin-token-file"?: string };
  const settings = orchestratorSettings(args.options);
  const consoleConf = consoleSettings({ "admin-token-file": o["admin-token-file"] ?? join(o.data, "admin-token") });
  const tls = tlsFromOptions(args.options);
  let listen: { host: string; port: number };
  try {
    listen = parseListenAddress(o.web);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  // The secrets service needs the console's URL before the server listens; with port 0 the port is
  // chosen here (the kernel's pick, released and taken again a moment later by the server).
  if (listen.port === 0) listen = { ...listen, port: await freePort(listen.host) };
  const web = `${listen.host.includes(":") ? `[${listen.host}]` : listen.host}:${listen.port}`;
  return serve(
    {
      name: "capstan",
      web,
      tls,
      storeUrl: o.store ?? `sqlite://${o.data}/state.db`,
      storeConnection: storeConnectionFromOptions(args.options),
      cluster: o.cluster,
      clusterTls: dockerTlsFromOptions(args.options),
      historyMs: o.history,
      auth: authFromOptions(args.options),
      leaderKey: orchestratorLeaderKey,
      log: createLogger("capstan"),
    },
    async (ctx) => {
      installOrchestrator(ctx, settings);
      await installConsole(ctx, consoleConf);
      installSecrets(ctx);
    },
  );
}

/** This process's own address for a client on the same machine (a wildcard becomes loopback; https with -tls-cert). */
export function selfUrl(listen: { host: string; port: number }, https = false): string {
  const host = listen.host === "0.0.0.0" || listen.host === "" ? "127.0.0.1" : listen.host === "::" ? "::1" : listen.host;
  return `${https ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${listen.port}`;
}
