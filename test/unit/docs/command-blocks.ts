// The command lines of the documentation's fenced blocks (README.md, docs/*.md), split into simple
// commands the checker can compare with the real CLI (command-blocks.test.ts). Plain functions, no I/O.
//
// Which lines are commands: every line of a `sh`, `bash` or `shell` block; in a `console` block or
// a block without a language, only the lines that start with `$ ` (the rest is output). Lines
// ending in `\` continue on the next; a here-document's body is skipped; `#` starts a comment.
// A block right after `<!-- docs-check: skip REASON -->` is not checked; one after
// `<!-- docs-check: no-run REASON -->` is checked but not run by test/e2e/docs-blocks.test.ts
// (docs/development.md, "Documentation checks").

export interface Block {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  /** The marker comment right before the block: "skip", "no-run", or undefined. */
  mark: string | undefined;
  body: string[];
}

export interface CommandLine {
  file: string;
  /** 1-based line where the command starts. */
  line: number;
  text: string;
}

/** One simple command: leading VAR=value assignments, then its words (quotes removed). */
export interface SimpleCommand {
  assignments: Record<string, string>;
  words: string[];
}

const shellLangs = new Set(["sh", "bash", "shell", "console", ""]);

export function fencedBlocks(file: string, text: string): Block[] {
  const lines = text.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    let prev = i - 1;
    while (prev >= 0 && lines[prev]!.trim() === "") prev--;
    const mark = prev >= 0 ? /<!--\s*docs-check:\s*([\w-]+)/.exec(lines[prev]!)?.[1] : undefined;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      if (lines[j]!.trim().startsWith(fence!) && lines[j]!.trim().replace(/[`~]/g, "") === "") break;
      body.push(lines[j]!.startsWith(indent!) ? lines[j]!.slice(indent!.length) : lines[j]!.trimStart());
    }
    blocks.push({ file, line: i + 1, lang: lang!.toLowerCase(), mark, body });
    i = j;
  }
  return blocks;
}

/** The command lines of a block (none for a block that is not shell). */
export function commandLines(block: Block): CommandLine[] {
  if (!shellLangs.has(block.lang)) return [];
  const promptOnly = block.lang === "console" || block.lang === "";
  const out: CommandLine[] = [];
  let heredocEnd: string | undefined;
  for (let i = 0; i < block.body.length; i++) {
    let line = block.body[i]!;
    if (heredocEnd !== undefined) {
      if (line.trim() === heredocEnd) heredocEnd = undefined;
      continue;
    }
    if (line.startsWith("$ ")) line = line.slice(2);
    else if (promptOnly) continue;
    const start = i;
    while (line.endsWith("\\") && i + 1 < block.body.length) line = `${line.slice(0, -1)} ${block.body[++i]!.trim()}`;
    const text = stripComment(line).trim();
    const doc = /<<-?\s*['"]?(\w+)['"]?/.exec(text);
    if (doc) heredocEnd = doc[1];
    if (text !== "") out.push({ file: block.file, line: block.line + 1 + start, text });
  }
  return out;
}

/** `line` without a `#` comment (a `#` at the start or after a blank, outside quotes). */
function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"') i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "\\") i++;
    else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i);
  }
  return line;
}

/**
 * The simple commands of a command line: split at `&&`, `||`, `;`, `|` and `&` outside quotes;
 * each `$(...)` inside is a command of its own (its place in the outer command holds "$(...)").
 * Redirections (`< file`, `2>/dev/null`) are dropped.
 */
export function simpleCommands(text: string): SimpleCommand[] {
  const found: SimpleCommand[] = [];
  const pieces: string[][] = [[]];
  let word: string | undefined;
  const endWord = () => {
    if (word !== undefined) pieces.at(-1)!.push(word);
    word = undefined;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      const close = findClose(text, i, c);
      word = (word ?? "") + text.slice(i + 1, close).replace(/\$\((.*?)\)/g, (_m, inner: string) => {
        found.push(...simpleCommands(inner));
        return "$(...)";
      });
      i = close;
    } else if (c === "$" && text[i + 1] === "(") {
      let depth = 0;
      let j = i + 1;
      for (; j < text.length; j++) {
        if (text[j] === "(") depth++;
        else if (text[j] === ")" && --depth === 0) break;
      }
      found.push(...simpleCommands(text.slice(i + 2, j)));
      word = (word ?? "") + "$(...)";
      i = j;
    } else if (c === "\\") {
      word = (word ?? "") + (text[i + 1] ?? "");
      i++;
    } else if (/\s/.test(c)) endWord();
    else if (c === "&" || c === "|" || c === ";") {
      endWord();
      if (text[i + 1] === c) i++;
      pieces.push([]);
    } else word = (word ?? "") + c;
  }
  endWord();
  for (const words of pieces) {
    const clean: string[] = [];
    for (let k = 0; k < words.length; k++) {
      const w = words[k]!;
      if (/^\d?[<>]+&?\d*$/.test(w)) {
        k++; // `< file`, `2> err`: the target too
        continue;
      }
      if (/^\d?[<>]/.test(w)) continue; // `2>/dev/null`, `>out`
      clean.push(w);
    }
    const assignments: Record<string, string> = {};
    while (clean.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(clean[0]!)) {
      const [name, ...value] = clean.shift()!.split("=");
      assignments[name!] = value.join("=");
    }
    if (clean.length > 0 || Object.keys(assignments).length > 0) found.push({ assignments, words: clean });
  }
  return found;
}

function findClose(text: string, open: number, quote: string): number {
  for (let i = open + 1; i < text.length; i++) {
    if (text[i] === "\\" && quote === '"') i++;
    else if (text[i] === quote) return i;
  }
  return text.length;
}

/** The capstan words of a command (after `capstan`, `npx capstan` or the bin script), or undefined. */
export function capstanArgs(words: string[]): string[] | undefined {
  let w = words;
  while (w.length > 0 && ["sudo", "env", "nohup", "time", "exec"].includes(w[0]!)) w = w.slice(1);
  if (w[0] === "npx" && w[1] === "capstan") return w.slice(2);
  if (w[0] === "capstan" || /(^|\/)cli\/bin\/capstan\.mjs$/.test(w[0] ?? "")) return w.slice(1);
  return undefined;
}

/** The options a capstan command line uses (names without dashes or values), before any `--`. */
export function usedOptions(args: string[]): string[] {
  const out: string[] = [];
  for (const a of args) {
    if (a === "--") break;
    if (!a.startsWith("-") || a === "-" || /^-\d+$/.test(a)) continue;
    out.push(a.replace(/^--?/, "").split("=")[0]!);
  }
  return out;
}

/** The words before the first option: the command, its sub-command and positionals. */
export function leadingWords(args: string[]): string[] {
  const i = args.findIndex((a) => a.startsWith("-") && a !== "-" && !/^-\d+$/.test(a));
  return i < 0 ? args : args.slice(0, i);
}

/** `-h` text: the options it lists (long names and short aliases) and the variables it names. */
export function helpOptions(help: string): { options: Set<string>; variables: Set<string> } {
  const options = new Set<string>();
  for (const m of help.matchAll(/^ {2}-([\w-]+)(?:, -([\w-]+))?/gm)) {
    options.add(m[1]!);
    if (m[2]) options.add(m[2]);
  }
  const variables = new Set([...help.matchAll(/\[(CAPSTAN_[A-Z0-9_]+)\]/g)].map((m) => m[1]!));
  return { options, variables };
}
