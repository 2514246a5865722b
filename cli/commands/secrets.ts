// `capstan secrets`: the secrets service (/v2/secrets, /v2/sys) and the Secret-sync controller in
// one process. `capstan secrets init|unseal|seal|status` are the client commands of its seal life
// cycle (./secrets-sys.ts).
import { createLogger } from "../../runtime/log.ts";
import { leaseTimings, orchestratorOptionDefs } from "../orchestrator-options.ts";
import { authFromOptions, authOptionDefs } from "../auth-options.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";
import { installSecrets, secretsLeaderKey, unsealKeyFileOption } from "../secrets.ts";
import { clusterOption, historyOption, serve, storeOption, webOption } from "../serve.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";
import { dockerTlsFromOptions, dockerTlsOptionDefs } from "../docker-tls-options.ts";
import { tlsFromOptions, tlsOptionDefs } from "../tls-options.ts";
import { isSysVerb, run as runSys } from "./secrets-sys.ts";

const defs: OptionDef[] = [
  { ...webOption, default: "127.0.0.1:9001" },
  ...authOptionDefs,
  ...tlsOptionDefs,
  storeOption,
  ...storeConnectionOptionDefs,
  clusterOption,
  ...dockerTlsOptionDefs,
  historyOption,
  // The secrets leader key's lease, as the orchestrator's (`capstan up` gives its -lease-duration to both).
  orchestratorOptionDefs.find((d) => d.name === "lease-duration")!,
  unsealKeyFileOption,
];

const summary = `Runs the secrets service and Secret-sync. It starts sealed (503 on /v2/secrets) until
initialized once (capstan secrets init) and, after each restart, unsealed with enough key shares
(capstan secrets unseal), or by itself from -unseal-key-file (docs/secrets.md, "Auto-unseal").
Secret-sync installs each PodGroup's listed secret files into its containers (only while unsealed).

client sub-commands: capstan secrets init|unseal|seal|status [CLUSTER]   (-h on each)`;

export async function run(argv: string[]): Promise<number> {
  if (isSysVerb(argv[0])) return runSys(argv[0], argv.slice(1));
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(
      `${usage("secrets", summary, defs)}\nexample:\n  capstan secrets -web 127.0.0.1:9001 -store etcd://127.0.0.1:2379 -cluster n1=unix:///var/run/docker.sock\n`,
    );
    return 0;
  }
  const o = args.options as { web: string; store: string; cluster: string; history: number; "lease-duration": number; "unseal-key-file"?: string };
  const unsealKeyFile = o["unseal-key-file"]?.trim() || undefined;
  return serve(
    { name: "secrets", web: o.web, tls: tlsFromOptions(args.options), storeUrl: o.store, storeConnection: storeConnectionFromOptions(args.options), cluster: o.cluster, clusterTls: dockerTlsFromOptions(args.options), historyMs: o.history, auth: authFromOptions(args.options), leaderKey: secretsLeaderKey, lease: leaseTimings(o["lease-duration"]), log: createLogger("secrets") },
    async (ctx) => {
      await installSecrets(ctx, unsealKeyFile === undefined ? undefined : { file: unsealKeyFile, required: true });
    },
  );
}
