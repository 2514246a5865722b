// `apply -f` files: YAML or JSON (JSON is YAML 1.2, so one parser reads both), one PodGroup per
// document (`---` separates several). Each document is validated with the API's own schema before
// anything is sent, and every problem is reported as `file:line:col: path: message`, pointing at
// the line the problem is on: a syntax error where the parser stopped, a bad value at its key, an
// unknown field at that field, a missing field at the object that lacks it.
import { readFile } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { isMap, isPair, isScalar, isSeq, LineCounter, parseAllDocuments, type Document, type Node } from "yaml";
import type { z } from "zod";
import { formatPath } from "../api/resources/issue-paths.ts";
import { PodGroupSpecInput, type PodGroupSpec } from "../api/resources/podgroup.ts";
import { UsageError } from "./options.ts";

export class ManifestError extends Error {
  override readonly name = "ManifestError";
  constructor(
    readonly file: string,
    /** One line per problem, each `file:line:col: message`. */
    readonly problems: string[],
  ) {
    super(problems.join("\n"));
  }
}

/**
 * Read `file` ("-" = standard input) and parse it. A file that is not there or cannot be read is a
 * usage error naming -f and the path (with the absolute path, when the working folder is the surprise).
 */
export async function readManifest(file: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<PodGroupSpec[]> {
  let text: string;
  try {
    text = file === "-" ? await readAll(stdin) : await readFile(file, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const where = isAbsolute(file) ? file : `${file} (${resolve(file)})`;
    if (code === "ENOENT") throw new UsageError(`-f ${where}: the file does not exist`);
    if (code === "EISDIR") throw new UsageError(`-f ${where}: is a folder, not a file`);
    if (code === "EACCES" || code === "EPERM") throw new UsageError(`-f ${where}: cannot read the file (${code})`);
    throw new ManifestError(file, [`${file}: ${(e as Error).message}`]);
  }
  return parseManifest(text, file === "-" ? "<stdin>" : file);
}

export function parseManifest(text: string, file: string): PodGroupSpec[] {
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: false });
  const where = (offset: number): string => {
    const at = lines.linePos(offset);
    return `${file}:${at.line}:${at.col}`;
  };

  const problems: string[] = [];
  const specs: PodGroupSpec[] = [];
  // A stream without documents (empty, or comments only) still carries its own syntax errors.
  if ("empty" in docs) for (const e of docs.errors) problems.push(`${where(e.pos[0])}: ${e.message}`);
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      for (const e of doc.errors) problems.push(`${where(e.pos[0])}: ${e.message}`);
      continue;
    }
    const data: unknown = doc.toJS();
    if (data === null || data === undefined) continue; // an empty document (a stray `---`)
    const result = PodGroupSpecInput.safeParse(data);
    if (result.success) {
      specs.push(result.data);
      continue;
    }
    for (const issue of result.error.issues) {
      const { offset, found } = locate(doc, issue);
      const path = issue.path.length > 0 ? `${formatPath(issue.path, "")}: ` : "";
      // zod says "expected string, received undefined" for a field that is simply not there.
      const message = !found && issue.code === "invalid_type" ? "required, but missing" : issue.message;
      problems.push(`${where(offset)}: ${path}${message}`);
    }
  }
  if (problems.length > 0) throw new ManifestError(file, problems);
  if (specs.length === 0) throw new ManifestError(file, [`${file}: no PodGroup in the file`]);
  return specs;
}

/**
 * Where in the source `issue` is: the node at its path, followed as far as it exists (`found`:
 * all the way). Paths use the schema's spelling and the source may use any letter case (keys are
 * case-insensitive), so keys are matched case-insensitively. An unknown key is located at that key.
 */
function locate(doc: Document, issue: z.core.$ZodIssue): { offset: number; found: boolean } {
  const path: PropertyKey[] = [...issue.path];
  if (issue.code === "unrecognized_keys" && issue.keys[0] !== undefined) path.push(issue.keys[0]);
  let node: unknown = doc.contents;
  let offset = (doc.contents as Node | null)?.range?.[0] ?? 0;
  for (const segment of path) {
    if (isMap(node)) {
      const want = String(segment).toLowerCase();
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value).toLowerCase() === want);
      if (!pair) return { offset, found: false };
      offset = (pair.key as Node).range?.[0] ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === "number") {
      const item = node.items[segment] as Node | undefined;
      if (!item) return { offset, found: false };
      offset = item.range?.[0] ?? offset;
      node = item;
    } else {
      return { offset, found: false };
    }
  }
  return { offset, found: true };
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString("utf8");
}
