// `capstan up`: every component in one process, on the embedded store by default.
//
// What runs today: the store (with its compactor), leader election (trivially single-process on
// the embedded store; a real fenced lease on etcd), the cluster adapter checked against every
// engine, the manager's /healthz, /readyz and /metrics, and the orchestrator (its API and
// controllers, installed exactly as `capstan orchestrator` installs them). Components join this
// process as they are built (secrets, console, registry).
//
// The leader key is the orchestrator's: `capstan up` and `capstan orchestrator` processes sharing
// one etcd then elect a single leader between them, instead of both running the controllers.
import { createLogger } from "../../runtime/log.ts";
import { orchestratorOptionDefs, orchestratorSettings } from "../orchestrator-options.ts";
import { installOrchestrator, orchestratorLeaderKey } from "../orchestrator.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";
import { clusterOption, historyOption, serve, webOption } from "../serve.ts";

const defs: OptionDef[] = [
  webOption,
  { name: "data", type: "string", help: "data directory of the embedded store", default: "./capstan-data" },
  { name: "store", type: "string", help: "store URL: sqlite://PATH or etcd://HOST:PORT[,HOST:PORT] (default sqlite://DATA/state.db)" },
  clusterOption,
  historyOption,
  ...orchestratorOptionDefs,
];

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(usage("up", "Runs every Capstan component in one process.", defs));
    return 0;
  }
  const o = args.options as { web: string; data: string; store?: string; cluster: string; history: number };
  const settings = orchestratorSettings(args.options);
  return serve(
    {
      name: "capstan",
      web: o.web,
      storeUrl: o.store ?? `sqlite://${o.data}/state.db`,
      cluster: o.cluster,
      historyMs: o.history,
      leaderKey: orchestratorLeaderKey,
      log: createLogger("capstan"),
    },
    (ctx) => installOrchestrator(ctx, settings),
  );
}
