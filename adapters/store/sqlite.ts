// SqliteStore: the embedded Store, for a single node, with etcd's revision semantics on a SQLite
// file (better-sqlite3). Layout and invariants: sqlite-schema.ts. Every write is one IMMEDIATE
// transaction that takes the next revision (if it changes anything), so revisions are dense,
// ordered and shared by every process that opens the same file. Watches read the log
// (sqlite-watch.ts): right after a local commit, and every pollIntervalMs for other processes.
import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { CompactedError, LeaseLostError, StoreUnavailableError } from "./errors.ts";
import {
  assertCompares,
  assertKey,
  assertLeaseId,
  assertOps,
  assertRevision,
  assertTtl,
  assertValue,
  keyBytes,
  prefixRange,
} from "./keys.ts";
import {
  BUSY_TIMEOUT_MS,
  migrate,
  prepareStatements,
  WRITE_LOCK_WAIT_MS,
  type EventRow,
  type KvRow,
  type Statements,
} from "./sqlite-schema.ts";
import { BATCH_REVISIONS, SqliteWatch, type LogRead } from "./sqlite-watch.ts";
import type {
  Compare,
  KeyValue,
  Lease,
  ListOptions,
  ListResult,
  Op,
  PutOptions,
  Store,
  TxnResult,
  Watch,
  WatchEvent,
  WatchHandlers,
} from "./store.ts";
import { StoreLease } from "./lease.ts";

export interface SqliteStoreOptions {
  /** Database file (its directory is created), or ":memory:" for a private in-memory store. */
  path: string;
  /** How often watches look for commits made by other processes on the same file. Default 100. */
  pollIntervalMs?: number;
}

/**
 * Upper bound for "every key": valid UTF-8 never contains the byte 0xff, so every key sorts below
 * it. (A prefix's own range end always exists for the same reason; only "" has none.)
 */
const ABOVE_EVERY_KEY = Buffer.from([0xff]);
const NO_LOWER_CUT = Buffer.alloc(0);

/**
 * setTimeout's longest delay (~24.8 days). Node runs a longer one after 1 ms instead, which for a
 * lease timer would mean expiring (a write transaction) in a busy loop; so longer waits re-arm.
 */
const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** How soon a lease expiry that found the database locked tries again. */
const LEASE_EXPIRY_RETRY_MS = 50;

export class SqliteStore implements Store {
  readonly description: string;
  /** The database file (absolute when opened through openStore), or ":memory:". */
  readonly path: string;
  private readonly db: Database.Database;
  private readonly sql: Statements;
  private readonly pollIntervalMs: number;
  private readonly watches = new Set<SqliteWatch>();
  private readonly leaseTimers = new Map<number, NodeJS.Timeout>();
  private pollTimer: NodeJS.Timeout | null = null;
  private dispatchScheduled = false;
  /** Store revision seen by the last dispatch; a poll that reads the same one has nothing to do. */
  private dispatchedRevision = 0;
  private closed = false;

  constructor(options: SqliteStoreOptions) {
    const { path } = options;
    if (typeof path !== "string" || path.length === 0) {
      throw new TypeError("SqliteStore needs a database path (or \":memory:\")");
    }
    const pollIntervalMs = options.pollIntervalMs ?? 100;
    if (!Number.isFinite(pollIntervalMs) || pollIntervalMs <= 0) {
      throw new RangeError(`pollIntervalMs must be a positive number, got ${String(pollIntervalMs)}`);
    }
    this.pollIntervalMs = pollIntervalMs;
    this.description = `sqlite://${path}`;
    this.path = path;
    if (path !== ":memory:") {
      // Private: the store holds token hashes, specs (with their env) and sealed secrets
      // (docs/store.md). A directory made here is 0700; the file is 0600 whether new or old
      // (SQLite gives its -wal and -shm files the same mode).
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      closeSync(openSync(path, "a", 0o600));
      chmodSync(path, 0o600);
    }
    this.db = new Database(path);
    try {
      migrate(this.db);
      this.sql = prepareStatements(this.db);
      // Leases whose holder stopped (this process or another) before they expired.
      this.reapExpiredLeases();
      this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    } catch (error) {
      this.db.close();
      throw error;
    }
  }

