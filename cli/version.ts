// `capstan --version`: the version in the package's package.json, read when asked (there is no
// build step that could stamp it in).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../runtime/package-root.ts";

export function version(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version?: unknown };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}
