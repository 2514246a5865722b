// npm 11.19 writes a package-lock.json that its own `npm ci` rejects (npm/cli#8726, #9846): it
// leaves out other platforms' optional packages (e.g. @rollup/rollup-darwin-arm64) but keeps the
// optionalDependencies edges naming them, and `npm ci` then reports them "Missing from lock file".
// This drops exactly those dangling optional edges; every package the lock does hold is kept.
// Run after changing dependencies: `npm install && node scripts/lib/fix-lock-optional.mjs`.
import { readFileSync, writeFileSync } from "node:fs";

const path = new URL("../../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
const present = new Set(Object.keys(lock.packages).map((p) => p.replace(/^.*node_modules\//, "")));
let dropped = 0;
for (const entry of Object.values(lock.packages)) {
  const optional = entry.optionalDependencies;
  if (!optional) continue;
  for (const name of Object.keys(optional)) {
    if (!present.has(name)) {
      delete optional[name];
      dropped++;
    }
  }
  if (Object.keys(optional).length === 0) delete entry.optionalDependencies;
}
writeFileSync(path, JSON.stringify(lock, null, 2) + "\n");
console.log(`fix-lock-optional: dropped ${dropped} optional edges to packages absent from the lock`);
