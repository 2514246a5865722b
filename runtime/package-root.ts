// The directory that holds Capstan's package.json, for files read at run time (the web console's
// scripts, the version). Found by walking up from this module rather than by a fixed "../": the
// `capstan` command may run from a bundle of these sources under node_modules/.cache
// (docs/cli.md), where every module's URL is the bundle's.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let found: string | undefined;

export function packageRoot(): string {
  if (found !== undefined) return found;
  // Set by cli/bin/load-main.mjs: the checkout a bundle was made from. Walking up from a bundle
  // finds the checkout that owns node_modules, another one when node_modules is a symbolic link.
  const given = (globalThis as Record<symbol, unknown>)[Symbol.for("capstan.packageRoot")];
  if (typeof given === "string") return (found = given);
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && isCapstan(manifest)) return (found = dir);
    if (dirname(dir) === dir) throw new Error(`no package.json of capstan above ${fileURLToPath(import.meta.url)}`);
  }
}

function isCapstan(manifest: string): boolean {
  try {
    return (JSON.parse(readFileSync(manifest, "utf8")) as { name?: unknown }).name === "capstan";
  } catch {
    return false;
  }
}
