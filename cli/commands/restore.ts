// `capstan restore -store URL FILE`: bring a store back to a backup (docs/backup.md), running
// platform or not. The difference is written as ordinary transactions (cli/restore-plan.ts), so the
// controllers of a running platform see it through their watches and converge the engines: what the
// backup has comes back, groups created since are removed by their controllers, and what did not
// change is not written at all. Leader keys and leases are left to the processes running now. Each
// write holds only if the keys are as read; if the store changed in between, it reads and plans again.
import { applyRestore, BackupFormatError, etcdApplyLimits, oneTransaction, readBackup, RestoreConflictError } from "../../adapters/store/backup.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import { SqliteStore } from "../../adapters/store/sqlite.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { planRestore } from "../restore-plan.ts";
import { storeOption } from "../serve.ts";
import { openCommandStore, storeConnectionOptionDefs } from "../store-options.ts";
import { isExpected } from "./backup.ts";

const defs: OptionDef[] = [
  storeOption,
  ...storeConnectionOptionDefs,
  { name: "dry-run", type: "bool", help: "say what would be written, write nothing" },
  { name: "create", type: "bool", help: "restore into a new SQLite database when there is none at the path" },
];

/** Plans read again when the store changed between the plan and its write. */
const attempts = 3;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(usage("restore", "Restores a backup file into the store (running platform or not): FILE is what capstan backup wrote, - for standard input (docs/backup.md).", defs));
    return 0;
  }
  if (args.positionals.length !== 1) throw new UsageError("give exactly one backup FILE (capstan restore -store URL FILE)");
  const file = args.positionals[0]!;
  let backup;
  try {
    backup = readBackup(file);
  } catch (e) {
    if (!(e instanceof BackupFormatError)) throw e;
    process.stderr.write(`capstan restore: ${e.message}\n`);
    return 1;
  }
  const store = openCommandStore(args.options, { create: args.options.create === true, createHint: " (-create to restore into a new one)" });
  const started = Date.now();
  try {
    const from = `${file === "-" ? "standard input" : file} (${backup.entries.size} keys of ${backup.header.source} at revision ${backup.header.revision}, ${backup.header.createdAt})`;
    for (let attempt = 1; ; attempt++) {
      const { items } = await listAll(store, backup.header.prefix);
      const plan = planRestore(items, backup.entries, new Date().toISOString());
      if (args.options["dry-run"] === true) {
        process.stdout.write(`would restore ${from}: ${plan.puts} puts, ${plan.deletes} deletes, ${plan.unchanged} keys unchanged${removingText(plan.removing)}\n`);
        return 0;
      }
      // The embedded store takes it all in one transaction (atomic); etcd in transactions within its limits.
      let applied;
      try {
        applied = await applyRestore(store, plan.units, store instanceof SqliteStore ? oneTransaction : etcdApplyLimits, plan.expected);
      } catch (e) {
        if (!(e instanceof RestoreConflictError)) throw e;
        // Something wrote between the read and the write: read again and write the difference then.
        if (attempt < attempts) continue;
        process.stderr.write(`capstan restore: the store changed during the restore (${attempts} times); run it again\n`);
        return 1;
      }
      const { transactions, revision } = applied;
      process.stdout.write(
        `restored ${from} into ${store.description}: ${plan.puts} puts, ${plan.deletes} deletes in ${transactions} transactions` +
          `${revision !== undefined ? ` (now at revision ${revision})` : ""}, ${plan.unchanged} keys unchanged${removingText(plan.removing)} (${Date.now() - started} ms)\n`,
      );
      return 0;
    }
  } catch (e) {
    if (isExpected(e)) {
      process.stderr.write(`capstan restore: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  } finally {
    await store.close();
  }
}

function removingText(removing: string[]): string {
  if (removing.length === 0) return "";
  const shown = removing.slice(0, 10).join(", ");
  return `; not in the backup, marked for deletion (their controllers remove them): ${shown}${removing.length > 10 ? ` and ${removing.length - 10} more` : ""}`;
}
