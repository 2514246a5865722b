// docs/api-reference.md's Dependency schema tables against the generated OpenAPI document: each
// lists exactly the schema's fields (test/unit/api/reference-doc.test.ts checks the operations).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { openApiDocument } from "../../../api/orchestrator/openapi.ts";

const doc = readFileSync(new URL("../../../docs/api-reference.md", import.meta.url), "utf8");
const schemas = (openApiDocument() as { components: { schemas: Record<string, { properties?: Record<string, unknown> }> } }).components.schemas;

function table(heading: string): string[] {
  const start = doc.indexOf(`${heading}\n`);
  expect(start, `no "${heading}"`).toBeGreaterThanOrEqual(0);
  const rest = doc.slice(start + heading.length + 1);
  const next = rest.search(/^#{1,4} /m);
  return [...(next < 0 ? rest : rest.slice(0, next)).matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);
}

describe("docs/api-reference.md, dependencies", () => {
  it.each(["DependencyWithStatus", "DependencyPodStatus"])("lists exactly the fields of %s", (name) => {
    const fields = Object.keys(schemas[name]?.properties ?? {});
    expect(fields.length).toBeGreaterThan(0);
    expect(table(`#### ${name}`).sort()).toEqual(fields.sort());
  });
});
