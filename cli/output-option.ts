// `-o table|json` (`-output`), one option for every command that prints records (docs/cli.md,
// "Options"): a table or text for people, the server's records as JSON for programs. `-json`, the
// older spelling of two commands, is kept as a deprecated alias of `-o json`.
import { UsageError, type OptionDef, type OptionValues } from "./options.ts";

export function outputOptionDef(formats: readonly [string, ...string[]], json: string): OptionDef {
  return { name: "output", short: "o", type: "string", help: `${formats.join(" or ")} (json: ${json})`, default: formats[0] };
}

/** The deprecated `-json` flag of the commands that had it (events, nodes). */
export const jsonAliasDef: OptionDef = { name: "json", type: "bool", help: "the same as -o json", deprecated: "use -o json" };

/** The chosen format, checked against `formats`; `-json` means json. */
export function outputFormat(options: OptionValues, formats: readonly string[]): string {
  if (options.json === true) return "json";
  const output = String(options.output ?? formats[0]);
  if (!formats.includes(output)) throw new UsageError(`-output: "${output}" is not ${formats.join(" or ")}`);
  return output;
}
