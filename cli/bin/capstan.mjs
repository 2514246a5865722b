#!/usr/bin/env node
// The `capstan` command. Sources are TypeScript run through tsx's loader, so there is no build step
// between `npm ci` and `npx capstan`.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../main.ts");
process.exitCode = await main(process.argv.slice(2));
