// One process per role on an embedded store (docs/store.md, "One process per role"): an OS file
// lock, held for as long as the process lives, proves that no other live process plays the same
// role (the orchestrator of `capstan up`/`capstan orchestrator`, the secrets service, ...) on the
// same SQLite file. Node has no flock; SQLite's own locking is a real one (POSIX fcntl locks on
// Linux and macOS), which the kernel drops when the process ends, kill -9 included. So the lock is a
// small SQLite database next to the store, STORE.ROLE.lock, opened in locking_mode EXCLUSIVE with a
// write transaction taken at once: its EXCLUSIVE lock is then held until the connection closes, and
// another process trying the same gets SQLITE_BUSY at once (busy timeout 0).
//
// The lock database records its holder: the pid in the file header's "user version" field (offset
// 60, SQLite's file format), which another process can read with a plain read although it cannot
// take a lock; and, in a table, the identities that ever held it. Whoever takes the lock knows
// every one of those earlier holders is gone, so the leader key such a holder left behind can be
// taken over at once instead of after its lease runs out.
import { chmodSync, closeSync, openSync, readSync } from "node:fs";
import Database from "better-sqlite3";

/** Another live process holds the role on this store. */
export class StoreRoleLockedError extends Error {
  override readonly name = "StoreRoleLockedError";
  constructor(
    readonly store: string,
    readonly role: string,
    readonly lockFile: string,
    readonly holderPid: number | undefined,
  ) {
    const who = holderPid !== undefined ? `process ${holderPid}` : "another process (its pid is not known yet)";
    super(
      `${store} is in use as ${role} by ${who} (lock file ${lockFile}): one process per role on an embedded store. ` +
        "Stop that process first, or use an etcd store to run several",
    );
  }
}

export interface RoleLock {
  readonly file: string;
  /** Identities that held this role before (all gone: their lock was free). */
  readonly previousHolders: ReadonlySet<string>;
  release(): void;
}

/** How many earlier holders' identities the lock remembers. */
const REMEMBERED_HOLDERS = 16;

/** The lock file of `role` for the SQLite database at `dbPath`. */
export function roleLockFile(dbPath: string, role: string): string {
  if (!/^[a-z0-9-]+$/.test(role)) throw new TypeError(`role ${JSON.stringify(role)}: lower-case letters, digits and "-" only`);
  return `${dbPath}.${role}.lock`;
}

/**
 * Take the lock of `role` on the database at `dbPath`, recording `identity`; StoreRoleLockedError
 * at once when a live process holds it. The lock lasts until release() or the end of the process.
 */
export function acquireRoleLock(dbPath: string, role: string, identity: string): RoleLock {
  const file = roleLockFile(dbPath, role);
  closeSync(openSync(file, "a", 0o600));
  chmodSync(file, 0o600);
  const db = new Database(file, { timeout: 0 });
  try {
    // No journal file: the lock's contents are a courtesy, the lock itself is what counts.
    try {
      db.pragma("locking_mode = EXCLUSIVE");
      db.pragma("journal_mode = MEMORY");
      db.exec("BEGIN EXCLUSIVE");
    } catch (error) {
      if ((error as { code?: string }).code?.startsWith("SQLITE_BUSY")) {
        throw new StoreRoleLockedError(`sqlite://${dbPath}`, role, file, livePid(readHolderPid(file)));
      }
      throw error;
    }
    db.exec("CREATE TABLE IF NOT EXISTS holders (seq INTEGER PRIMARY KEY AUTOINCREMENT, identity TEXT NOT NULL, pid INTEGER NOT NULL, since TEXT NOT NULL)");
    const previous = new Set(
      (db.prepare("SELECT identity FROM holders ORDER BY seq DESC LIMIT ?").pluck().all(REMEMBERED_HOLDERS) as string[]).filter((id) => id !== identity),
    );
    db.prepare("INSERT INTO holders (identity, pid, since) VALUES (?, ?, ?)").run(identity, process.pid, new Date().toISOString());
    db.prepare("DELETE FROM holders WHERE seq <= (SELECT MAX(seq) FROM holders) - ?").run(REMEMBERED_HOLDERS);
    db.pragma(`user_version = ${process.pid}`);
    // In EXCLUSIVE locking mode the commit keeps the EXCLUSIVE lock: nobody else reads or writes
    // this file until we close it (or die).
    db.exec("COMMIT");
    let released = false;
    return {
      file,
      previousHolders: previous,
      release: () => {
        if (released) return;
        released = true;
        db.close();
      },
    };
  } catch (error) {
    if (db.open) db.close();
    throw error;
  }
}

/** The pid in the lock file's header (SQLite's user version, a big-endian int at offset 60). */
function readHolderPid(file: string): number | undefined {
  try {
    const fd = openSync(file, "r");
    try {
      const header = Buffer.alloc(64);
      if (readSync(fd, header, 0, 64, 0) < 64) return undefined;
      const pid = header.readInt32BE(60);
      return pid > 0 ? pid : undefined;
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
}

/** `pid` if such a process exists (the header may still name the previous, dead holder). */
function livePid(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM" ? pid : undefined;
  }
}
