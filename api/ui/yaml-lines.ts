// Where an API error's field is in the YAML a user typed: `containers[0].memoryLimit` becomes the
// line of that key, so the web console shows each error next to its line (docs/web-console.md).
import { isMap, isSeq, LineCounter, parseDocument, type Node } from "yaml";

export interface ParsedYaml {
  value: unknown;
  /** Line (1-based) of the field at an API path, when the document has it. */
  lineOf(path: string): number | undefined;
}

/** Parses YAML; a syntax error comes back as `{ syntax: [{ line, message }] }`. */
export function parseYamlForm(text: string): ParsedYaml | { syntax: { line: number; message: string }[] } {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, prettyErrors: false });
  if (doc.errors.length > 0) return { syntax: doc.errors.map((e) => ({ line: counter.linePos(e.pos[0]).line, message: e.message.split("\n")[0]! })) };
  let value: unknown;
  try {
    // Throws on an unresolved alias, or an alias expansion past the library's limit (a "billion laughs").
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    return { syntax: [{ line: 1, message: (e as Error).message.split("\n")[0]! }] };
  }
  return {
    value,
    lineOf(path) {
      let node: unknown = doc.contents;
      let line: number | undefined;
      for (const step of splitPath(path)) {
        if (isMap(node)) {
          const pair = node.items.find((p) => String((p.key as { value?: unknown } | null)?.value ?? p.key).toLowerCase() === String(step).toLowerCase());
          if (pair === undefined) break;
          const key = pair.key as Node | null;
          if (key?.range) line = counter.linePos(key.range[0]).line;
          node = pair.value;
        } else if (isSeq(node) && typeof step === "number") {
          const item = node.items[step] as Node | undefined;
          if (item === undefined) break;
          if (item.range) line = counter.linePos(item.range[0]).line;
          node = item;
        } else {
          break;
        }
      }
      return line;
    },
  };
}

/** "pod.containers[0].image" -> ["pod", "containers", 0, "image"]. */
export function splitPath(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  return out;
}
