// `capstan up`: every component in one process, on the embedded store by default.
//
// What runs: the store (with its compactor), leader election (trivially single-process on the
// embedded store; a real fenced lease on etcd), the cluster adapter checked against every engine,
// the manager's /healthz, /readyz and /metrics, the orchestrator (/api/podgroups, its controllers),
// the console (/api/v1/...) and the secrets service (/v2/secrets, /v2/sys) with Secret-sync, each
// installed exactly as its own command installs it. The three APIs share one address: their paths
// do not overlap. All three check access tokens through the one gate of the process
// (docs/security.md). The image registry runs on a listener of its own (-registry-web, default
// 127.0.0.1:5000; its /v2/ would collide with the secrets service's): filesystem storage in
// DATA/registry, token auth from the store key this console publishes (./registry.ts).
//
// The leader key is the orchestrator's: `capstan up` and `capstan orchestrator` processes sharing
// one etcd then elect a single leader between them, instead of both running the controllers.
import { join } from "node:path";
import { createLogger } from "../../runtime/log.ts";
import { consoleSettings, installConsole } from "../console.ts";
import { orchestratorOptionDefs, orchestratorSettings } from "../orchestrator-options.ts";
import { installOrchestrator, orchestratorLeaderKey } from "../orchestrator.ts";
import { authFromOptions, authOptionDefs } from "../auth-options.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";
import { installSecrets } from "../secrets.ts";
import { defaultRegistryWeb, installUpRegistry, upRegistryCertFile, upRegistryRealm } from "./registry.ts";
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
];

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(usage("up", "Runs every Capstan component in one process: orchestrator, console, secrets service.", defs));
    return 0;
  }
  const o = args.options as { web: string; data: string; store?: string; cluster: string; history: number; "admin-token-file"?: string; "registry-web"?: string };
  const settings = orchestratorSettings(args.options);
  const tls = tlsFromOptions(args.options);
  const consoleConf = consoleSettings({
    "admin-token-file": o["admin-token-file"] ?? join(o.data, "admin-token"),
    "registry-cert": upRegistryCertFile(o.data),
    "registry-realm": upRegistryRealm(o.web, tls !== undefined),
  });
  const registryWeb = o["registry-web"] ?? defaultRegistryWeb;
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
      log: createLogger("capstan"),
    },
    async (ctx) => {
      installOrchestrator(ctx, settings);
      await installConsole(ctx, consoleConf);
      installSecrets(ctx);
      if (registryWeb !== "") await installUpRegistry(ctx, { data: o.data, web: registryWeb, explicit: o["registry-web"] !== undefined, tls });
    },
  );
}
