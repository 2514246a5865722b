// `capstan tokens create <cluster> -user e@x [-role user|sync|admin] [-expires-in 30d]`: have the
// console create an access token (admin token). The token is printed once; only its hash is kept.
import { clusterClients, clusterCommandOptionDefs, positionals } from "../cluster-options.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [
  { name: "user", type: "string", help: "whose token: an e-mail for a user token (matched against app maintainers), a label for sync/admin" },
  { name: "role", type: "string", help: "user, sync (may only read secrets) or admin", default: "user" },
  { name: "expires-in", type: "string", help: "lifetime, e.g. 12h or 30d (default: no expiry)" },
  ...clusterCommandOptionDefs,
];

const top = `usage: capstan tokens create CLUSTER -user E-MAIL [-role user|sync|admin] [-expires-in 30d]

Creates an access token with the console. Needs an admin token. The new token is shown once.
`;

export async function run(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === "-h" || verb === "--help" || verb === "help") {
    process.stdout.write(top);
    return verb === undefined ? 2 : 0;
  }
  if (verb !== "create") throw new UsageError(`unknown sub-command "${verb}": use create`);
  const args = parseArgs(rest, defs);
  if (args.help) {
    process.stdout.write(`${usage("tokens create", "Creates an access token; it is printed once, on standard output.", defs, "CLUSTER")}
example:
  capstan tokens create prod -user alice@example.com -expires-in 30d
`);
    return 0;
  }
  const [cluster] = positionals(args.positionals, ["CLUSTER"], "capstan tokens create prod -user alice@example.com");
  const o = args.options as { user?: string; role: string; "expires-in"?: string };
  if (o.user === undefined || o.user === "") throw new UsageError("-user is required");
  if (!["user", "sync", "admin"].includes(o.role)) throw new UsageError(`-role: "${o.role}" is not user, sync or admin`);
  try {
    const created = await clusterClients(cluster!, args.options).console.createToken(o.user, o.role, o["expires-in"]);
    // The token alone on stdout, so `$(capstan tokens create ...)` captures it; the rest on stderr.
    process.stdout.write(`${created.token}\n`);
    process.stderr.write(`token ${created.id} for ${created.user} (role ${created.role}${created.expiresAt ? `, expires ${created.expiresAt}` : ""}); it is not shown again\n`);
    return 0;
  } catch (e) {
    return reportFailure("tokens create", e);
  }
}