  async get(key: string): Promise<KeyValue | null> {
    assertKey(key);
    const row = this.guard("get", () => this.sql.getKv.get(keyBytes(key)));
    return row ? toKeyValue(row) : null;
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    const { start, end } = prefixRange(prefix);
    const { revision, limit, startAfter } = options;
    if (revision !== undefined) assertRevision(revision);
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
      throw new RangeError(`limit must be a positive integer, got ${String(limit)}`);
    }
    if (startAfter !== undefined) assertKey(startAfter, "startAfter");
    const params = {
      start,
      end: end ?? ABOVE_EVERY_KEY,
      after: startAfter === undefined ? NO_LOWER_CUT : keyBytes(startAfter),
      limit: limit === undefined ? -1 : limit + 1, // one more than asked tells whether there is more
    };
    // One read transaction: the revision and the rows belong to the same snapshot.
    const { rows, at } = this.guard("list", () =>
      this.db.transaction(() => {
        const current = this.currentRevision();
        if (revision === undefined || revision === current) {
          return { rows: this.sql.listCurrent.all(params), at: current };
        }
        if (revision > current) {
          throw new RangeError(`cannot list at revision ${revision}: the store is at ${current}`);
        }
        const compactRevision = this.sql.getMeta.get("compact_revision")!;
        if (revision < compactRevision) throw new CompactedError(compactRevision, revision);
        return { rows: this.sql.listAt.all({ ...params, revision }), at: revision };
      })(),
    );
    const more = limit !== undefined && rows.length > limit;
    return { items: (more ? rows.slice(0, limit) : rows).map(toKeyValue), revision: at, more };
  }

  async put(key: string, value: string, options: PutOptions = {}): Promise<TxnResult> {
    assertKey(key);
    assertValue(value);
    if (options.lease !== undefined) assertLeaseId(options.lease);
    return this.txn(options.expect ?? [], [{ type: "put", key, value, lease: options.lease }]);
  }

  async delete(key: string, options: { expect?: Compare[] } = {}): Promise<TxnResult> {
    assertKey(key);
    return this.txn(options.expect ?? [], [{ type: "delete", key }]);
  }

  async deletePrefix(prefix: string): Promise<TxnResult> {
    return this.txn([], [{ type: "deletePrefix", prefix }]);
  }

  async txn(compares: Compare[], success: Op[], failure: Op[] = []): Promise<TxnResult> {
    assertCompares(compares);
    assertOps(success);
    assertOps(failure);
    const { result, revision } = await this.write("write", (writer) => {
      // Compares see the state before any op of this transaction, as in etcd.
      const succeeded = compares.every((c) => compareHolds(c, this.sql.getKv.get(keyBytes(c.key))));
      for (const op of succeeded ? success : failure) writer.apply(op);
      return succeeded;
    });
    return { succeeded: result, revision };
  }

  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Watch {
    this.assertOpen();
    const { start, end } = prefixRange(prefix);
    assertRevision(fromRevision, "fromRevision");
    const watch = new SqliteWatch(
      {
        read: (from, rangeStart, rangeEnd) => this.readLog(from, rangeStart, rangeEnd),
        onDone: (w) => this.forgetWatch(w),
      },
      start,
      end ?? ABOVE_EVERY_KEY,
      fromRevision,
      handlers,
    );
    this.watches.add(watch);
    this.pollTimer ??= setInterval(() => this.poll(), this.pollIntervalMs);
    this.scheduleDispatch();
    return watch;
  }

  async revision(): Promise<number> {
    return this.guard("revision", () => this.currentRevision());
  }

  /** Forgets history below `revision`; at or below the current compact revision it is a no-op. */
  async compact(revision: number): Promise<void> {
    assertRevision(revision);
    await this.retryWhileBusy("compact", () =>
      this.db.transaction(() => {
        const current = this.currentRevision();
        if (revision > current) {
          throw new RangeError(`cannot compact at revision ${revision}: the store is at ${current}`);
        }
        if (revision <= this.sql.getMeta.get("compact_revision")!) return;
        this.sql.compactLog.run({ revision });
        this.sql.setMeta.run(revision, "compact_revision");
      }).immediate(),
    );
  }

  async grantLease(ttlSeconds: number): Promise<Lease> {
    assertTtl(ttlSeconds);
    const { id, expiresAt } = await this.retryWhileBusy("lease grant", () => {
      const expiresAt = Date.now() + ttlSeconds * 1000;
      const id = Number(this.sql.insertLease.run({ ttl: ttlSeconds, expires_at: expiresAt }).lastInsertRowid);
      return { id, expiresAt };
    });
    this.armLeaseTimer(id, expiresAt);
    return new StoreLease(this, String(id), ttlSeconds);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const watch of [...this.watches]) await watch.close();
    for (const timer of this.leaseTimers.values()) clearTimeout(timer);
    this.leaseTimers.clear();
    this.db.close();
  }

  /** Renews a lease; LeaseLostError if it was revoked or has expired (its keys are then reaped). */
  async keepAliveOnce(leaseId: string): Promise<number> {
    const id = Number(leaseId);
    const renewed = await this.retryWhileBusy("lease keep-alive", () =>
      this.db.transaction(() => {
        const now = Date.now();
        const lease = this.sql.getLease.get(id);
        if (!lease || lease.expires_at <= now) return null;
        const expiresAt = now + lease.ttl * 1000;
        this.sql.renewLease.run({ id, expires_at: expiresAt });
        return { ttl: lease.ttl, expiresAt };
      }).immediate(),
    );
    if (!renewed) {
      // Gone or run out (and an expired lease cannot be renewed by anyone): reap its keys now.
      this.clearLeaseTimer(id);
      await this.write("lease expiry", (writer) => writer.revokeLease(id));
      throw new LeaseLostError(leaseId);
    }
    this.armLeaseTimer(id, renewed.expiresAt);
    return renewed.ttl;
  }

  /** Deletes the lease and its keys (in one revision, with delete events). Idempotent. */
  async revokeLease(leaseId: string): Promise<void> {
    const id = Number(leaseId);
    this.clearLeaseTimer(id);
    await this.write("lease revoke", (writer) => writer.revokeLease(id));
  }

  /**
   * Runs `apply` in one IMMEDIATE transaction (the write lock, so revisions are taken in commit
   * order across processes), waiting asynchronously while another connection holds the lock. The
   * transaction consumes the next revision only if it changed a key; a rejected compare or a delete
   * of nothing leaves the revision as it was, as in etcd.
   */
  private async write<T>(what: string, apply: (writer: LogWriter) => T): Promise<{ result: T; revision: number }> {
    const outcome = await this.retryWhileBusy(what, () => this.commit(apply));
    this.scheduleDispatch();
    return outcome;
  }

  /** write(), in one synchronous attempt (lease expiry from timers and the poll). */
  private writeNow<T>(what: string, apply: (writer: LogWriter) => T): { result: T; revision: number } {
    const outcome = this.guard(what, () => this.commit(apply));
    this.scheduleDispatch();
    return outcome;
  }

  private commit<T>(apply: (writer: LogWriter) => T): { result: T; revision: number } {
    return this.db.transaction(() => {
      const current = this.currentRevision();
      const writer = new LogWriter(this.sql, current + 1);
      const result = apply(writer);
      if (!writer.changed) return { result, revision: current };
      this.sql.setMeta.run(current + 1, "revision");
      return { result, revision: current + 1 };
    }).immediate();
  }

  /**
   * Runs a write step; while another connection holds the write lock (SQLITE_BUSY after the short
   * BUSY_TIMEOUT_MS), tries again after a pause that lets the event loop run, for at most
   * WRITE_LOCK_WAIT_MS in all; then the store is unavailable, as etcd would be after a deadline.
   */
  private async retryWhileBusy<T>(what: string, step: () => T): Promise<T> {
    const giveUpAt = Date.now() + WRITE_LOCK_WAIT_MS;
    for (let attempt = 0; ; attempt++) {
      this.assertOpen();
      try {
        return step();
      } catch (error) {
        if (!isBusy(error)) throw error;
        if (Date.now() >= giveUpAt) {
          throw new StoreUnavailableError(`${this.description}: ${what} failed: database is locked`, error);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, 5 * 2 ** attempt)));
    }
  }

  /** One consistent read of the log for a watch: compaction check and events in one snapshot. */
  private readLog(from: number, start: Buffer, end: Buffer): LogRead {
    return this.db.transaction((): LogRead => {
      const revision = this.currentRevision();
      const compactRevision = this.sql.getMeta.get("compact_revision")!;
      if (from < compactRevision) return { compacted: true, compactRevision };
      const upTo = Math.min(revision, from + BATCH_REVISIONS - 1);
      if (upTo < from) return { compacted: false, revision, events: [], upTo: from - 1 };
      const events = this.sql.events.all({ from, to: upTo, start, end }).map(toWatchEvent);
      return { compacted: false, revision, events, upTo };
    })();
  }

  /** Lets every watch catch up, soon but not inside the caller's stack (a handler may write). */
  private scheduleDispatch(): void {
    if (this.dispatchScheduled || this.watches.size === 0) return;
    this.dispatchScheduled = true;
    setImmediate(() => {
      this.dispatchScheduled = false;
      this.dispatch();
    });
  }

  private dispatch(): void {
    if (this.closed) return;
    try {
      this.dispatchedRevision = this.currentRevision();
    } catch {
      // The watches' own reads report the failure to their consumers.
    }
    for (const watch of [...this.watches]) watch.catchUp();
  }

  /** The slow path: commits by other processes, progress requests, and leases that ran out. */
  private poll(): void {
    if (this.closed) return;
    try {
      this.reapExpiredLeases();
      const moved = this.currentRevision() !== this.dispatchedRevision;
      if (moved || [...this.watches].some((w) => w.wantsProgress)) this.dispatch();
    } catch {
      // Busy or failing database: try again next tick; a watch that cannot read reports it.
      this.dispatch();
    }
  }

  private forgetWatch(watch: SqliteWatch): void {
    this.watches.delete(watch);
    if (this.watches.size === 0 && this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
  }

  private reapExpiredLeases(): void {
    for (const id of this.sql.expiredLeases.all(Date.now())) this.expireLease(id);
  }

  /** Revokes the lease if it has really expired; if another process renewed it, re-arms instead. */
  private expireLease(id: number): void {
    if (this.closed) return;
    this.clearLeaseTimer(id);
    const now = Date.now();
    let renewedUntil: number | null = null;
    this.writeNow("lease expiry", (writer) => {
      const lease = this.sql.getLease.get(id);
      if (lease && lease.expires_at > now) renewedUntil = lease.expires_at;
      else writer.revokeLease(id);
    });
    if (renewedUntil !== null) this.armLeaseTimer(id, renewedUntil);
  }

  private armLeaseTimer(id: number, expiresAt: number): void {
    this.clearLeaseTimer(id);
    const timer = setTimeout(
      () => {
        // A long TTL wakes up early (see MAX_TIMER_DELAY_MS) and waits again, without touching the database.
        if (Date.now() < expiresAt) return this.armLeaseTimer(id, expiresAt);
        try {
          this.expireLease(id);
        } catch (error) {
          // Another connection holds the write lock: try again soon rather than leave the lease's
          // keys in place until a poll (only while watches exist) or the next open reaps them.
          if (error instanceof StoreUnavailableError) this.armLeaseTimer(id, Date.now() + LEASE_EXPIRY_RETRY_MS);
        }
      },
      Math.min(MAX_TIMER_DELAY_MS, Math.max(0, expiresAt - Date.now())),
    );
    // Like an etcd lease, a pending expiry does not keep the process alive.
    timer.unref();
    this.leaseTimers.set(id, timer);
  }

  private clearLeaseTimer(id: number): void {
    const timer = this.leaseTimers.get(id);
    if (timer) clearTimeout(timer);
    this.leaseTimers.delete(id);
  }

  private currentRevision(): number {
    return this.sql.getMeta.get("revision")!;
  }

  /** Runs a database step; a database locked beyond busy_timeout is unavailability, as for etcd. */
  private guard<T>(what: string, fn: () => T): T {
    this.assertOpen();
    try {
      return fn();
    } catch (error) {
      if (isBusy(error)) throw new StoreUnavailableError(`${this.description}: ${what} failed: database is locked`, error);
      throw error;
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`store ${this.description} is closed`);
  }
}

