// Command-line options in Go style (`-web :9000`; docs/cli.md, "Options"), with the GNU forms
// accepted too (`--web :9000`, `--web=:9000`, `-web=:9000`). Every option also reads one environment
// variable (docs/cli.md, "Environment variables"): CAPSTAN_<COMMAND>_<OPTION> (`capstan console
// -web` reads CAPSTAN_CONSOLE_WEB), so a variable set for one server never reaches another; the few
// options that name the same thing in every command (which store, engines, server, token, CA) read
// CAPSTAN_<OPTION>. The command line wins over the environment, the environment over the default.
// Unknown options and bad values are errors that name the option.
import { formatDuration, parseDuration } from "../runtime/duration.ts";

export type OptionType = "string" | "duration" | "int" | "bool";

export interface OptionDef {
  name: string;
  type: OptionType;
  help: string;
  default?: string | number | boolean;
  /** Short alias, e.g. "f" for -f. */
  short?: string;
  /** Kept for old command lines only: -h marks it, and using it prints this advice (e.g. "use -o json"). */
  deprecated?: string;
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

/**
 * Options whose variable is CAPSTAN_<OPTION> in every command that has them: each names one thing
 * for a whole installation or shell (the store and its credentials, the Docker engines, the
 * orchestrator, the client's token and CA). Every other option's variable carries its command.
 */
export const sharedEnvOptions: ReadonlySet<string> = new Set([
  "server",
  "context",
  "token",
  "ca",
  "request-timeout",
  "store",
  "store-ca",
  "store-cert",
  "store-key",
  "store-user",
  "store-password-file",
  "cluster",
  "docker-tls-ca",
  "docker-tls-cert",
  "docker-tls-key",
  "root-token",
]);

/** The command this process runs (`console`), set once by cli/main.ts; its options' variables carry it. */
let processCommand: string | undefined;
/** Every command's name, so that a variable of another command is not mistaken for a stale one. */
let commandNames: readonly string[] = [];

export function setEnvCommand(command: string | undefined, allCommands: readonly string[] = []): void {
  processCommand = command;
  commandNames = allCommands;
}

const upper = (s: string) => s.toUpperCase().replace(/-/g, "_");

/**
 * The variable option `option` of `command` reads: CAPSTAN_CONSOLE_WEB for `console` and `web`,
 * CAPSTAN_STORE for `store` (shared). Only the command's first word counts (`secrets init` is
 * `secrets`). Without a command (code that parses options outside the CLI): CAPSTAN_<OPTION>.
 */
export function envName(option: string, command: string | undefined = processCommand): string {
  const word = command?.trim().split(/\s+/)[0];
  if (word === undefined || word === "" || sharedEnvOptions.has(option)) return `CAPSTAN_${upper(option)}`;
  return `CAPSTAN_${upper(word)}_${upper(option)}`;
}

export interface ParseOptions {
  /** The command whose variables are read (default: the one cli/main.ts runs). */
  command?: string;
  /** Where advice goes (a deprecated option, a variable that is not read); default standard error. */
  warn?: (line: string) => void;
}

export function parseArgs(
  argv: string[],
  defs: OptionDef[],
  env: Record<string, string | undefined> = process.env,
  parse: ParseOptions = {},
): ParsedArgs {
  const command = parse.command ?? processCommand;
  const warn = parse.warn ?? ((line: string) => process.stderr.write(`${line}\n`));
  const byName = new Map<string, OptionDef>();
  for (const d of defs) {
    byName.set(d.name, d);
    if (d.short) byName.set(d.short, d);
  }
  const options: OptionValues = {};
  const positionals: string[] = [];
  let help = false;
  const deprecatedUsed = new Set<OptionDef>();

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    // `-1` is a negative number, not an option: the command then says what it thinks of it
    // (`capstan scale web -1`: "N: the count must be >= 0").
    if (!arg.startsWith("-") || arg === "-" || (/^-\d+(\.\d+)?$/.test(arg) && !byName.has(arg.slice(1)))) {
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
    if (def.deprecated !== undefined) deprecatedUsed.add(def);
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
    const variable = envName(d.name, command);
    const fromEnv = env[variable];
    if (fromEnv !== undefined && fromEnv !== "") options[d.name] = convert(d, fromEnv, variable);
    else {
      if (!help) {
        const stale = staleVariable(d.name, variable, env);
        if (stale !== undefined) warn(`capstan ${command ?? ""}: ${stale} is not read: -${d.name} reads ${variable} (docs/cli.md, "Environment variables")`);
      }
      if (d.default !== undefined) options[d.name] = typeof d.default === "string" ? convert(d, d.default, `-${d.name}`) : d.default;
    }
  }
  if (!help) for (const d of deprecatedUsed) warn(`capstan${command ? ` ${command}` : ""}: -${d.name} is deprecated: ${d.deprecated}`);
  return { options, positionals, help };
}

/**
 * CAPSTAN_<OPTION> when it is set but this command reads another variable for the option: the
 * name of an earlier release (or of another command) that someone expects to work. A name that is
 * another command's own variable (CAPSTAN_REGISTRY_WEB for `capstan up -registry-web`) is left alone.
 */
function staleVariable(option: string, variable: string, env: Record<string, string | undefined>): string | undefined {
  const plain = `CAPSTAN_${upper(option)}`;
  if (plain === variable || env[plain] === undefined || env[plain] === "") return undefined;
  if (commandNames.some((c) => plain.startsWith(`CAPSTAN_${upper(c)}_`))) return undefined;
  return plain;
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
    const old = d.deprecated !== undefined ? ` (deprecated: ${d.deprecated})` : "";
    return [flag, `${d.help}${def}${old} [${envName(d.name, command)}]`] as const;
  });
  const w = Math.max(...rows.map((r) => r[0].length), 8);
  for (const [f, h] of rows) lines.push(`  ${f.padEnd(w)}  ${h}`);
  lines.push("  -h, -help" + " ".repeat(Math.max(2, w - 8)) + "  show this help");
  return lines.join("\n") + "\n";
}
