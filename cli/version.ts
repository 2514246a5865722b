// `capstan --version`: the version in the package's package.json, read when asked (there is no
// build step that could stamp it in).
import { readFileSync } from "node:fs";

export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: unknown };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}
