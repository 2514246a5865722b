// `capstan test -f app.yaml`: test.script in a container of the current build image (docs/build.md).
import { interruptSignal, test } from "../../adapters/build/pipeline.ts";
import { buildOptionDefs, loadBuild, reportBuildFailure } from "../build-options.ts";
import { parseArgs, usage, UsageError } from "../options.ts";

const defs = [...buildOptionDefs];

const help = `${usage(
  "test",
  "Runs test.script, line by line, in a container of the app's build image for the source as it is\nnow (capstan build first). A failing line fails the command with that line's exit code.",
  defs,
)}
example:
  capstan build -f app.yaml && capstan test -f app.yaml
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
  // SIGINT, SIGTERM: the running step removes its container and the command ends 130 / 143.
  const interrupt = interruptSignal();
  try {
    const { ctx } = await loadBuild("test", args.options, "stdout");
    ctx.signal = interrupt.signal;
    const r = await test(ctx);
    process.stderr.write(`capstan: test.script passed on ${r.build.image}\n`);
    return 0;
  } catch (e) {
    return reportBuildFailure("test", e);
  } finally {
    interrupt.dispose();
  }
}
