// `capstan secret add|view|delete <cluster> <proc> ...`: write, read and delete an app's secret
// files through the secrets service (docs/secrets.md), as the cluster's maintainer token.
// proc is `<app>.<type>.<proc_name>` (docs/secrets.md, "Input rules") (e.g. hello.web.web); the app is its first segment.
import { readFile } from "node:fs/promises";
import { sameSecretFile } from "../../api/resources/secret-path.ts";
import { appOfProc, clusterClients, clusterCommandOptionDefs, positionals } from "../cluster-options.ts";
import { CommandFailure, reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { table } from "../render.ts";

const addDefs: OptionDef[] = [
  { name: "content", short: "c", type: "string", help: "the file's content" },
  { name: "file", short: "f", type: "string", help: "read the content from this local file" },
  { name: "mode", type: "string", help: "file mode in octal, as installed in the container (the service's default: 400)" },
  ...clusterCommandOptionDefs,
];
const viewDefs: OptionDef[] = [
  { name: "path", type: "string", help: "show only this path" },
  { name: "output", short: "o", type: "string", help: "table (paths and modes) or json (records with their content)", default: "json" },
  ...clusterCommandOptionDefs,
];
const deleteDefs: OptionDef[] = [...clusterCommandOptionDefs];

const help = {
  add: `${usage("secret add", "Writes a secret file of a proc (replacing the content it had). Owner and group are root.", addDefs, "CLUSTER PROC PATH (-c CONTENT | -f FILE)")}
PATH is where the file is installed in the proc's containers; a relative path is under /platform/app.
examples:
  capstan secret add prod hello.web.web config/secret.yaml -f ./secret.yaml
  capstan secret add prod hello.web.web /etc/hello/token -c s3cr3t -mode 440
`,
  view: `${usage("secret view", "Shows a proc's secret files with their content (every proc's, given an app name).", viewDefs, "CLUSTER PROC|APP")}
examples:
  capstan secret view prod hello.web.web
  capstan secret view prod hello -o table
  capstan secret view prod hello.web.web -path config/secret.yaml
`,
  delete: `${usage("secret delete", "Deletes a secret file of a proc. Deleting one that does not exist succeeds.", deleteDefs, "CLUSTER PROC PATH")}
example:
  capstan secret delete prod hello.web.web config/secret.yaml
`,
};

const top = `usage: capstan secret add|view|delete CLUSTER PROC ...   (capstan secret add -h for its options)

Writes, shows and deletes the secret files of an app's procs through the secrets service, with the
token \`capstan login CLUSTER\` saved. PROC is <app>.<type>.<proc_name>, e.g. hello.web.web.
`;

export async function run(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === "-h" || verb === "--help" || verb === "help") {
    process.stdout.write(top);
    return verb === undefined ? 2 : 0;
  }
  if (verb === "add") return add(rest);
  if (verb === "view" || verb === "show") return view(rest);
  if (verb === "delete") return remove(rest);
  throw new UsageError(`unknown sub-command "${verb}": use add, view or delete`);
}

function printHelp(text: string): number {
  process.stdout.write(text);
  return 0;
}

async function add(argv: string[]): Promise<number> {
  const args = parseArgs(argv, addDefs);
  if (args.help) return printHelp(help.add);
  const [cluster, proc, path] = positionals(args.positionals, ["CLUSTER", "PROC", "PATH"], "capstan secret add prod hello.web.web config.yaml -c VALUE");
  const { content, file, mode } = args.options as { content?: string; file?: string; mode?: string };
  if ((content === undefined) === (file === undefined)) throw new UsageError("give the content with exactly one of -c CONTENT or -f FILE");
  if (mode !== undefined && !/^[0-7]{3,4}$/.test(mode)) throw new UsageError(`-mode: "${mode}" is not an octal file mode like 400 or 0640`);
  const app = appOfProc(proc!);
  try {
    let text = content;
    if (file !== undefined) {
      let bytes: Buffer;
      try {
        bytes = await readFile(file);
      } catch (e) {
        throw new CommandFailure(`-f ${file}: ${(e as Error).message}`);
      }
      // A record's content is a string (the spec's JSON body): a file that is not UTF-8 text would
      // be silently mangled on the way, so it is refused instead.
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      } catch {
        throw new CommandFailure(`-f ${file}: not UTF-8 text; secret contents are text (encode binary data, e.g. base64, and decode it in the app)`);
      }
    }
    const { secrets } = clusterClients(cluster!, args.options);
    await secrets.put({ app, proc: proc!, path: path! }, { content: text!, ...(mode !== undefined ? { mode } : {}) });
    process.stdout.write(`secret ${proc} ${path} written\n`);
    return 0;
  } catch (e) {
    return reportFailure("secret add", e);
  }
}

async function view(argv: string[]): Promise<number> {
  const args = parseArgs(argv, viewDefs);
  if (args.help) return printHelp(help.view);
  const [cluster, target] = positionals(args.positionals, ["CLUSTER", "PROC"], "capstan secret view prod hello.web.web");
  const output = args.options.output;
  if (output !== "json" && output !== "table") throw new UsageError(`-output: "${String(output)}" is not table or json`);
  // An app name alone (no dots) shows every proc of the app, as GET without proc does.
  const wholeApp = !target!.includes(".");
  const app = wholeApp ? target! : appOfProc(target!);
  const proc = wholeApp ? undefined : target!;
  const only = args.options.path as string | undefined;
  try {
    const { secrets } = clusterClients(cluster!, args.options);
    const records = (await secrets.list(app, proc))
      // Either spelling of a file under /platform/app finds it (docs/secrets.md, "Input rules").
      .filter((r) => only === undefined || sameSecretFile(r.path, only))
      .sort((a, b) => (a.proc ?? "").localeCompare(b.proc ?? "") || a.path.localeCompare(b.path));
    if (only !== undefined && records.length === 0) throw new CommandFailure(`${target} has no secret file ${only}`);
    if (output === "json") process.stdout.write(`${JSON.stringify(records, null, 2)}\n`);
    else if (records.length === 0) process.stdout.write(`${target} has no secret files\n`);
    else {
      const rows = records.map((r) => [...(wholeApp ? [r.proc ?? ""] : []), r.path, r.mode, `${r.owner}:${r.group}`, String(Buffer.byteLength(r.content))]);
      process.stdout.write(table([...(wholeApp ? ["PROC"] : []), "PATH", "MODE", "OWNER", "BYTES"], rows));
    }
    return 0;
  } catch (e) {
    return reportFailure("secret view", e);
  }
}

async function remove(argv: string[]): Promise<number> {
  const args = parseArgs(argv, deleteDefs);
  if (args.help) return printHelp(help.delete);
  const [cluster, proc, path] = positionals(args.positionals, ["CLUSTER", "PROC", "PATH"], "capstan secret delete prod hello.web.web config.yaml");
  const app = appOfProc(proc!);
  try {
    const { secrets } = clusterClients(cluster!, args.options);
    const deleted = await secrets.delete({ app, proc: proc!, path: path! });
    process.stdout.write(`secret ${proc} ${path} ${deleted ? "deleted" : "did not exist"}\n`);
    return 0;
  } catch (e) {
    return reportFailure("secret delete", e);
  }
}
