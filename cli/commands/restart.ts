// `capstan restart NAME`: a rolling restart of a PodGroup (POST /api/podgroups/restart; docs/cli.md).
// Every instance gets a fresh container, one at a time, the way a spec update is rolled out; the
// pod spec and its version do not change.
import { clientOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [...clientOptionDefs];

const help = `${usage(
  "restart",
  "Restarts a PodGroup's instances one at a time, as a spec update is rolled out: each is replaced by a fresh container, and a replacement that fails its runtime check stops the rollout. The spec and its version stay; capstan get podgroup NAME shows when the restart was asked for.",
  defs,
  "NAME",
)}
examples:
  capstan restart hello
  capstan restart hello && capstan get podgroup hello
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [name, ...extra] = args.positionals;
  if (name === undefined) throw new UsageError("NAME is required, e.g. capstan restart hello");
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  try {
    const client = clientFromOptions(args.options);
    const answer = await client.restartPodGroup(name);
    process.stdout.write(`podgroup/${name} restart requested: ${answer.message}\n`);
    return 0;
  } catch (e) {
    return reportFailure("restart", e);
  }
}
