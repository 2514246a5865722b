// Reading a YAML configuration file so that every problem names its place: `FILE:LINE: key.path:
// message`, at the line of the key or value that is wrong. The application definition
// (docs/deploy.md) and the auth proxy's config.yaml (docs/authproxy.md) are read with it. The reader
// collects problems rather than throwing at the first, so a user fixes a file in one pass.
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type Pair } from "yaml";

export type FieldHandler = (value: Node | null, key: string, pair: Pair) => void;

export interface YamlReader {
  /** The document's top node (aliases resolved); null for an empty file. */
  root: Node | null;
  /** Problems so far, each `FILE:LINE: key: message`. */
  problems: string[];
  /** `FILE:LINE` of a node. */
  at(node: Node | Pair | null | undefined): string;
  fail(node: Node | Pair | null | undefined, key: string, message: string): void;
  resolve(node: unknown): Node | null;
  /** Walk a mapping: `known` keys go to their handler; others to `unknown`, or are problems. */
  fields(map: Node, prefix: string, known: Record<string, FieldHandler>, unknown?: (key: string, pair: Pair) => void): void;
  string(node: Node | null, key: string, pair: Pair, opts?: { empty?: boolean }): string | undefined;
  strings(node: Node | null, key: string, pair: Pair): string[];
  boolean(node: Node | null, key: string, pair: Pair): boolean | undefined;
  /** True when `node` is a mapping; a problem otherwise. */
  section(node: Node | null, key: string, pair: Pair): boolean;
}

/**
 * Parse `text`; a syntax error is answered as `{ syntax: problems }`, since nothing can be read
 * from a document YAML itself refuses.
 */
export function readYaml(text: string, file: string): YamlReader | { syntax: string[] } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const lineAt = (offset: number) => `${file}:${lines.linePos(offset).line}`;
  if (doc.errors.length > 0) return { syntax: doc.errors.map((e) => `${lineAt(e.pos[0])}: ${e.message}`) };

  const problems: string[] = [];
  const at = (node: Node | Pair | null | undefined) => lineAt(offsetOf(node));
  const fail = (node: Node | Pair | null | undefined, key: string, message: string) => {
    problems.push(`${at(node)}: ${key ? `${key}: ` : ""}${message}`);
  };
  const resolve = (n: unknown): Node | null => (isAlias(n) ? (n.resolve(doc as Document) ?? null) : ((n as Node | null) ?? null));
  const fields: YamlReader["fields"] = (map, prefix, known, unknown) => {
    if (!isMap(map)) return;
    for (const pair of map.items) {
      const keyNode = pair.key as Node | null;
      const name = isScalar(keyNode) ? String(keyNode.value) : "";
      const path = prefix ? `${prefix}.${name}` : name;
      const handler = Object.hasOwn(known, name) ? known[name] : undefined;
      if (handler) handler(resolve(pair.value), path, pair);
      else if (unknown) unknown(path, pair);
      else fail(keyNode, path, `unknown key (known: ${Object.keys(known).join(", ")})`);
    }
  };
  const string: YamlReader["string"] = (node, key, pair, { empty = false } = {}) => {
    if (!isScalar(node) || typeof node.value !== "string") {
      fail(node ?? pair, key, "must be a string");
      return undefined;
    }
    if (!empty && node.value.trim() === "") {
      fail(node, key, "must not be empty");
      return undefined;
    }
    return node.value;
  };
  const strings: YamlReader["strings"] = (node, key, pair) => {
    if (!isSeq(node)) {
      fail(node ?? pair, key, "must be a list of strings");
      return [];
    }
    const out: string[] = [];
    node.items.forEach((item, i) => {
      const v = string(resolve(item), `${key}[${i}]`, pair);
      if (v !== undefined) out.push(v);
    });
    return out;
  };
  const boolean: YamlReader["boolean"] = (node, key, pair) => {
    if (isScalar(node) && typeof node.value === "boolean") return node.value;
    fail(node ?? pair, key, "must be true or false");
    return undefined;
  };
  const section: YamlReader["section"] = (node, key, pair) => {
    if (isMap(node)) return true;
    fail(node ?? pair, key, "must be a mapping");
    return false;
  };
  return { root: resolve(doc.contents), problems, at, fail, resolve, fields, string, strings, boolean, section };
}

function offsetOf(node: Node | Pair | null | undefined): number {
  if (!node) return 0;
  if ("range" in node && node.range) return node.range[0];
  const key = (node as Pair).key as Node | null;
  return key?.range?.[0] ?? 0;
}
