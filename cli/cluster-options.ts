// What the commands that address a cluster by name share (`secret`, `deploy`, `apps`, `tokens`,
// `whoami`): the cluster's entry from ~/.capstan/config.yaml (saved by `capstan login`), with its
// token and CA overridable on the command line (-token, -ca; CAPSTAN_TOKEN, CAPSTAN_CA), and the
// clients for its services, every one of them sending the token.
import { homedir } from "node:os";
import { clusterFromConfig, configPath, credentials, readClientConfig, type ClusterEntry } from "./client-config.ts";
import { ConsoleClient } from "./console-client.ts";
import { CommandFailure } from "./failure.ts";
import { OrchestratorClient } from "./client.ts";
import { UsageError, type OptionDef, type OptionValues } from "./options.ts";
import { SecretsClient } from "./secrets-client.ts";

export const clusterCommandOptionDefs: OptionDef[] = [
  { name: "token", type: "string", help: "access token to use instead of the one `capstan login` saved for the cluster" },
  { name: "ca", type: "string", help: "verify the cluster's HTTPS servers with this CA certificate (PEM file) instead of the one `capstan login -ca` saved (else ca: in ~/.capstan/config.yaml, else the system roots)" },
  { name: "request-timeout", type: "duration", help: "timeout of each HTTP request", default: "10s" },
];

export interface ClusterClients {
  entry: ClusterEntry;
  console: ConsoleClient;
  secrets: SecretsClient;
  orchestrator: OrchestratorClient;
}

/** The clients of cluster `name`, with the token from -token or the config, the CA from -ca or the config. */
export function clusterClients(name: string, options: OptionValues, home = homedir()): ClusterClients {
  const entry = clusterFromConfig(name, home);
  const path = configPath(home);
  let loaded: ReturnType<typeof readClientConfig> | undefined;
  const { token, ca } = credentials(options, name, () => (loaded ??= readClientConfig(path)), path);
  const requestTimeoutMs = options["request-timeout"] as number;
  return {
    entry,
    console: new ConsoleClient({ server: entry.console, token, ca, requestTimeoutMs }),
    secrets: new SecretsClient({ server: entry.secrets, token, ca, requestTimeoutMs }),
    orchestrator: new OrchestratorClient({ server: entry.orchestrator, token, ca, requestTimeoutMs }),
  };
}

/** The current cluster's name (the last one logged in to); a CommandFailure naming login without one. */
export function currentCluster(home = homedir()): string {
  const path = configPath(home);
  const current = readClientConfig(path).current;
  if (current === undefined) throw new CommandFailure(`no current cluster in ${path}: give CLUSTER, or run capstan login CLUSTER first`);
  return current;
}

/** `<app>.<type>.<proc_name>` (e.g. hello.web.web): answers the app, its first segment. */
export function appOfProc(proc: string): string {
  const parts = proc.split(".");
  if (parts.length < 3 || parts.some((p) => p === "")) {
    throw new UsageError(`proc "${proc}" must be <app>.<type>.<proc_name>, e.g. hello.web.web`);
  }
  return parts[0]!;
}

/** The positional arguments, exactly `names` of them (their names make the message). */
export function positionals(args: string[], names: string[], example: string): string[] {
  if (args.length < names.length) throw new UsageError(`${names.slice(args.length).join(" and ")} ${names.length - args.length > 1 ? "are" : "is"} required, e.g. ${example}`);
  if (args.length > names.length) throw new UsageError(`unexpected argument "${args[names.length]}"`);
  return args;
}
