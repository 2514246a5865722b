// One process per role on an embedded store (docs/store.md, "One process per role"): an OS file
// lock, held for as long as the process lives, proves that no other live process plays the same
// role (the orchestrator of `capstan up`/`capstan orchestrator`, the secrets service, ...) on the
// same SQLite file. Node has no flock; SQLite's own locking is a real one (POSIX fcntl locks on
// Linux and macOS), which the kernel drops when the process ends, kill -9 included. So the lock is
// STORE.ROLE.lock, opened as a SQLite database in locking_mode EXCLUSIVE with a write transaction
// begun at once and never committed: its EXCLUSIVE lock is held until the connection closes.
//
// The lock file's content is never written (it stays empty), so no crash or power loss can leave
// it damaged. Who holds it is kept beside it, in STORE.ROLE.lock.holders (JSON, written to a
// temporary file and renamed into place, so it is whole or absent): the holder's pid, which a
// refused process reads to name it, and the identities that held the role before. Whoever takes
// the lock knows every one of those earlier holders is gone, so the leader key such a holder left
// behind can be taken over at once instead of after its lease runs out.
//
// POSIX locks belong to the process and are dropped when it closes ANY descriptor of the file, so
// this process never opens the lock file from Node while it may hold it: the files it holds are
// remembered here and a second acquire in the same process is refused before touching the file.
import { chmodSync, closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import Database from "better-sqlite3";

/** Another live process (or this one) holds the role on this store. */
export class StoreRoleLockedError extends Error {
  override readonly name = "StoreRoleLockedError";
  constructor(
    readonly store: string,
    readonly role: string,
    readonly lockFile: string,
    readonly holderPid: number | undefined,
  ) {
    const who = holderPid === process.pid ? `this process (${holderPid})` : holderPid !== undefined ? `process ${holderPid}` : "another process (its pid is not known yet)";
    super(
      `${store} is in use as ${role} by ${who} (lock file ${lockFile}): one process per role on an embedded store. ` +
        "Stop that process first, or use an etcd store to run several",
    );
  }
}

/** The lock file could not be used for another reason than another holder (damaged, unreadable, ...). */
export class RoleLockFileError extends Error {
  override readonly name = "RoleLockFileError";
  constructor(
    readonly lockFile: string,
    cause: unknown,
  ) {
    const code = (cause as { code?: string }).code;
    super(
      `cannot take the role lock ${lockFile}: ${(cause as Error).message}${code !== undefined ? ` (${code})` : ""}. ` +
        "The lock file holds no data: when no Capstan process uses this store, it is safe to delete it (and its .holders file)",
      { cause },
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

/**
 * How long to wait on the lock: two processes starting at the same moment both take SQLite's
 * SHARED lock on the way to EXCLUSIVE, and with no wait at all both could fail; a held lock is
 * never given up, so this only delays a refusal.
 */
const BUSY_TIMEOUT_MS = 250;

/** Lock files held by this process (see above: never opened again while held). */
const heldHere = new Set<string>();

/** The lock file of `role` for the SQLite database at `dbPath`. */
export function roleLockFile(dbPath: string, role: string): string {
  if (!/^[a-z0-9-]+$/.test(role)) throw new TypeError(`role ${JSON.stringify(role)}: lower-case letters, digits and "-" only`);
  return `${dbPath}.${role}.lock`;
}

interface Holders {
  pid: number;
  identities: string[];
}

/**
 * Take the lock of `role` on the database at `dbPath`, recording `identity`; StoreRoleLockedError
 * when a live process holds it, RoleLockFileError when the lock file cannot be used. The lock lasts
 * until release() or the end of the process.
 */
export function acquireRoleLock(dbPath: string, role: string, identity: string): RoleLock {
  const file = roleLockFile(dbPath, role);
  const store = `sqlite://${dbPath}`;
  if (heldHere.has(file)) throw new StoreRoleLockedError(store, role, file, process.pid);
  let db: Database.Database;
  try {
    // Safe to open and close here: this process does not hold it (heldHere).
    if (!existsSync(file)) closeSync(openSync(file, "a", 0o600));
    chmodSync(file, 0o600);
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw new RoleLockFileError(file, error);
  }
  try {
    // locking_mode only sets a flag; BEGIN EXCLUSIVE is the first thing that touches the file.
    db.pragma("locking_mode = EXCLUSIVE");
    db.exec("BEGIN EXCLUSIVE");
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code?.startsWith("SQLITE_BUSY")) throw new StoreRoleLockedError(store, role, file, livePid(readHolders(file)?.pid));
    throw new RoleLockFileError(file, error);
  }
  heldHere.add(file);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    db.close();
    heldHere.delete(file);
  };
  try {
    const identities = (readHolders(file)?.identities ?? []).filter((id) => id !== identity);
    writeHolders(file, { pid: process.pid, identities: [identity, ...identities].slice(0, REMEMBERED_HOLDERS) });
    return { file, previousHolders: new Set(identities), release };
  } catch (error) {
    release();
    throw new RoleLockFileError(`${file}.holders`, error);
  }
}

function holdersFile(lockFile: string): string {
  return `${lockFile}.holders`;
}

/** The holders record; undefined when absent or unreadable (it is a courtesy: the lock is what counts). */
function readHolders(lockFile: string): Holders | undefined {
  try {
    const v = JSON.parse(readFileSync(holdersFile(lockFile), "utf8")) as Partial<Holders>;
    if (typeof v.pid !== "number" || !Array.isArray(v.identities)) return undefined;
    return { pid: v.pid, identities: v.identities.filter((id): id is string => typeof id === "string") };
  } catch {
    return undefined;
  }
}

/** Written whole or not at all: a temporary file, fsynced, renamed into place. */
function writeHolders(lockFile: string, holders: Holders): void {
  const target = holdersFile(lockFile);
  const tmp = `${target}.tmp-${process.pid}`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeSync(fd, `${JSON.stringify(holders)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, target);
}

/** `pid` if such a process exists (the record may still name the previous, dead holder). */
function livePid(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM" ? pid : undefined;
  }
}
