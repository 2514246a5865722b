// docs/api-reference.md against the generated OpenAPI document: every operation has its section,
// every query parameter is in it, and every schema's field table lists exactly the schema's fields.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { openApiDocument } from "../../../api/orchestrator/openapi.ts";

const doc = readFileSync(new URL("../../../docs/api-reference.md", import.meta.url), "utf8");
const api = openApiDocument() as {
  paths: Record<string, Record<string, { parameters?: { name: string }[] }>>;
  components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
};

/** The text of a markdown section, from its heading to the next heading of the same or a higher level. */
function section(heading: string): string {
  const level = heading.match(/^#+/)![0].length;
  const start = doc.indexOf(`${heading}\n`);
  expect(start, `docs/api-reference.md has no "${heading}"`).toBeGreaterThanOrEqual(0);
  const rest = doc.slice(start + heading.length + 1);
  const next = rest.search(new RegExp(`^#{1,${level}} `, "m"));
  return next < 0 ? rest : rest.slice(0, next);
}

/** Backticked names in the first column of a section's table rows. */
function firstColumn(text: string): string[] {
  return [...text.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);
}

describe("docs/api-reference.md", () => {
  const operations = Object.entries(api.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ heading: `### \`${method.toUpperCase()} ${path}\``, op })),
  );

  it.each(operations.map((o) => [o.heading, o] as const))("documents %s and its parameters", (heading, { op }) => {
    const text = section(heading);
    expect(firstColumn(text).sort()).toEqual((op.parameters ?? []).map((p) => p.name).sort());
  });

  it.each(["PodGroupSpec", "PodSpec", "ContainerSpec", "PodGroupWithSpec", "PodStatus", "ContainerStatus", "Accepted", "LogRecord"])(
    "lists exactly the fields of %s",
    (name) => {
      const fields = Object.keys(api.components.schemas[name]?.properties ?? {});
      expect(fields.length).toBeGreaterThan(0);
      expect(firstColumn(section(`#### ${name}`)).sort()).toEqual(fields.sort());
    },
  );
});
