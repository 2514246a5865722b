// Command-line options in Go style (`-web :9000`; docs/cli.md, "Options"), with the GNU forms
// accepted too (`--web :9000`, `--web=:9000`, `-web=:9000`). Every option also reads an environment
// variable (CAPSTAN_<NAME>, dashes as underscores); the command line wins over the environment, the
// environment over the default. Unknown options and bad values are errors that name the option.
import { formatDuration, parseDuration } from "./duration.ts";

export type OptionType = "string" | "duration" | "int" | "bool";

export interface OptionDef {
  name: string;
  type: OptionType;
  help: string;
  default?: string | number | boolean;
  /** Short alias, e.g. "f" for -f. */
  short?: string;
}

export type OptionValues = Record<string, string | number | boolean | undefined>;

export interface ParsedArgs {
  options: OptionValues;
  positionals: string[];
  help: boolean;
}

export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** Option `-name`'s value as an absolute http:// or https:// URL; a usage error names what is wrong. */
export function httpUrlOption(name: string, raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`-${name}: "${raw}" is not an absolute URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new UsageError(`-${name}: "${raw}" must be an https:// URL`);
  return url;
}

export function envName(option: string): string {
  return `CAPSTAN_${option.toUpperCase().replace(/-/g, "_")}`;
}

export function parseArgs(
  argv: string[],
  defs: OptionDef[],
  env: Record<string, string | undefined> = process.env,
): ParsedArgs {
  const byName = new Map<string, OptionDef>();
  for (const d of defs) {
    byName.set(d.name, d);
    if (d.short) byName.set(d.short, d);
  }
  const options: OptionValues = {};
  const positionals: string[] = [];
  let help = false;

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      positionals.push(arg);
      continue;
    }
    const body = arg.replace(/^--?/, "");
    const eq = body.indexOf("=");
    const name = eq >= 0 ? body.slice(0, eq) : body;
    if (name === "h" || name === "help") {
      help = true;
      continue;
    }
    const def = byName.get(name);
    if (!def) throw new UsageError(`unknown option -${name}`);
    let raw: string | undefined = eq >= 0 ? body.slice(eq + 1) : undefined;
    if (def.type === "bool") {
      // A bool takes no separate value (`-force`), or an attached one (`-force=false`).
      options[def.name] = raw === undefined ? true : convert(def, raw, `-${name}`);
      continue;
    }
    if (raw === undefined) {
      raw = argv[++i];
      if (raw === undefined) throw new UsageError(`option -${name} needs a value`);
    }
    options[def.name] = convert(def, raw, `-${name}`);
  }

  for (const d of defs) {
    if (options[d.name] !== undefined) continue;
    const fromEnv = env[envName(d.name)];
    if (fromEnv !== undefined && fromEnv !== "") options[d.name] = convert(d, fromEnv, envName(d.name));
    else if (d.default !== undefined) options[d.name] = typeof d.default === "string" ? convert(d, d.default, `-${d.name}`) : d.default;
  }
  return { options, positionals, help };
}

function convert(def: OptionDef, raw: string, where: string): string | number | boolean {
  switch (def.type) {
    case "string":
      return raw;
    case "duration":
      try {
        return parseDuration(raw);
      } catch (e) {
        throw new UsageError(`${where}: ${(e as Error).message}`);
      }
    case "int": {
      if (!/^-?\d+$/.test(raw.trim())) throw new UsageError(`${where}: "${raw}" is not a whole number`);
      return Number(raw);
    }
    case "bool": {
      const v = raw.trim().toLowerCase();
      if (["1", "true", "yes", "on"].includes(v)) return true;
      if (["0", "false", "no", "off"].includes(v)) return false;
      throw new UsageError(`${where}: "${raw}" is not true or false`);
    }
  }
}

/** The `-h` text: one line per option with its default and environment variable. */
export function usage(command: string, summary: string, defs: OptionDef[], extra = ""): string {
  const lines = [`usage: capstan ${command} [options]${extra ? " " + extra : ""}`, "", summary, "", "options:"];
  const rows = defs.map((d) => {
    const flag = `-${d.name}${d.short ? `, -${d.short}` : ""}${d.type === "bool" ? "" : ` ${d.type === "duration" ? "DURATION" : d.type === "int" ? "N" : "VALUE"}`}`;
    const def =
      d.default === undefined ? "" : ` (default ${d.type === "duration" && typeof d.default === "number" ? formatDuration(d.default) : String(d.default)})`;
    return [flag, `${d.help}${def} [${envName(d.name)}]`] as const;
  });
  const w = Math.max(...rows.map((r) => r[0].length), 8);
  for (const [f, h] of rows) lines.push(`  ${f.padEnd(w)}  ${h}`);
  lines.push("  -h, -help" + " ".repeat(Math.max(2, w - 8)) + "  show this help");
  return lines.join("\n") + "\n";
}
