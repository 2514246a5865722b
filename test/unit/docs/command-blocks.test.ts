// Every command block of README.md and docs/*.md is checked against the real CLI (docs/development.md,
// "Documentation checks"): each `capstan` command exists with the options it is given (asked of the
// command's own `-h`, in this process), each CAPSTAN_ variable set before a `capstan` command is one
// that command reads, each `npm run` script is in package.json, each file of the repository a command
// names (examples/, scripts/, test/, ...) is there. A block after `<!-- docs-check: skip REASON -->`
// is left out.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { main } from "../../../cli/main.ts";
import {
  capstanArgs,
  commandLines,
  fencedBlocks,
  helpOptions,
  leadingWords,
  simpleCommands,
  usedOptions,
  type CommandLine,
} from "./command-blocks.ts";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const docFiles = ["README.md", ...readdirSync(`${root}docs`).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
const scripts = Object.keys((JSON.parse(readFileSync(`${root}package.json`, "utf8")) as { scripts: Record<string, string> }).scripts);
/** Variables read directly, not through an option (docs/cli.md, "Environment variables"). */
const directVariables = new Set(["CAPSTAN_ADMIN_TOKEN", "CAPSTAN_STORE_PASSWORD", "CAPSTAN_OIDC_CLIENT_SECRET", "CAPSTAN_LOG_LEVEL"]);

/** `capstan ARGS`'s exit code and standard output, run in this process. */
async function capstan(args: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = "";
  const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
  try {
    return { code: await main(args), stdout };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

const helps = new Map<string, Promise<{ code: number; stdout: string }>>();
const helpOf = (words: string[]) => {
  const key = words.join("\0");
  if (!helps.has(key)) helps.set(key, capstan([...words, "-h"]));
  return helps.get(key)!;
};

/** What is wrong with one command line, if anything. */
async function problemsOf(cmd: CommandLine, commands: Set<string>): Promise<string[]> {
  const problems: string[] = [];
  const at = `${cmd.file}:${cmd.line}: ${cmd.text}`;
  for (const { assignments, words } of simpleCommands(cmd.text)) {
    for (const w of words) {
      const path = /^(?:\.\/)?((?:examples|scripts|test|docs|bench|cli|api|controllers|runtime|adapters)\/[\w./-]*\w)$/.exec(w)?.[1];
      if (path !== undefined && !existsSync(`${root}${path}`)) problems.push(`${at}\n    names ${path}, which is not in the repository`);
    }
    if (words[0] === "npm" && (words[1] === "run" || words[1] === "run-script") && words[2] !== undefined && !scripts.includes(words[2])) {
      problems.push(`${at}\n    npm script "${words[2]}" is not in package.json`);
    }
    const args = capstanArgs(words);
    if (args === undefined) continue;
    if (args.length === 0 || ["-h", "--help", "help", "--version", "version"].includes(args[0]!)) continue;
    if (!commands.has(args[0]!)) {
      problems.push(`${at}\n    capstan has no command "${args[0]}"`);
      continue;
    }
    const lead = leadingWords(args);
    const help = await helpOf(lead);
    if (help.code !== 0) {
      problems.push(`${at}\n    capstan ${lead.join(" ")} -h exits with ${help.code}`);
      continue;
    }
    const { options, variables } = helpOptions(help.stdout);
    for (const o of usedOptions(args)) {
      // -it: bundled one-letter flags.
      if (options.has(o) || (o.length > 1 && [...o].every((c) => options.has(c)) && !/-/.test(o))) continue;
      problems.push(`${at}\n    capstan ${lead.slice(0, 2).join(" ")} has no option -${o}`);
    }
    for (const v of Object.keys(assignments)) {
      if (v.startsWith("CAPSTAN_") && !variables.has(v) && !directVariables.has(v)) {
        problems.push(`${at}\n    capstan ${lead.slice(0, 2).join(" ")} does not read ${v} (its variables: capstan ${lead.slice(0, 2).join(" ")} -h)`);
      }
    }
  }
  return problems;
}

/** Every problem of a markdown text's command blocks. */
async function check(file: string, text: string): Promise<string[]> {
  const top = await capstan(["-h"]);
  const commands = new Set([...top.stdout.matchAll(/^ {2}([a-z][\w-]*) /gm)].map((m) => m[1]!));
  expect(commands.has("apply")).toBe(true);
  const lines = fencedBlocks(file, text)
    .filter((b) => b.mark !== "skip")
    .flatMap(commandLines);
  // One at a time: each run captures this process's standard output.
  const problems: string[] = [];
  for (const l of lines) problems.push(...(await problemsOf(l, commands)));
  return problems;
}

describe("the command blocks of README.md and docs/", () => {
  afterEach(() => vi.restoreAllMocks());

  it.each(docFiles)("%s: every command runs as written (commands, options, variables, scripts, files)", async (file) => {
    const problems = await check(file, readFileSync(`${root}${file}`, "utf8"));
    expect(problems, problems.join("\n")).toEqual([]);
  });

  it("docs/cli.md names every command of capstan -h", async () => {
    const top = await capstan(["-h"]);
    const commands = [...top.stdout.matchAll(/^ {2}([a-z][\w-]*) /gm)].map((m) => m[1]!);
    const cli = readFileSync(`${root}docs/cli.md`, "utf8");
    expect(commands.filter((c) => !cli.includes(`\`capstan ${c}`))).toEqual([]);
  });

  it("finds what a new user would trip over, and leaves out output, comments, here-documents and skipped blocks", async () => {
    const text = [
      "```sh",
      "CAPSTAN_WEB=:9000 capstan console -store sqlite://x.db   # the old variable",
      "capstan scale hello 3 -replicas 2 && capstan frobnicate",
      "npm run no-such-script",
      "TOKEN=$(capstan tokens create local -user a@b.c -rolle admin)",
      "capstan apply -f examples/missing.yaml \\",
      "    -wait",
      "cat > app.yaml <<'EOF'",
      "capstan nodes -not-an-option",
      "EOF",
      "capstan exec hello -it -- sh -c 'ls -z'",
      "```",
      "",
      "```",
      "$ capstan get podgroups -o json",
      "capstan get -this-is-output",
      "```",
      "",
      "<!-- docs-check: skip another tool's command line -->",
      "```sh",
      "capstan nodes -skipped",
      "```",
    ].join("\n");
    const problems = (await check("t.md", text)).map((p) => p.split("\n")[1]!.trim());
    expect(problems).toEqual([
      "capstan console does not read CAPSTAN_WEB (its variables: capstan console -h)",
      "capstan scale hello has no option -replicas",
      'capstan has no command "frobnicate"',
      'npm script "no-such-script" is not in package.json',
      "capstan tokens create has no option -rolle",
      "names examples/missing.yaml, which is not in the repository",
    ]);
  });
});