/** Applies ops inside a write transaction, appending one log row per changed key at `revision`. */
class LogWriter {
  changed = false;

  constructor(
    private readonly sql: Statements,
    private readonly revision: number,
  ) {}

  apply(op: Op): void {
    switch (op.type) {
      case "put":
        this.put(keyBytes(op.key), op.value, op.lease === undefined ? 0 : this.liveLease(op.lease));
        return;
      case "delete":
        this.delete(keyBytes(op.key));
        return;
      case "deletePrefix": {
        const { start, end } = prefixRange(op.prefix);
        for (const key of this.sql.keysInRange.all({ start, end: end ?? ABOVE_EVERY_KEY })) this.delete(key);
        return;
      }
    }
  }

  revokeLease(id: number): void {
    for (const key of this.sql.keysOfLease.all(id)) this.delete(key);
    this.sql.deleteLease.run(id);
  }

  private put(key: Buffer, value: string, lease: number): void {
    const prev = this.sql.getKv.get(key);
    const row: KvRow = {
      key,
      value,
      create_revision: prev ? prev.create_revision : this.revision,
      mod_revision: this.revision,
      version: prev ? prev.version + 1 : 1,
      lease,
    };
    this.sql.upsertKv.run(row);
    this.sql.insertLog.run({
      revision: this.revision,
      key,
      deleted: 0,
      value,
      create_revision: row.create_revision,
      version: row.version,
      lease,
      prev_revision: prev ? prev.mod_revision : 0,
    });
    this.changed = true;
  }

