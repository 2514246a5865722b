// `capstan login <cluster> [-token T] [-orchestrator URL -secrets URL -console URL | -url URL]`:
// save where a cluster's services are and the access token to use with them in
// ~/.capstan/config.yaml (mode 0600), and make it the current cluster.
import { homedir } from "node:os";
import { clusterNamePattern, configPath, defaultUrls, normaliseServer, readClientConfig, saveCluster, type ClusterEntry } from "../client-config.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { readSecretInput } from "../stdin.ts";

const defs: OptionDef[] = [
  { name: "token", type: "string", help: "the access token (else read from standard input; a terminal is prompted)" },
  { name: "url", type: "string", help: "one address for all three services (a `capstan up` process)" },
  { name: "orchestrator", type: "string", help: `orchestrator URL (new cluster: ${defaultUrls.orchestrator})` },
  { name: "secrets", type: "string", help: `secrets service URL (new cluster: ${defaultUrls.secrets})` },
  { name: "console", type: "string", help: `console URL (new cluster: ${defaultUrls.console})` },
];

const help = `${usage(
  "login",
  "Saves a cluster's service addresses and your access token in ~/.capstan/config.yaml (mode 0600)\nand makes it the current cluster. URLs not given keep their saved value.",
  defs,
  "CLUSTER",
)}
examples:
  capstan login prod -orchestrator http://10.0.0.10:9000 -secrets http://10.0.0.10:9001 -console http://10.0.0.10:9002 < token.txt
  capstan login local -url http://127.0.0.1:9000 -token cst_...
`;

export async function run(argv: string[], home = homedir()): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [name, ...extra] = args.positionals;
  if (name === undefined) throw new UsageError("CLUSTER is required, e.g. capstan login prod");
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  if (!clusterNamePattern.test(name)) throw new UsageError(`cluster name "${name}" must be letters, digits, ".", "_" or "-"`);
  const o = args.options as Record<string, string | undefined>;
  const url = (option: "orchestrator" | "secrets" | "console", saved: string | undefined): string => {
    const given = o[option] ?? o.url;
    if (given !== undefined && given !== "") return normaliseServer(given, `-${o[option] !== undefined ? option : "url"}`);
    return saved ?? defaultUrls[option];
  };
  try {
    const saved = readClientConfig(configPath(home)).clusters[name];
    const entry: ClusterEntry = { orchestrator: url("orchestrator", saved?.orchestrator), secrets: url("secrets", saved?.secrets), console: url("console", saved?.console) };
    const token = o.token ?? (await readSecretInput(`access token for ${name}: `));
    if (token === "") throw new UsageError("the token is empty: give -token or type it on standard input");
    if (/\s/.test(token)) throw new UsageError("the token contains white space: copy it exactly as it was shown");
    const path = saveCluster(name, { ...entry, token }, home);
    process.stdout.write(`saved cluster ${name} in ${path} (current cluster now ${name})\n`);
    return 0;
  } catch (e) {
    return reportFailure("login", e);
  }
}
