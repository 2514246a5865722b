// `capstan tokens create <cluster> -user e@x [-role user|viewer|sync|admin] [-apps a,b]
// [-expires-in 30d]`: have the console create an access token (admin token). The token is printed
// once; only its hash is kept. `capstan tokens list [<cluster>]`: the tokens, never the tokens
// themselves (admin token). `capstan tokens revoke <cluster> ID`: delete one; every process stops
// accepting it within about 2 s (docs/security.md).
import { clusterClients, clusterCommandOptionDefs, currentCluster, positionals } from "../cluster-options.ts";
import { tokenRoles, type TokenRole } from "../console-client.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { outputFormat, outputOptionDef } from "../output-option.ts";
import { table } from "../render.ts";

const createDefs: OptionDef[] = [
  { name: "user", type: "string", help: "whose token: an e-mail for a user or viewer token (matched against app maintainers), a label for sync/admin" },
  {
    name: "role",
    type: "string",
    help: "user (a person: maintainer of the apps listing the e-mail), viewer (read-only on -apps), sync (reads every app's secrets) or admin",
    default: "user",
  },
  { name: "apps", type: "string", help: "the apps a viewer token may read, comma-separated (required for -role viewer, only for it)" },
  { name: "expires-in", type: "string", help: "lifetime, e.g. 12h or 30d (default: no expiry)" },
  ...clusterCommandOptionDefs,
];
const listDefs: OptionDef[] = [outputOptionDef(["table", "json"], "the console's records; never a token"), ...clusterCommandOptionDefs];
const revokeDefs: OptionDef[] = [...clusterCommandOptionDefs];

const top = `usage: capstan tokens create CLUSTER -user E-MAIL [-role user|viewer|sync|admin] [-apps APP,...] [-expires-in 30d]
       capstan tokens list [CLUSTER]
       capstan tokens revoke CLUSTER ID

Creates access tokens with the console, lists and revokes them. Needs an admin token. A new token
is shown once. (capstan tokens create -h, list -h, revoke -h for the options)
`;

export async function run(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === "-h" || verb === "--help" || verb === "help") {
    process.stdout.write(top);
    return verb === undefined ? 2 : 0;
  }
  if (verb === "create") return create(rest);
  if (verb === "list" || verb === "ls") return list(rest);
  if (verb === "revoke" || verb === "rm") return revoke(rest);
  throw new UsageError(`unknown sub-command "${verb}": use create, list or revoke`);
}

async function create(argv: string[]): Promise<number> {
  const args = parseArgs(argv, createDefs);
  if (args.help) {
    process.stdout.write(`${usage("tokens create", "Creates an access token; it is printed once, on standard output.", createDefs, "CLUSTER")}
examples:
  capstan tokens create prod -user alice@example.com -expires-in 30d
  capstan tokens create prod -user carol@example.com -role viewer -apps shop,blog
`);
    return 0;
  }
  const [cluster] = positionals(args.positionals, ["CLUSTER"], "capstan tokens create prod -user alice@example.com");
  const o = args.options as { user?: string; role: string; apps?: string; "expires-in"?: string };
  if (o.user === undefined || o.user === "") throw new UsageError("-user is required");
  const role = tokenRole(o.role);
  const apps = appList(o.apps);
  if (role === "viewer" && apps === undefined) throw new UsageError("-role viewer needs -apps APP,... (the apps the token may read)");
  if (role !== "viewer" && apps !== undefined) throw new UsageError(`-apps is only for -role viewer (a ${role} token's apps are not granted on the token)`);
  try {
    const created = await clusterClients(cluster!, args.options).console.createToken(o.user, role, o["expires-in"], apps);
    // The token alone on stdout, so `$(capstan tokens create ...)` captures it; the rest on stderr.
    process.stdout.write(`${created.token}\n`);
    const grants = created.apps && created.apps.length > 0 ? `, apps ${created.apps.join(", ")}` : "";
    process.stderr.write(`token ${created.id} for ${created.user} (role ${created.role}${grants}${created.expiresAt ? `, expires ${created.expiresAt}` : ""}); it is not shown again\n`);
    return 0;
  } catch (e) {
    return reportFailure("tokens create", e);
  }
}

async function list(argv: string[]): Promise<number> {
  const args = parseArgs(argv, listDefs);
  if (args.help) {
    process.stdout.write(usage("tokens list", "Lists the access tokens (id, user, role, granted apps, dates; never the tokens) of the current cluster without CLUSTER.", listDefs, "[CLUSTER]"));
    return 0;
  }
  if (args.positionals.length > 1) throw new UsageError(`unexpected argument "${args.positionals[1]}"`);
  const output = outputFormat(args.options, ["table", "json"]);
  try {
    const cluster = args.positionals[0] ?? currentCluster();
    const tokens = await clusterClients(cluster, args.options).console.listTokens();
    process.stdout.write(
      output === "json"
        ? `${JSON.stringify(tokens, null, 2)}\n`
        : tokens.length === 0
        ? "no tokens\n"
        : table(
            ["ID", "USER", "ROLE", "APPS", "CREATED", "EXPIRES", "ORIGIN"],
            tokens.map((t) => [t.id, t.user, t.role, t.apps && t.apps.length > 0 ? t.apps.join(",") : "-", t.createdAt, t.expiresAt ?? "never", t.origin ?? "create"]),
          ),
    );
    return 0;
  } catch (e) {
    return reportFailure("tokens list", e);
  }
}

async function revoke(argv: string[]): Promise<number> {
  const args = parseArgs(argv, revokeDefs);
  if (args.help) {
    process.stdout.write(usage("tokens revoke", "Revokes the token with this id (capstan tokens list shows the ids).", revokeDefs, "CLUSTER ID"));
    return 0;
  }
  const [cluster, id] = positionals(args.positionals, ["CLUSTER", "ID"], "capstan tokens revoke prod 0123456789ab");
  try {
    await clusterClients(cluster!, args.options).console.revokeToken(id!);
    process.stdout.write(`token ${id} revoked\n`);
    return 0;
  } catch (e) {
    return reportFailure("tokens revoke", e);
  }
}

export function tokenRole(text: string): TokenRole {
  if (!(tokenRoles as readonly string[]).includes(text)) throw new UsageError(`-role: "${text}" is not ${tokenRoles.slice(0, -1).join(", ")} or ${tokenRoles.at(-1)}`);
  return text as TokenRole;
}

/** -apps: comma-separated names, trimmed, without duplicates; undefined when not given. */
export function appList(text: string | undefined): string[] | undefined {
  if (text === undefined) return undefined;
  const apps = [...new Set(text.split(",").map((a) => a.trim()).filter((a) => a !== ""))];
  if (apps.length === 0) throw new UsageError("-apps: no app names (give APP,APP...)");
  return apps;
}
