// Lint: typescript-eslint's recommended rules plus the few that catch real bugs in async code.
import { readdirSync } from "node:fs";
import js from "@eslint/js";
import tseslint from "typescript-eslint";

// ---- Import rules (docs/development.md, "Conventions") ------------------------------------------
//
// Each rule names a folder and the root-relative places its files may not import (`to`, with
// `except` sub-folders of it that stay allowed). no-restricted-imports sees the import as written,
// so each rule becomes one regex per depth of the importing file and per number of "../" in the
// import: from runtime/a/b.ts, "../../adapters/x.ts" is adapters/x.ts, while "../x.ts" stays in
// runtime/. Dynamic import() is not checked (nothing of ours uses it across folders).
const conventions = 'docs/development.md, "Conventions"';
const rule = (text) => `${text} (${conventions}).`;
const notTestCode = [
  { to: "bench/", message: rule("production code never imports bench/") },
  { to: "test/", message: rule("production code never imports test/") },
  { to: "scripts/", message: rule("production code never imports scripts/") },
];
const apiRules = [
  { to: "controllers/", message: rule("api/ never imports controllers/") },
  { to: "cli/", message: rule("api/ never imports cli/") },
  ...notTestCode,
];
const controllerFolders = readdirSync(new URL("./controllers/", import.meta.url), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name);
const importRules = [
  { folder: "runtime", forbid: [{ to: "", except: ["runtime/"], message: rule("runtime/ imports nothing of ours outside runtime/") }] },
  {
    folder: "adapters",
    forbid: [
      { to: "controllers/", message: rule("adapters/ never import controllers/") },
      { to: "api/", message: rule("adapters/ never import api/") },
      { to: "cli/", message: rule("adapters/ never import cli/") },
      ...notTestCode,
    ],
  },
  ...controllerFolders.map((name) => ({
    folder: `controllers/${name}`,
    forbid: [
      { to: "controllers/", except: ["shared/", `${name}/`], message: rule("a controller never imports another controller; controllers/shared/ is for all of them") },
      { to: "api/", except: ["resources/"], message: rule("controllers import from api/ only api/resources/") },
      { to: "cli/", message: rule("controllers never import cli/") },
      ...notTestCode,
    ],
  })),
  { folder: "api", forbid: apiRules },
  // After "api": for its files this list replaces api's, so it repeats it.
  {
    folder: "api/resources",
    forbid: [...apiRules, { to: "api/", except: ["resources/"], message: rule("api/resources/ imports nothing from the rest of api/ (controllers import it)") }],
  },
  { folder: "cli", forbid: notTestCode },
];
/** Deepest file below a rule's folder that the rules cover ("*\/" levels): deeper files get none. */
const maxNesting = 6;

const escapeRegex = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const noneOf = (list) => (list.length === 0 ? "" : `(?!${list.map(escapeRegex).join("|")})`);

/** The no-restricted-imports patterns for files `nesting` folders below `folder`. */
function importPatterns(folder, forbid, nesting) {
  const segments = folder.split("/");
  const depth = segments.length + nesting;
  const patterns = [];
  // k "../" leave the folder from k = nesting + 1 on, landing in `landing` (root-relative).
  for (let k = nesting + 1; k <= depth; k++) {
    const landing = segments.slice(0, depth - k).map((s) => `${s}/`).join("");
    const ups = `^(?:\\./)?(?:\\.\\./){${k}}(?!\\.\\./)`;
    for (const { to, except = [], message } of forbid) {
      const allowed = except.map((e) => to + e);
      let regex;
      if (to.startsWith(landing)) {
        regex = ups + escapeRegex(to.slice(landing.length)) + noneOf(except);
      } else if (landing.startsWith(to)) {
        if (allowed.some((a) => landing.startsWith(a))) continue; // landed in an allowed folder
        regex = ups + noneOf(allowed.filter((a) => a.startsWith(landing)).map((a) => a.slice(landing.length)));
      } else {
        continue; // `to` is not below `landing`: more "../" reach it
      }
      patterns.push({ regex, message });
    }
  }
  return patterns;
}

const importRuleConfigs = importRules.flatMap(({ folder, forbid }) =>
  Array.from({ length: maxNesting + 1 }, (_, nesting) => ({
    name: `capstan/imports/${folder}/${"*/".repeat(nesting)}`,
    files: [`${folder}/${"*/".repeat(nesting)}*.{ts,mts,cts,js,mjs,cjs}`],
    rules: { "no-restricted-imports": ["error", { patterns: importPatterns(folder, forbid, nesting) }] },
  })),
);

export default tseslint.config(
  { ignores: ["node_modules/**", "bench/results/**", "capstan-data/**", "coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-constant-condition": ["error", { checkLoops: false }],
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { globals: { process: "readonly", console: "readonly", URL: "readonly" } },
  },
  {
    // CommonJS scripts (bench/build/warm-floor.cjs: no ES module loader at all).
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: { require: "readonly", process: "readonly", URL: "readonly" } },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
  {
    // The web console's browser scripts (docs/web-console.md): plain scripts, browser globals.
    files: ["api/ui/static/**/*.js"],
    languageOptions: {
      sourceType: "script",
      globals: { window: "readonly", document: "readonly", location: "readonly", EventSource: "readonly", WebSocket: "readonly", TextEncoder: "readonly", TextDecoder: "readonly", ResizeObserver: "readonly", Terminal: "readonly", FitAddon: "readonly", URL: "readonly", URLSearchParams: "readonly" },
    },
  },
  ...importRuleConfigs,
);
