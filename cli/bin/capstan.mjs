#!/usr/bin/env node
// The `capstan` command. Sources are TypeScript; load-main.mjs runs them from a cached bundle of
// the command's own code, so there is no build step between `npm ci` and `npx capstan`.
import { loadMain } from "./load-main.mjs";

const argv = process.argv.slice(2);
const main = await loadMain(argv);
process.exitCode = await main(argv);
