// Lint: typescript-eslint's recommended rules plus the few that catch real bugs in async code.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

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
    // The web console's browser scripts (docs/web-console.md): plain scripts, browser globals.
    files: ["api/ui/static/**/*.js"],
    languageOptions: {
      sourceType: "script",
      globals: { window: "readonly", document: "readonly", location: "readonly", EventSource: "readonly", WebSocket: "readonly", TextEncoder: "readonly", TextDecoder: "readonly", ResizeObserver: "readonly", Terminal: "readonly", FitAddon: "readonly", URL: "readonly", URLSearchParams: "readonly" },
    },
  },
);
