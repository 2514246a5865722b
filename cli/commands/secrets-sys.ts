// `capstan secrets init|unseal|seal|status [CLUSTER]`: the secrets service's seal life cycle
// (docs/secrets.md, "Init, unseal, seal"). The service is found by -secrets URL, else the CLUSTER's saved secrets URL, else the
// current cluster's, else http://127.0.0.1:9001. Requests carry the access token (-token,
// CAPSTAN_TOKEN, else the token of that cluster; seal sends the root token, -root-token) and
// verify HTTPS with -ca, CAPSTAN_CA, the cluster's `ca:` or the top-level one (client-config.ts).
//
// init prints the unseal key shares and the root token ONCE (the service keeps neither); unseal
// reads a key share from -key or standard input (so it stays out of the shell history), seal needs
// the root token.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { writeUnsealFile } from "../../api/secrets/unseal-file.ts";
import { clusterFromConfig, clusterWithUrl, configPath, credentials, defaultUrls, normaliseServer, readClientConfig, type ClientConfig } from "../client-config.ts";
import { CommandFailure, reportFailure } from "../failure.ts";
import type { CaBundle } from "../http-errors.ts";
import { parseArgs, usage, UsageError, type OptionDef, type OptionValues } from "../options.ts";
import { SecretsClient } from "../secrets-client.ts";
import { readSecretInput } from "../stdin.ts";

const common: OptionDef[] = [
  { name: "secrets", type: "string", help: "secrets service URL (else the cluster's from ~/.capstan/config.yaml)" },
  { name: "ca", type: "string", help: "verify an HTTPS secrets service with this CA certificate (PEM file) instead of the cluster's or the system roots" },
  { name: "request-timeout", type: "duration", help: "timeout of each HTTP request", default: "10s" },
];
const accessToken: OptionDef = { name: "token", type: "string", help: "access token (else the one `capstan login` saved for the cluster)" };
const defs: Record<"init" | "unseal" | "seal" | "status", OptionDef[]> = {
  init: [
    { name: "shares", type: "int", help: "number of unseal key shares to make", default: 5 },
    { name: "threshold", type: "int", help: "shares needed to unseal", default: 3 },
    {
      name: "unseal-key-file",
      type: "string",
      help: "also write -threshold of the shares to this new file (0600) and unseal with them; a service started with -unseal-key-file FILE then unseals itself",
    },
    accessToken,
    ...common,
  ],
  unseal: [{ name: "key", type: "string", help: "one unseal key share (else read from standard input)" }, accessToken, ...common],
  // Not -token: that name (and CAPSTAN_TOKEN) is an access token everywhere else.
  seal: [{ name: "root-token", type: "string", help: "the root token (else read from standard input)" }, ...common],
  status: [accessToken, ...common],
};
const summaries = {
  init: "Initializes the secrets service: makes the master key, splits it into key shares and prints\nthem and the root token once. Store them safely: they are not kept anywhere.",
  unseal: "Gives one unseal key share; once -threshold shares are in, the service is unsealed.",
  seal: "Seals the service: it forgets the master key and answers 503 until unsealed again.",
  status: "Shows whether the service is initialized and sealed.",
};

export function isSysVerb(verb: string | undefined): verb is keyof typeof defs {
  return verb === "init" || verb === "unseal" || verb === "seal" || verb === "status";
}

