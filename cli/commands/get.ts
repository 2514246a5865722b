// `capstan get podgroup NAME`, `capstan get podgroups`, `capstan get depends [NAME]`: tables, or the
// server's JSON with -o json.
import { clientOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef, type OptionValues } from "../options.ts";
import { outputFormat, outputOptionDef } from "../output-option.ts";
import { renderDependency, renderDependencyList } from "../render-depends.ts";
import { renderPodGroup, renderPodGroupList } from "../render.ts";

const defs: OptionDef[] = [
  outputOptionDef(["table", "json"], "the server's answer, unchanged"),
  ...clientOptionDefs,
];

const help = `${usage("get", "Shows one PodGroup with its instances, or a list of all PodGroups; one dependency with its pods, or all dependencies.", defs, "podgroup NAME | podgroups | depends [NAME]")}
examples:
  capstan get podgroup hello
  capstan get podgroup hello -o json
  capstan get podgroups
  capstan get depends logagent
  capstan get depends
`;

const one = new Set(["podgroup", "pg"]);
const all = new Set(["podgroups", "pgs"]);
const dependencies = new Set(["depends", "depend", "dependency", "dependencies"]);

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const output = outputFormat(args.options, ["table", "json"]);
  const [kind, name, ...extra] = args.positionals;
  if (kind === undefined) throw new UsageError("what to get: podgroup NAME, podgroups or depends [NAME]");
  if (!one.has(kind) && !all.has(kind) && !dependencies.has(kind)) {
    throw new UsageError(`unknown resource "${kind}": use podgroup NAME, podgroups or depends [NAME]`);
  }
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  if (dependencies.has(kind)) return getDependencies(args.options, output, name);
  // "podgroup" without a name lists them all, as `kubectl get pod` does.
  const listing = all.has(kind) || name === undefined;
  if (all.has(kind) && name !== undefined) throw new UsageError(`"${kind}" lists every group; to show one: capstan get podgroup ${name}`);
  try {
    const client = clientFromOptions(args.options);
    if (listing) {
      const groups = await client.listPodGroups();
      process.stdout.write(output === "json" ? `${JSON.stringify(groups, null, 2)}\n` : renderPodGroupList(groups));
    } else {
      const group = await client.getPodGroup(name!);
      process.stdout.write(output === "json" ? `${JSON.stringify(group, null, 2)}\n` : renderPodGroup(group));
    }
    return 0;
  } catch (e) {
    return reportFailure("get", e);
  }
}

/** `get depends NAME`: one dependency with its pods; without a name, every dependency. */
async function getDependencies(options: OptionValues, output: string, name: string | undefined): Promise<number> {
  try {
    const client = clientFromOptions(options);
    const answer = name === undefined ? await client.listDependencies() : await client.getDependency(name);
    if (output === "json") process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    else process.stdout.write(Array.isArray(answer) ? renderDependencyList(answer) : renderDependency(answer));
    return 0;
  } catch (e) {
    return reportFailure("get", e);
  }
}