  private delete(key: Buffer): void {
    const prev = this.sql.getKv.get(key);
    if (!prev) return;
    this.sql.deleteKv.run(key);
    this.sql.insertLog.run({
      revision: this.revision,
      key,
      deleted: 1,
      value: "",
      create_revision: 0,
      version: 0,
      lease: 0,
      prev_revision: prev.mod_revision,
    });
    this.changed = true;
  }

  /** A put may only attach a lease that exists and has not run out (etcd: "lease not found"). */
  private liveLease(leaseId: string): number {
    const id = Number(leaseId);
    const lease = this.sql.getLease.get(id);
    if (!lease || lease.expires_at <= Date.now()) throw new LeaseLostError(leaseId);
    return id;
  }
}

/** Another connection holds the lock we need (SQLITE_BUSY and its extended codes, SQLITE_LOCKED). */
function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code === "SQLITE_LOCKED");
}

/** etcd's compare rules, including: a value compare on an absent key is false (etcd applyCompare). */
function compareHolds(compare: Compare, kv: KvRow | undefined): boolean {
  switch (compare.target) {
    case "modRevision":
      return (kv?.mod_revision ?? 0) === compare.equals;
    case "createRevision":
      return (kv?.create_revision ?? 0) === compare.equals;
    case "version":
      return (kv?.version ?? 0) === compare.equals;
    case "value":
      return kv !== undefined && kv.value === compare.equals;
    case "lease":
      return String(kv?.lease ?? 0) === compare.equals;
  }
}

function toKeyValue(row: KvRow): KeyValue {
  const kv: KeyValue = {
    key: row.key.toString("utf8"),
    value: row.value,
    createRevision: row.create_revision,
    modRevision: row.mod_revision,
    version: row.version,
  };
  if (row.lease !== 0) kv.lease = String(row.lease);
  return kv;
}

function toWatchEvent(row: EventRow): WatchEvent {
  const event: WatchEvent = { type: row.deleted ? "delete" : "put", kv: toKeyValue(row) };
  if (row.prev_mod_revision !== null) {
    event.prevKv = toKeyValue({
      key: row.key,
      value: row.prev_value!,
      create_revision: row.prev_create_revision!,
      mod_revision: row.prev_mod_revision,
      version: row.prev_version!,
      lease: row.prev_lease!,
    });
  }
  return event;
}