export async function run(verb: keyof typeof defs, argv: string[], home = homedir()): Promise<number> {
  const args = parseArgs(argv, defs[verb]);
  if (args.help) {
    process.stdout.write(usage(`secrets ${verb}`, summaries[verb], defs[verb], "[CLUSTER]"));
    return 0;
  }
  const [cluster, ...extra] = args.positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const o = args.options as Record<string, string | number | undefined>;
  try {
    const { server, token, ca } = serviceTarget(args.options, cluster, home);
    const client = new SecretsClient({ server, token, ca, requestTimeoutMs: o["request-timeout"] as number });
    switch (verb) {
      case "init": {
        const shares = o.shares as number;
        const threshold = o.threshold as number;
        if (shares < 1 || shares > 255) throw new UsageError(`-shares: ${shares} must be 1..255`);
        if (threshold < 1 || threshold > shares) throw new UsageError(`-threshold: ${threshold} must be 1..${shares} (-shares)`);
        const file = (o["unseal-key-file"] as string | undefined)?.trim() || undefined;
        // Checked before init: the shares must not be lost to a file that cannot be written.
        if (file !== undefined && existsSync(file)) throw new UsageError(`-unseal-key-file: ${file} exists already; give a new file`);
        const { keys, rootToken } = await client.init(shares, threshold);
        const lines = keys.map((k, i) => `Unseal key ${i + 1}: ${k}`);
        process.stdout.write(`${lines.join("\n")}\n\nRoot token: ${rootToken}\n`);
        if (file !== undefined) {
          try {
            // Exclusive: a file made since the check above is never replaced.
            writeUnsealFile(file, keys.slice(0, threshold), { exclusive: true });
          } catch (e) {
            throw new CommandFailure(`-unseal-key-file: cannot write ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); the service is initialized: keep the key shares printed above and write ${threshold} of them to a file yourself`);
          }
          for (const key of keys.slice(0, threshold)) if (!(await client.unseal(key)).sealed) break;
          process.stderr.write(`\n${threshold} of the shares are in ${file} (0600). Start the service with -unseal-key-file ${file} to unseal at every start.\n`);
        }
        const sealed = (await client.status().catch(() => ({ sealed: true }))).sealed;
        process.stderr.write(
          `\nThe secrets service at ${client.server} is initialized${sealed ? "" : " and unsealed"}. The ${keys.length} key shares and the\n` +
            `root token above are shown ONCE and kept nowhere: store them safely, apart from each other.\n` +
            `${sealed ? "Unseal it now and" : "From now on,"} after every restart give ${threshold} of the shares to \`capstan secrets unseal\`.\n`,
        );
        return 0;
      }
      case "unseal": {
        const key = (o.key as string | undefined) ?? (await readSecretInput("unseal key share: "));
        if (key === "") throw new UsageError("the key is empty: give -key or type it on standard input");
        const answer = await client.unseal(key);
        process.stdout.write(answer.sealed ? `still sealed: ${answer.progress ?? "?"}${answer.threshold ? `/${answer.threshold}` : ""} shares given\n` : "unsealed\n");
        return 0;
      }
      case "seal": {
        const rootToken = (o["root-token"] as string | undefined) ?? (await readSecretInput("root token: "));
        if (rootToken === "") throw new UsageError("the root token is empty: give -root-token or type it on standard input");
        await new SecretsClient({ server: client.server, token: rootToken, ca, requestTimeoutMs: o["request-timeout"] as number }).seal();
        process.stdout.write("sealed\n");
        return 0;
      }
      case "status": {
        const status = await client.status();
        process.stdout.write(`${JSON.stringify(status, null, 2)}\n`);
        return 0;
      }
    }
  } catch (e) {
    return reportFailure(`secrets ${verb}`, e);
  }
}

/** The service's URL, and the token and CA of the cluster it belongs to. */
function serviceTarget(options: OptionValues, cluster: string | undefined, home: string): { server: string; token?: string; ca?: CaBundle } {
  const path = configPath(home);
  let loaded: ClientConfig | undefined;
  const config = () => (loaded ??= readClientConfig(path));
  const option = options.secrets;
  let server: string;
  if (typeof option === "string" && option !== "") {
    server = normaliseServer(option, "-secrets");
    cluster ??= clusterWithUrl(config(), "secrets", server);
  } else if (cluster !== undefined) server = clusterFromConfig(cluster, home).secrets;
  else {
    const current = config().current === undefined ? undefined : config().clusters[config().current!];
    server = current?.secrets ?? defaultUrls.secrets;
    if (current !== undefined) cluster = config().current;
  }
  return { server, ...credentials(options, cluster, config, path) };
}
