// What the commands that address a cluster by name share (`secret`, `deploy`, `apps`, `tokens`):
// the cluster's entry from ~/.capstan/config.yaml (saved by `capstan login`), with its token
// overridable on the command line, and the clients for its services.
import { homedir } from "node:os";
import { clusterFromConfig, type ClusterEntry } from "./client-config.ts";
import { ConsoleClient } from "./console-client.ts";
import { OrchestratorClient } from "./client.ts";
import { UsageError, type OptionDef, type OptionValues } from "./options.ts";
import { SecretsClient } from "./secrets-client.ts";

export const clusterCommandOptionDefs: OptionDef[] = [
  { name: "token", type: "string", help: "access token to use instead of the one `capstan login` saved for the cluster" },
  { name: "request-timeout", type: "duration", help: "timeout of each HTTP request", default: "10s" },
];

export interface ClusterClients {
  entry: ClusterEntry;
  console: ConsoleClient;
  secrets: SecretsClient;
  orchestrator: OrchestratorClient;
}

/** The clients of cluster `name`, with the token from -token or the config. */
export function clusterClients(name: string, options: OptionValues, home = homedir()): ClusterClients {
  const entry = clusterFromConfig(name, home);
  const token = typeof options.token === "string" && options.token !== "" ? options.token : entry.token;
  const requestTimeoutMs = options["request-timeout"] as number;
  return {
    entry,
    console: new ConsoleClient({ server: entry.console, token, requestTimeoutMs }),
    secrets: new SecretsClient({ server: entry.secrets, token, requestTimeoutMs }),
    orchestrator: new OrchestratorClient({ server: entry.orchestrator, requestTimeoutMs }),
  };
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
