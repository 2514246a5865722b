// `capstan apps add <cluster> <app> -maintainer e@x [-maintainer ...]`, `capstan apps list
// [<cluster>]` and `capstan apps maintainers add|remove <cluster> <app> e@x...`: register an app
// with the console, list the registered ones, change an app's maintainers (admin token).
import { clusterClients, clusterCommandOptionDefs, currentCluster, positionals } from "../cluster-options.ts";
import { CommandFailure, reportFailure } from "../failure.ts";
import { ApiError } from "../http-errors.ts";
import { editNote, emailArgs } from "../maintainers.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { outputFormat, outputOptionDef } from "../output-option.ts";
import { table } from "../render.ts";

const addDefs: OptionDef[] = [
  { name: "maintainer", type: "string", help: "maintainer e-mails, comma-separated (or the option repeated)" },
  ...clusterCommandOptionDefs,
];
const listDefs: OptionDef[] = [outputOptionDef(["table", "json"], "the console's records"), ...clusterCommandOptionDefs];
const maintainerDefs: OptionDef[] = [outputOptionDef(["text", "json"], "the app's record afterwards"), ...clusterCommandOptionDefs];

const top = `usage: capstan apps add CLUSTER APP -maintainer E-MAIL[,E-MAIL...]
       capstan apps list [CLUSTER] [-o json]
       capstan apps maintainers add|remove CLUSTER APP E-MAIL [E-MAIL...]

Registers apps with the console, lists them and changes their maintainers. Needs an admin token
(capstan login CLUSTER with the token in the console's -admin-token-file, or -token).
(capstan apps add -h, list -h, maintainers add -h for the options)
`;

export async function run(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === "-h" || verb === "--help" || verb === "help") {
    process.stdout.write(top);
    return verb === undefined ? 2 : 0;
  }
  if (verb === "add") return add(rest);
  if (verb === "list" || verb === "ls") return list(rest);
  if (verb === "maintainers" || verb === "maintainer") return maintainers(rest);
  throw new UsageError(`unknown sub-command "${verb}": use add, list or maintainers`);
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
  const output = outputFormat(args.options, ["table", "json"]);
  try {
    const cluster = args.positionals[0] ?? currentCluster();
    const apps = await clusterClients(cluster, args.options).console.listApps();
    if (output === "json") process.stdout.write(`${JSON.stringify(apps, null, 2)}\n`);
    else process.stdout.write(apps.length === 0 ? "no apps\n" : table(["APP", "MAINTAINERS", "CREATED"], apps.map((a) => [a.appname, a.maintainers.join(","), a.createdAt])));
    return 0;
  } catch (e) {
    return reportFailure("apps list", e);
  }
}

/**
 * `apps maintainers add|remove CLUSTER APP E-MAIL...`: the console adds or removes them from the
 * list as stored (PATCH), so two edits at once both land. Adding one already there or removing
 * one not there changes nothing and says so (exit 0); removing the last one is refused.
 */
async function maintainers(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  const summaries: Record<string, string> = {
    add: "Adds maintainers to a registered app (their user tokens may then write its secrets and deploy it).",
    remove: "Removes maintainers from an app; it keeps at least one. Their tokens lose the app within about 2 s.",
  };
  if (verb === undefined || verb === "-h" || verb === "--help" || verb === "help") {
    process.stdout.write(`usage: capstan apps maintainers add|remove CLUSTER APP E-MAIL [E-MAIL...]\n\n${summaries.add}\n${summaries.remove}\n`);
    return verb === undefined ? 2 : 0;
  }
  const verbName = verb === "rm" ? "remove" : verb;
  if (verbName !== "add" && verbName !== "remove") throw new UsageError(`unknown sub-command "maintainers ${verb}": use maintainers add or maintainers remove`);
  const args = parseArgs(rest, maintainerDefs);
  if (args.help) {
    process.stdout.write(`${usage(`apps maintainers ${verbName}`, summaries[verbName]!, maintainerDefs, "CLUSTER APP E-MAIL [E-MAIL...]")}
examples:
  capstan apps maintainers add prod hello carol@example.com
  capstan apps maintainers remove prod hello alice@example.com,bob@example.com
`);
    return 0;
  }
  const [cluster, app, ...emailWords] = args.positionals;
  if (cluster === undefined || app === undefined || emailWords.length === 0) {
    throw new UsageError(`CLUSTER, APP and at least one E-MAIL are required, e.g. capstan apps maintainers ${verbName} prod hello carol@example.com`);
  }
  const emails = emailArgs(emailWords);
  if (emails.length === 0) throw new UsageError("at least one E-MAIL is required");
  const output = outputFormat(args.options, ["text", "json"]);
  const command = `apps maintainers ${verbName}`;
  try {
    const consoleClient = clusterClients(cluster, args.options).console;
    let done: Awaited<ReturnType<typeof consoleClient.editMaintainers>>;
    try {
      done = await consoleClient.editMaintainers(app, verbName === "add" ? { add: emails } : { remove: emails });
    } catch (e) {
      // The console's refusal to leave the app without a maintainer, said as the command's own.
      const detail = e instanceof ApiError && e.status === 400 ? e.details?.[0] : undefined;
      const last = detail?.path === "remove" && /would have no maintainer left/.test(detail.message);
      if (last) throw new CommandFailure(`${detail.message} (capstan apps maintainers add)`);
      // A console from before the edit (PATCH) existed.
      if (e instanceof ApiError && e.status === 404 && /^no route for PATCH /.test(e.message)) {
        throw new CommandFailure(`the console at ${consoleClient.server} cannot edit maintainers (no PATCH /api/v1/apps/APP/maintainers): upgrade it`);
      }
      throw e;
    }
    const note = editNote(app, verbName, emails, done);
    process.stdout.write(output === "json" ? `${JSON.stringify(done.app, null, 2)}\n` : `${note} (maintainers: ${done.app.maintainers.join(", ")})\n`);
    return 0;
  } catch (e) {
    return reportFailure(command, e);
  }
}
