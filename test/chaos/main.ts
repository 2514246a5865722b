// `npm run chaos -- --seed N --minutes M [--dir DIR]`: one chaos run by hand (docs/development.md,
// "Chaos suite"). Without --seed a random one is drawn and printed. Exit 1 on a violation or an
// operation the platform refused for good.
import { formatReport, runChaos } from "./run.ts";

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const seedText = option("seed");
const seed = seedText !== undefined ? Number(seedText) : Math.floor(Math.random() * 2 ** 31);
const minutes = Number(option("minutes") ?? "1");
if (!Number.isInteger(seed) || seed < 0 || !(minutes > 0)) {
  process.stderr.write("usage: npm run chaos -- [--seed N] [--minutes M] [--dir SERVICES_DIR]\n");
  process.exit(2);
}
process.stdout.write(`chaos seed ${seed}, ${minutes} minute(s)\n`);
const report = await runChaos({ seed, durationMs: minutes * 60_000, servicesDir: option("dir"), out: (l) => process.stdout.write(`${l}\n`) });
process.stdout.write(`${formatReport(report)}\n`);
process.exit(report.violations.length > 0 || report.error !== undefined ? 1 : 0);
