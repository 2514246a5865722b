// `capstan login <cluster> [-token T | -sso] [-orchestrator URL -secrets URL -console URL | -url URL]
// [-ca FILE]`: save where a cluster's services are, the access token to use with them and the CA
// that verifies them over HTTPS (its absolute path) in ~/.capstan/config.yaml (mode 0600), and make
// it the current cluster. With -sso the token comes from a single sign-on login through the
// cluster's console (../sso-login.ts, docs/console.md#single-sign-on).
import { homedir } from "node:os";
import { clusterNamePattern, configPath, defaultUrls, normaliseServer, readCaFile, readClientConfig, saveCluster, type ClusterEntry } from "../client-config.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { readSecretInput } from "../stdin.ts";
import { ssoLogin } from "../sso-login.ts";

const defs: OptionDef[] = [
  { name: "token", type: "string", help: "the access token (else read from standard input; a terminal is prompted)" },
  { name: "url", type: "string", help: "one address for all three services (a `capstan up` process)" },
  { name: "orchestrator", type: "string", help: `orchestrator URL (new cluster: ${defaultUrls.orchestrator})` },
  { name: "secrets", type: "string", help: `secrets service URL (new cluster: ${defaultUrls.secrets})` },
  { name: "console", type: "string", help: `console URL (new cluster: ${defaultUrls.console})` },
  { name: "ca", type: "string", help: 'CA certificate (PEM file) that verifies the cluster\'s HTTPS servers, saved as an absolute path (default: the saved one, else the system roots; -ca "" forgets it)' },
  { name: "sso", type: "bool", help: "log in by single sign-on through the cluster's console (prints a URL to open in a browser) instead of giving a token", default: false },
  { name: "sso-timeout", type: "duration", help: "with -sso: how long to wait for the browser to come back", default: "5m" },
  { name: "sso-port", type: "int", help: "with -sso: port of the callback listener on 127.0.0.1 (0: any free port)", default: 0 },
  { name: "no-browser", type: "bool", help: "with -sso: do not run xdg-open (it runs only when DISPLAY is set)", default: false },
  { name: "request-timeout", type: "duration", help: "with -sso: timeout of each request to the console", default: "10s" },
];

const help = `${usage(
  "login",
  "Saves a cluster's service addresses, your access token and the CA of its HTTPS servers in\n~/.capstan/config.yaml (mode 0600) and makes it the current cluster. URLs and -ca not given keep\ntheir saved value.",
  defs,
  "CLUSTER",
)}
examples:
  capstan login prod -orchestrator http://10.0.0.10:9000 -secrets http://10.0.0.10:9001 -console http://10.0.0.10:9002 < token.txt
  capstan login local -url http://127.0.0.1:9000 -token cst_...
  capstan login prod -url https://capstan.example.com:9000 -ca /etc/capstan/ca.pem < token.txt
  capstan login prod -url https://capstan.example.com:9000 -sso
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
  const sso = args.options.sso === true;
  // CAPSTAN_TOKEN (which fills -token) is ignored with -sso; -token on the command line is refused.
  if (sso && argv.some((a) => /^--?token(=|$)/.test(a))) throw new UsageError("-sso and -token exclude each other: -sso gets a token by logging in");
  const port = args.options["sso-port"] as number;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError("-sso-port: must be a port number, 0 to 65535");
  const url = (option: "orchestrator" | "secrets" | "console", saved: string | undefined): string => {
    const given = o[option] ?? o.url;
    if (given !== undefined && given !== "") return normaliseServer(given, `-${o[option] !== undefined ? option : "url"}`);
    return saved ?? defaultUrls[option];
  };
  try {
    const saved = readClientConfig(configPath(home)).clusters[name];
    const entry: ClusterEntry = { orchestrator: url("orchestrator", saved?.orchestrator), secrets: url("secrets", saved?.secrets), console: url("console", saved?.console) };
    // Read and checked now, so a wrong path fails here and not at the next command.
    const ca = o.ca === undefined ? saved?.ca : o.ca === "" ? undefined : readCaFile(o.ca, { option: "-ca" }).path;
    if (ca !== undefined) entry.ca = ca;
    if (sso) {
      const ca = entry.ca !== undefined ? readCaFile(entry.ca, { option: "-ca" }) : undefined;
      const got = await ssoLogin({
        cluster: name,
        console: entry.console,
        ...(ca !== undefined ? { ca } : {}),
        requestTimeoutMs: args.options["request-timeout"] as number,
        timeoutMs: args.options["sso-timeout"] as number,
        port,
        openBrowser: args.options["no-browser"] !== true,
      });
      const path = saveCluster(name, { ...entry, token: got.token }, home);
      process.stdout.write(
        `logged in to ${name} as ${got.user} (role ${got.role}${got.tokenId ? `, token ${got.tokenId}` : ""}${got.expiresAt ? `, expires ${got.expiresAt}` : ""}); saved in ${path} (current cluster now ${name})\n`,
      );
      return 0;
    }
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
