// `capstan build -f app.yaml [-C DIR] [-docker HOST]`: the build image of an app's source, on a
// Docker engine, from build.base and build.script (docs/build.md).
import { build, interruptSignal } from "../../adapters/build/pipeline.ts";
import { buildOptionDefs, loadBuild, reportBuildFailure } from "../build-options.ts";
import { parseArgs, usage, UsageError } from "../options.ts";

const defs = [...buildOptionDefs];

const help = `${usage(
  "build",
  "Builds an app's build image on a Docker engine: a container of build.base with the source in\n/platform/app runs build.script line by line; the result is committed as <app>:build-...\nA build whose base, script and source are unchanged reuses the image it made before.",
  defs,
)}
example:
  capstan build -f app.yaml
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
    const { ctx } = await loadBuild("build", args.options);
    ctx.signal = interrupt.signal;
    const started = Date.now();
    const b = (await build(ctx))!;
    process.stderr.write(`capstan: ${b.cached ? "unchanged, reused" : "built"} ${b.image} (${b.id.slice(7, 19)}) in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
    process.stdout.write(`${b.image}\n`);
    return 0;
  } catch (e) {
    return reportBuildFailure("build", e);
  } finally {
    interrupt.dispose();
  }
}
