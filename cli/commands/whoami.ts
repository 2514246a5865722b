// `capstan whoami [-context CLUSTER]`: who the access token names, asked of the cluster's console
// (GET /api/v1/whoami): the token's id, the user, the role and the apps the caller may access.
//
//   user alice@example.com (token 0123456789ab), role user, apps: shop, blog
//
// The cluster is -context, else the current one (with -console URL alone: the saved cluster with
// that console, if any); its token (or -token, CAPSTAN_TOKEN) is the one checked.
import { homedir } from "node:os";
import { clusterFromConfig, clusterWithUrl, configPath, credentials, normaliseServer, readClientConfig, type ClientConfig } from "../client-config.ts";
import { clusterCommandOptionDefs } from "../cluster-options.ts";
import { ConsoleClient, type WhoAmI } from "../console-client.ts";
import { CommandFailure, reportFailure } from "../failure.ts";
import { outputFormat, outputOptionDef } from "../output-option.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [
  { name: "context", type: "string", help: "a cluster saved by `capstan login` (default: the current cluster)" },
  { name: "console", type: "string", help: "console URL (else the cluster's)" },
  outputOptionDef(["text", "json"], "the console's answer"),
  ...clusterCommandOptionDefs,
];

const help = `${usage("whoami", "Shows who your access token names: its id, the user, the role and the apps you may access.", defs)}
examples:
  capstan whoami
  capstan whoami -context prod
`;

export async function run(argv: string[], home = homedir()): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}" (the cluster is given with -context CLUSTER)`);
  const o = args.options as { context?: string; console?: string; output: string };
  o.output = outputFormat(args.options, ["text", "json"]);
  try {
    const path = configPath(home);
    let loaded: ClientConfig | undefined;
    const config = () => (loaded ??= readClientConfig(path));
    let cluster: string | undefined = o.context !== undefined && o.context !== "" ? o.context : undefined;
    let server: string | undefined;
    if (o.console !== undefined && o.console !== "") server = normaliseServer(o.console, "-console");
    if (cluster !== undefined) server ??= clusterFromConfig(cluster, home).console;
    else if (server !== undefined) cluster = clusterWithUrl(config(), "console", server);
    else {
      cluster = config().current;
      if (cluster === undefined) throw new CommandFailure(`no current cluster in ${path}: give -context CLUSTER, or run capstan login CLUSTER first`);
      server = clusterFromConfig(cluster, home).console;
    }
    const { token, ca } = credentials(args.options, cluster, config, path);
    if (token === undefined) throw new CommandFailure(`no access token${cluster ? ` saved for cluster ${cluster}` : ""}: run capstan login CLUSTER, or give -token or CAPSTAN_TOKEN`);
    const me = await new ConsoleClient({ server, token, ca, requestTimeoutMs: args.options["request-timeout"] as number }).whoami();
    process.stdout.write(o.output === "json" ? `${JSON.stringify(me, null, 2)}\n` : `${describeCaller(me)}\n`);
    return 0;
  } catch (e) {
    return reportFailure("whoami", e);
  }
}

/** `user alice@example.com (token 0123456789ab), role user, apps: shop, blog`. */
export function describeCaller(me: WhoAmI): string {
  const apps = me.allApps ? "all" : me.apps.length > 0 ? [...me.apps].sort().join(", ") : "none";
  return `user ${me.user}${me.id ? ` (token ${me.id})` : ""}, role ${me.role}, apps: ${apps}${me.expiresAt ? `, expires ${me.expiresAt}` : ""}`;
}
