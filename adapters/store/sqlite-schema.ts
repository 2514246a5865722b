// The embedded store's on-disk layout: a revision log in the manner of k3s's kine, plus a table of
// current values so that get/list need not scan history.
//
//   meta    name -> integer: "revision" (the store revision, 1 when empty, as in etcd),
//           "compact_revision" (0 = never compacted), "schema".
//   kv      the current value of every live key (what a list at the current revision reads).
//   log     one row per key changed by each write transaction: every row of one transaction has
//           the same revision. A delete is a tombstone row (deleted = 1, empty value). prev_revision
//           points at the key's previous row (0 when the key did not exist), for watch prevKv.
//           Watches read it from a revision; lists at a past revision take each key's newest row
//           at or below that revision.
//   leases  id (never reused: AUTOINCREMENT), ttl seconds, expires_at (ms since the epoch).
//
// Keys are BLOBs of their UTF-8 bytes so that SQLite orders and ranges them by bytes, as etcd does.
// Invariant: kv equals "the newest non-tombstone log row of each key" (kept by every write running
// in one IMMEDIATE transaction that updates both), except that compaction may drop log rows of
// keys whose newest row is older than the compact revision.
import type Database from "better-sqlite3";

const SCHEMA_VERSION = 1;

/**
 * SQLite's own wait for another connection's write lock once the store is open. better-sqlite3 is
 * synchronous, so that wait freezes the event loop: keep it short; SqliteStore retries a write
 * that still finds the lock taken asynchronously (for up to WRITE_LOCK_WAIT_MS in total).
 */
export const BUSY_TIMEOUT_MS = 10;

/** How long a write waits in all for another connection's write lock before StoreUnavailableError. */
export const WRITE_LOCK_WAIT_MS = 5_000;

export function migrate(db: Database.Database): void {
  // WAL: readers never block the writer, and a second process can read while one writes.
  db.pragma("journal_mode = WAL");
  // FULL: a commit is fsynced before it is acknowledged, like etcd's WAL, so an acknowledged write
  // survives a power loss, not only a process kill (NORMAL would only guarantee the latter).
  db.pragma("synchronous = FULL");
  // Opening (this migration, and the constructor's reaping of expired leases) is synchronous, so it
  // waits for another process's write lock the synchronous way; SqliteStore then sets
  // BUSY_TIMEOUT_MS for everything after.
  db.pragma(`busy_timeout = ${WRITE_LOCK_WAIT_MS}`);
  db.exec(`
    CREATE TABLE IF NOT EXISTS meta (
      name TEXT PRIMARY KEY,
      value INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO meta (name, value) VALUES ('revision', 1), ('compact_revision', 0), ('schema', ${SCHEMA_VERSION});
    CREATE TABLE IF NOT EXISTS kv (
      key BLOB PRIMARY KEY,
      value TEXT NOT NULL,
      create_revision INTEGER NOT NULL,
      mod_revision INTEGER NOT NULL,
      version INTEGER NOT NULL,
      lease INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS kv_by_lease ON kv (lease) WHERE lease != 0;
    CREATE TABLE IF NOT EXISTS log (
      revision INTEGER NOT NULL,
      key BLOB NOT NULL,
      deleted INTEGER NOT NULL,
      value TEXT NOT NULL,
      create_revision INTEGER NOT NULL,
      version INTEGER NOT NULL,
      lease INTEGER NOT NULL,
      prev_revision INTEGER NOT NULL,
      PRIMARY KEY (revision, key)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS log_by_key ON log (key, revision);
    CREATE TABLE IF NOT EXISTS leases (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      ttl INTEGER NOT NULL,
      expires_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS leases_by_expiry ON leases (expires_at);
  `);
  const schema = db.prepare("SELECT value FROM meta WHERE name = 'schema'").pluck().get() as number;
  if (schema !== SCHEMA_VERSION) {
    throw new Error(`${db.name} has store schema ${schema}; this Capstan reads schema ${SCHEMA_VERSION}`);
  }
}

export interface KvRow {
  key: Buffer;
  value: string;
  create_revision: number;
  mod_revision: number;
  version: number;
  lease: number;
}

/** A log row joined with the row it replaced (prev_* null when there was none). */
export interface EventRow extends KvRow {
  deleted: number;
  prev_value: string | null;
  prev_create_revision: number | null;
  prev_mod_revision: number | null;
  prev_version: number | null;
  prev_lease: number | null;
}

export interface LeaseRow {
  id: number;
  ttl: number;
  expires_at: number;
}

