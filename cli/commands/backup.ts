// `capstan backup -store URL -o FILE`: every Capstan key of a store, read at one revision, into one
// file in the portable backup format (docs/backup.md; adapters/store/backup.ts). Works on a
// running platform: the read is a snapshot. Nothing of the platform's is written to the store
// (opening an SQLite file brings its schema up to date and drops keys of leases that ran out, as
// any process opening it does).
import { BackupCompactedError, BackupFormatError, writeBackup } from "../../adapters/store/backup.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { storeOption } from "../serve.ts";
import { openCommandStore, storeConnectionOptionDefs } from "../store-options.ts";

/** What a backup holds: every component's keys (docs/store.md, "Key layout"). */
export const backupPrefix = "/platform/";

const defs: OptionDef[] = [
  storeOption,
  ...storeConnectionOptionDefs,
  { name: "output", short: "o", type: "string", help: "the backup file to write (mode 0600; - for standard output)" },
];

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(usage("backup", "Writes every Capstan key of the store, read at one revision, to a backup file (docs/backup.md).", defs));
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}: the file goes with -o FILE`);
  const file = args.options.output;
  if (typeof file !== "string" || file === "") throw new UsageError("-o FILE is required: where to write the backup");
  const store = openCommandStore(args.options);
  const started = Date.now();
  try {
    const { header, keys, bytes } = await writeBackup(store, backupPrefix, file);
    const where = file === "-" ? "standard output" : file;
    process.stderr.write(`backed up ${keys} keys of ${store.description} at revision ${header.revision} to ${where} (${bytes} bytes, ${Date.now() - started} ms)\n`);
    return 0;
  } catch (e) {
    if (e instanceof BackupFormatError || e instanceof BackupCompactedError || isExpected(e)) {
      process.stderr.write(`capstan backup: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  } finally {
    await store.close();
  }
}

/** A store or file failure to report in one line (not a bug). */
export function isExpected(e: unknown): boolean {
  const name = (e as Error | undefined)?.name;
  return name === "StoreUnavailableError" || name === "EtcdAccessError" || typeof (e as NodeJS.ErrnoException | undefined)?.code === "string";
}
