// `capstan orchestrator`: the orchestrator API and its controllers in one process (docs/cli.md).
import { createLogger } from "../../runtime/log.ts";
import { orchestratorOptionDefs, orchestratorSettings } from "../orchestrator-options.ts";
import { installOrchestrator, orchestratorLeaderKey } from "../orchestrator.ts";
import { authFromOptions, authOptionDefs } from "../auth-options.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";
import { clusterOption, historyOption, serve, webOption } from "../serve.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";
import { dockerTlsFromOptions, dockerTlsOptionDefs } from "../docker-tls-options.ts";
import { tlsFromOptions, tlsOptionDefs } from "../tls-options.ts";

const defs: OptionDef[] = [
  webOption,
  ...authOptionDefs,
  ...tlsOptionDefs,
  clusterOption,
  ...dockerTlsOptionDefs,
  { name: "store", type: "string", help: "store URL: sqlite://PATH, etcd://HOST:PORT[,HOST:PORT] or etcds://HOST:PORT[,...] (TLS)", default: "sqlite://./capstan-data/state.db" },
  ...storeConnectionOptionDefs,
  ...orchestratorOptionDefs,
  historyOption,
];

const summary = `Runs the orchestrator: the PodGroup API (/api/podgroups) and the controllers that converge the
Docker engines to it. Several replicas may share an etcd store: all serve the API, one (the elected
leader) runs the controllers.`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(
      `${usage("orchestrator", summary, defs)}\nexample:\n  capstan orchestrator -web :9000 -cluster n1=unix:///var/run/docker.sock -store etcd://127.0.0.1:2379\n`,
    );
    return 0;
  }
  const o = args.options as { web: string; cluster: string; store: string; history: number };
  const settings = orchestratorSettings(args.options);
  return serve(
    { name: "orchestrator", web: o.web, tls: tlsFromOptions(args.options), storeUrl: o.store, storeConnection: storeConnectionFromOptions(args.options), cluster: o.cluster, clusterTls: dockerTlsFromOptions(args.options), historyMs: o.history, auth: authFromOptions(args.options), leaderKey: orchestratorLeaderKey, lease: settings.lease, log: createLogger("orchestrator") },
    (ctx) => installOrchestrator(ctx, settings),
  );
}
