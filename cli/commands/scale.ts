// `capstan scale NAME N [-wait]`: set a PodGroup's instance count (PATCH cmd=replica).
import { clientOptionDefs, waitOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { waitFor } from "../wait.ts";

const defs: OptionDef[] = [...waitOptionDefs, ...clientOptionDefs];

const help = `${usage("scale", "Sets the number of instances of a PodGroup. Scaling down removes the highest instance numbers first.", defs, "NAME N")}
examples:
  capstan scale hello 3 -wait
  capstan scale hello 0
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [name, count, ...extra] = args.positionals;
  if (name === undefined || count === undefined) throw new UsageError("NAME and N are required, e.g. capstan scale hello 3");
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  if (/^-\d+$/.test(count)) throw new UsageError(`N: the count must be >= 0 (got ${count})`);
  if (!/^\d+$/.test(count)) throw new UsageError(`N: "${count}" is not a whole number >= 0`);
  const numInstances = Number(count);
  try {
    const client = clientFromOptions(args.options);
    await client.updateReplica(name, numInstances);
    process.stdout.write(`podgroup/${name} scaled to ${numInstances}\n`);
    if (!args.options.wait) return 0;
    const ok = await waitFor(client, [{ kind: "converged", name, numInstances }], {
      timeoutMs: args.options.timeout as number,
      print: (l) => process.stdout.write(`${l}\n`),
    });
    return ok ? 0 : 1;
  } catch (e) {
    return reportFailure("scale", e);
  }
}
