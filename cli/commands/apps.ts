// `capstan apps add <cluster> <app> -maintainer e@x [-maintainer ...]` and `capstan apps list
// <cluster>`: register an app with the console and list the registered ones (admin token).
import { clusterClients, clusterCommandOptionDefs, currentCluster, positionals } from "../cluster-options.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { table } from "../render.ts";

const addDefs: OptionDef[] = [
  { name: "maintainer", type: "string", help: "maintainer e-mails, comma-separated (or the option repeated)" },
  ...clusterCommandOptionDefs,
];
const listDefs: OptionDef[] = [...clusterCommandOptionDefs];

const top = `usage: capstan apps add|list CLUSTER ...   (capstan apps add -h for its options)

Registers apps with the console and lists them. Needs an admin token (capstan login CLUSTER with the
token in the console's -admin-token-file, or -token).
`;

export async function run(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === "-h" || verb === "--help" || verb === "help") {
    process.stdout.write(top);
    return verb === undefined ? 2 : 0;
  }
  if (verb === "add") return add(rest);
  if (verb === "list" || verb === "ls") return list(rest);
  throw new UsageError(`unknown sub-command "${verb}": use add or list`);
}

async function add(argv: string[]): Promise<number> {
  // -maintainer may be repeated: parseArgs keeps the last, so collect every value first.
  const maintainers: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const m = /^--?maintainer(?:=(.*))?$/.exec(argv[i]!);
    if (!m) rest.push(argv[i]!);
    else if (m[1] !== undefined) maintainers.push(m[1]);
    else if (argv[i + 1] === undefined) throw new UsageError("option -maintainer needs a value");
    else maintainers.push(argv[++i]!);
  }
  const args = parseArgs(rest, addDefs);
  if (args.help) {
    process.stdout.write(`${usage("apps add", "Registers an app with its maintainers (their user tokens may then write its secrets and deploy it).", addDefs, "CLUSTER APP")}
example:
  capstan apps add prod hello -maintainer alice@example.com,bob@example.com
`);
    return 0;
  }
  const [cluster, app] = positionals(args.positionals, ["CLUSTER", "APP"], "capstan apps add prod hello -maintainer alice@example.com");
  const emails = maintainers.flatMap((m) => m.split(",")).map((m) => m.trim()).filter((m) => m !== "");
  if (emails.length === 0) throw new UsageError("at least one -maintainer E-MAIL is required");
  try {
    const record = await clusterClients(cluster!, args.options).console.createApp(app!, emails);
    process.stdout.write(`app ${record.appname} registered (maintainers: ${record.maintainers.join(", ")})\n`);
    return 0;
  } catch (e) {
    return reportFailure("apps add", e);
  }
}

async function list(argv: string[]): Promise<number> {
  const args = parseArgs(argv, listDefs);
  if (args.help) {
    process.stdout.write(usage("apps list", "Lists the registered apps and their maintainers (of the current cluster without CLUSTER).", listDefs, "[CLUSTER]"));
    return 0;
  }
  if (args.positionals.length > 1) throw new UsageError(`unexpected argument "${args.positionals[1]}"`);
  try {
    const cluster = args.positionals[0] ?? currentCluster();
    const apps = await clusterClients(cluster, args.options).console.listApps();
    process.stdout.write(apps.length === 0 ? "no apps\n" : table(["APP", "MAINTAINERS", "CREATED"], apps.map((a) => [a.appname, a.maintainers.join(","), a.createdAt])));
    return 0;
  } catch (e) {
    return reportFailure("apps list", e);
  }
}