/** Bounds of a key range: start <= key < end, and key > after (empty buffer = no lower cut). */
export interface RangeParams {
  start: Buffer;
  end: Buffer;
  after: Buffer;
  /** SQLite LIMIT; -1 = none. */
  limit: number;
}

export type Statements = ReturnType<typeof prepareStatements>;

export function prepareStatements(db: Database.Database) {
  return {
    getMeta: db.prepare<[string], number>("SELECT value FROM meta WHERE name = ?").pluck(),
    setMeta: db.prepare<[number, string]>("UPDATE meta SET value = ? WHERE name = ?"),

    getKv: db.prepare<[Buffer], KvRow>("SELECT * FROM kv WHERE key = ?"),
    upsertKv: db.prepare<[KvRow]>(
      `INSERT INTO kv (key, value, create_revision, mod_revision, version, lease)
       VALUES (@key, @value, @create_revision, @mod_revision, @version, @lease)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value, mod_revision = excluded.mod_revision,
         version = excluded.version, lease = excluded.lease`,
    ),
    deleteKv: db.prepare<[Buffer]>("DELETE FROM kv WHERE key = ?"),
    keysInRange: db.prepare<[{ start: Buffer; end: Buffer }], Buffer>(
      "SELECT key FROM kv WHERE key >= @start AND key < @end ORDER BY key",
    ).pluck(),
    keysOfLease: db.prepare<[number], Buffer>("SELECT key FROM kv WHERE lease = ? ORDER BY key").pluck(),
    listCurrent: db.prepare<[RangeParams], KvRow>(
      `SELECT * FROM kv WHERE key >= @start AND key < @end AND key > @after ORDER BY key LIMIT @limit`,
    ),
    // Each key's newest row at or below @revision; SQLite takes the bare columns from the MAX() row.
    listAt: db.prepare<[RangeParams & { revision: number }], KvRow>(
      `SELECT key, value, create_revision, revision AS mod_revision, version, lease FROM (
         SELECT key, MAX(revision) AS revision, value, create_revision, version, lease, deleted FROM log
         WHERE key >= @start AND key < @end AND key > @after AND revision <= @revision
         GROUP BY key
       ) WHERE deleted = 0 ORDER BY key LIMIT @limit`,
    ),

    insertLog: db.prepare<
      [
        {
          revision: number;
          key: Buffer;
          deleted: number;
          value: string;
          create_revision: number;
          version: number;
          lease: number;
          prev_revision: number;
        },
      ]
    >(
      `INSERT INTO log (revision, key, deleted, value, create_revision, version, lease, prev_revision)
       VALUES (@revision, @key, @deleted, @value, @create_revision, @version, @lease, @prev_revision)`,
    ),
    events: db.prepare<[{ from: number; to: number; start: Buffer; end: Buffer }], EventRow>(
      `SELECT l.key, l.value, l.create_revision, l.revision AS mod_revision, l.version, l.lease, l.deleted,
              p.value AS prev_value, p.create_revision AS prev_create_revision,
              p.revision AS prev_mod_revision, p.version AS prev_version, p.lease AS prev_lease
       FROM log l LEFT JOIN log p ON p.key = l.key AND p.revision = l.prev_revision
       WHERE l.revision >= @from AND l.revision <= @to AND l.key >= @start AND l.key < @end
       ORDER BY l.revision, l.key`,
    ),
    // Rows below the compact revision that no read at or above it can need: tombstones (the key is
    // absent there either way) and rows superseded by a newer row at or below it. Each key's newest
    // row at or below the compact revision stays, so lists at it and watches from it still work.
    compactLog: db.prepare<[{ revision: number }]>(
      `DELETE FROM log WHERE revision < @revision AND (deleted = 1 OR EXISTS (
         SELECT 1 FROM log AS newer
         WHERE newer.key = log.key AND newer.revision > log.revision AND newer.revision <= @revision))`,
    ),

    getLease: db.prepare<[number], LeaseRow>("SELECT * FROM leases WHERE id = ?"),
    insertLease: db.prepare<[{ ttl: number; expires_at: number }]>(
      "INSERT INTO leases (ttl, expires_at) VALUES (@ttl, @expires_at)",
    ),
    renewLease: db.prepare<[{ id: number; expires_at: number }]>(
      "UPDATE leases SET expires_at = @expires_at WHERE id = @id",
    ),
    deleteLease: db.prepare<[number]>("DELETE FROM leases WHERE id = ?"),
    expiredLeases: db.prepare<[number], number>("SELECT id FROM leases WHERE expires_at <= ? ORDER BY id").pluck(),
  };
}
