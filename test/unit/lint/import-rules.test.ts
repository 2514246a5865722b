// The import rules of docs/development.md ("Conventions") as eslint.config.js enforces them: small
// in-memory files, linted with the project's own config as if they sat in each folder, must trip
// no-restricted-imports when they cross a rule and must not when they stay inside it.
//
// The snippets are not on disk, so type-aware linting (projectService) is switched off for them
// with typescript-eslint's disableTypeChecked; the import rules need no types.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ESLint } from "eslint";
import tseslint from "typescript-eslint";
import { beforeAll, describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
let eslint: ESLint;

beforeAll(() => {
  eslint = new ESLint({ cwd: root, overrideConfig: { ...tseslint.configs.disableTypeChecked, files: ["**/*.ts"] } });
});

/** The no-restricted-imports messages for `code` as the file `file` (root-relative). */
async function restricted(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file), warnIgnored: true });
  expect(result, file).toBeDefined();
  const messages = result!.messages;
  expect(messages.filter((m) => m.fatal), `${file} did not parse`).toEqual([]);
  return messages.filter((m) => m.ruleId === "no-restricted-imports").map((m) => m.message);
}

const importOf = (spec: string) => `import ${JSON.stringify(spec)};\n`;

// [importing file, import as written]
const forbidden: [string, string][] = [
  ["runtime/probe.ts", "../adapters/store/store.ts"],
  ["runtime/probe.ts", "../api/resources/podgroup.ts"],
  ["runtime/probe.ts", "../controllers/shared/settle.ts"],
  ["runtime/probe.ts", "../cli/main.ts"],
  ["runtime/sub/probe.ts", "../../adapters/store/store.ts"],
  ["adapters/store/probe.ts", "../../controllers/podgroup/index.ts"],
  ["adapters/store/probe.ts", "../../api/resources/keys.ts"],
  ["adapters/cluster/probe.ts", "../../cli/main.ts"],
  ["adapters/store/probe.ts", "../../test/helpers/services.ts"],
  ["controllers/podgroup/probe.ts", "../dependency/index.ts"],
  ["controllers/podgroup/probe.ts", "../../controllers/node/monitor.ts"],
  ["controllers/registrygc/probe.ts", "../podgroup/index.ts"],
  ["controllers/shared/probe.ts", "../podgroup/index.ts"],
  ["controllers/podgroup/probe.ts", "../../api/http/validation.ts"],
  ["controllers/registrygc/probe.ts", "../../api/registry/blobs.ts"],
  ["controllers/podgroup/probe.ts", "../../cli/main.ts"],
  ["controllers/podgroup/probe.ts", "../../bench/lib/report.ts"],
  ["controllers/podgroup/probe.ts", "./../../api/orchestrator/records.ts"],
  ["api/orchestrator/probe.ts", "../../controllers/podgroup/index.ts"],
  ["api/orchestrator/probe.ts", "../../cli/main.ts"],
  ["api/ui/pages/probe.ts", "../../../controllers/shared/settle.ts"],
  ["api/resources/probe.ts", "../http/validation.ts"],
  ["api/resources/probe.ts", "../../api/registry/blobs.ts"],
  ["api/resources/probe.ts", "../../controllers/shared/settle.ts"],
  ["cli/probe.ts", "../test/helpers/services.ts"],
  ["cli/commands/probe.ts", "../../bench/lib/report.ts"],
];

const allowed: [string, string][] = [
  ["runtime/probe.ts", "./clock.ts"],
  ["runtime/sub/probe.ts", "../clock.ts"],
  ["adapters/store/probe.ts", "./store.ts"],
  ["adapters/store/probe.ts", "../../runtime/clock.ts"],
  ["controllers/podgroup/probe.ts", "./reconciler.ts"],
  ["controllers/podgroup/probe.ts", "../shared/settle.ts"],
  ["controllers/podgroup/probe.ts", "../../controllers/shared/settle.ts"],
  ["controllers/podgroup/probe.ts", "../../api/resources/podgroup.ts"],
  ["controllers/podgroup/probe.ts", "../../adapters/store/store.ts"],
  ["controllers/podgroup/probe.ts", "../../runtime/clock.ts"],
  ["controllers/podgroup/probe.ts", "zod"],
  ["controllers/shared/probe.ts", "./settle.ts"],
  ["api/orchestrator/probe.ts", "../resources/podgroup.ts"],
  ["api/orchestrator/probe.ts", "../http/validation.ts"],
  ["api/orchestrator/probe.ts", "../../adapters/store/store.ts"],
  ["api/ui/pages/probe.ts", "../../resources/podgroup.ts"],
  ["api/resources/probe.ts", "./keys.ts"],
  ["api/resources/probe.ts", "../../adapters/store/store.ts"],
  ["cli/probe.ts", "../controllers/podgroup/index.ts"],
  ["cli/probe.ts", "../api/http/validation.ts"],
];

describe("import rules (docs/development.md, Conventions)", () => {
  it.each(forbidden)("%s may not import %s", async (file, spec) => {
    const messages = await restricted(file, importOf(spec));
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain("docs/development.md");
  });

  it.each(allowed)("%s may import %s", async (file, spec) => {
    expect(await restricted(file, importOf(spec))).toEqual([]);
  });

  it("checks type-only imports and re-exports too", async () => {
    const file = "controllers/podgroup/probe.ts";
    expect(await restricted(file, 'import type { Foo } from "../dependency/index.ts";\nexport type { Foo };\n')).toHaveLength(1);
    expect(await restricted(file, 'export * from "../../api/registry/blobs.ts";\n')).toHaveLength(1);
    expect(await restricted(file, 'export { x } from "../secretsync/index.ts";\n')).toHaveLength(1);
  });

  it("names the rule that was broken", async () => {
    const [runtime] = await restricted("runtime/probe.ts", importOf("../adapters/store/store.ts"));
    expect(runtime).toContain("runtime/ imports nothing of ours outside runtime/");
    const [controller] = await restricted("controllers/podgroup/probe.ts", importOf("../dependency/index.ts"));
    expect(controller).toContain("a controller never imports another controller");
    const [api] = await restricted("controllers/podgroup/probe.ts", importOf("../../api/http/validation.ts"));
    expect(api).toContain("only api/resources/");
  });
});
