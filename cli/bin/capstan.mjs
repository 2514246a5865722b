#!/usr/bin/env node
// The `capstan` command. Sources are TypeScript; load-main.mjs runs them from a cached bundle, so
// there is no build step between `npm ci` and `npx capstan`.
import { loadMain } from "./load-main.mjs";

const main = await loadMain();
process.exitCode = await main(process.argv.slice(2));
