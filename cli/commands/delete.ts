// `capstan delete podgroup NAME [-wait]`: remove a PodGroup and every instance of it.
import { clientOptionDefs, waitOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { waitFor } from "../wait.ts";

const defs: OptionDef[] = [...waitOptionDefs, ...clientOptionDefs];

const help = `${usage("delete", "Deletes a PodGroup: its instances are removed (highest instance number first), then the group.", defs, "podgroup NAME")}
examples:
  capstan delete podgroup hello -wait
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [kind, name, ...extra] = args.positionals;
  if (kind !== "podgroup" && kind !== "pg") throw new UsageError(`what to delete: podgroup NAME${kind ? ` (not "${kind}")` : ""}`);
  if (name === undefined) throw new UsageError("NAME is required, e.g. capstan delete podgroup hello");
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  try {
    const client = clientFromOptions(args.options);
    await client.deletePodGroup(name);
    process.stdout.write(`podgroup/${name} deletion requested\n`);
    if (!args.options.wait) return 0;
    const ok = await waitFor(client, [{ kind: "deleted", name }], {
      timeoutMs: args.options.timeout as number,
      print: (l) => process.stdout.write(`${l}\n`),
    });
    return ok ? 0 : 1;
  } catch (e) {
    return reportFailure("delete", e);
  }
}
