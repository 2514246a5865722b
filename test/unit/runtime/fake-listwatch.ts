// An in-process revisioned key-value log with etcd's list/watch semantics, for unit tests of the
// informer's and the elector's logic only (integration tests use the real etcd and SQLite stores).
// Deliveries are asynchronous (queueMicrotask), like a real store's.
import type { KeyValueLike, ListPage, WatchEventLike, WatchHandlersLike, WatchLike } from "../../../runtime/listwatch.ts";

export class FakeCompactedError extends Error {
  override readonly name = "CompactedError";
  constructor(readonly compactRevision: number) {
    super(`compacted at ${compactRevision}`);
  }
}

export class FakeLeaseLostError extends Error {
  override readonly name = "LeaseLostError";
}

interface LiveWatch {
  prefix: string;
  handlers: WatchHandlersLike;
  closed: boolean;
  /** Next revision this watch must deliver. */
  next: number;
}

interface FakeLease {
  id: string;
  ttlMs: number;
  expiresAt: number;
  alive: boolean;
}

export class FakeListWatch {
  rev = 1;
  compactRev = 0;
  /** Every change, in revision order. */
  readonly log: { revision: number; events: WatchEventLike[] }[] = [];
  private readonly current = new Map<string, KeyValueLike>();
  readonly watches: LiveWatch[] = [];
  /** When true, watches deliver nothing (a half-open stream) and ignore progress requests. */
  silent = false;
  /** When true, requestProgress() is answered with onProgress(current revision). */
  answerProgress = true;
  /** Lists to fail before answering again. */
  failLists = 0;
  listCalls = 0;
  /** Called before each list page is answered (a test can write between pages). */
  beforeListPage: ((call: number) => void) | undefined;
  readonly leases = new Map<string, FakeLease>();
  private leaseSeq = 0;
  /** Clock for lease expiry (ms). */
  now: () => number = () => 0;
  /** When set, keepAliveOnce() waits for this promise (a partition). */
  keepAliveGate: Promise<void> | undefined;
  /** When set, a lease's revoke() waits for this promise. */
  revokeGate: Promise<void> | undefined;

  put(key: string, value: string, lease?: string): number {
    return this.commit([{ type: "put", key, value, lease }]);
  }

  del(key: string): number {
    return this.commit([{ type: "delete", key }]);
  }

  /** Apply several writes in one revision. */
  commit(ops: ({ type: "put"; key: string; value: string; lease?: string | undefined } | { type: "delete"; key: string })[]): number {
    const revision = ++this.rev;
    const events: WatchEventLike[] = [];
    for (const op of ops) {
      const old = this.current.get(op.key);
      if (op.type === "put") {
        const kv: KeyValueLike = {
          key: op.key,
          value: op.value,
          createRevision: old?.createRevision ?? revision,
          modRevision: revision,
          version: (old?.version ?? 0) + 1,
          ...(op.lease !== undefined && { lease: op.lease }),
        };
        this.current.set(op.key, kv);
        events.push({ type: "put", kv });
      } else if (old) {
        this.current.delete(op.key);
        events.push({ type: "delete", kv: { key: op.key, value: "", createRevision: 0, modRevision: revision, version: 0 } });
      }
    }
    this.log.push({ revision, events });
    this.deliver();
    return revision;
  }

  compact(revision: number): void {
    this.compactRev = revision;
    for (const w of this.watches) {
      if (!w.closed && w.next <= revision) this.fail(w, new FakeCompactedError(revision));
    }
  }

  /** End every live watch with `error`. */
  breakWatches(error: Error = new Error("stream reset")): void {
    for (const w of this.watches) if (!w.closed) this.fail(w, error);
  }

  liveWatches(): number {
    return this.watches.filter((w) => !w.closed).length;
  }

  snapshot(prefix: string): Map<string, KeyValueLike> {
    return new Map([...this.current].filter(([k]) => k.startsWith(prefix)));
  }

  // --- ListWatchSource -------------------------------------------------------------------------

  async list(prefix: string, options?: { revision?: number; limit?: number; startAfter?: string }): Promise<ListPage> {
    const call = this.listCalls++;
    this.expireLeases();
    await Promise.resolve();
    this.beforeListPage?.(call);
    if (this.failLists > 0) {
      this.failLists--;
      throw new Error("store unavailable");
    }
    const at = options?.revision ?? this.rev;
    if (at <= this.compactRev && options?.revision !== undefined) throw new FakeCompactedError(this.compactRev);
    const state = this.stateAt(at);
    let keys = [...state.keys()].filter((k) => k.startsWith(prefix)).sort();
    if (options?.startAfter !== undefined) keys = keys.filter((k) => k > options.startAfter!);
    const limit = options?.limit ?? Infinity;
    const page = keys.slice(0, limit);
    return { items: page.map((k) => state.get(k)!), revision: at, more: keys.length > page.length };
  }

  watch(prefix: string, fromRevision: number, handlers: WatchHandlersLike): WatchLike {
    const w: LiveWatch = { prefix, handlers, closed: false, next: fromRevision };
    this.watches.push(w);
    if (fromRevision <= this.compactRev) {
      this.fail(w, new FakeCompactedError(this.compactRev));
    } else {
      this.deliver();
    }
    return {
      requestProgress: () => {
        if (w.closed || this.silent || !this.answerProgress) return;
        queueMicrotask(() => {
          // Progress means "all <= rev delivered": only true once this watch has caught up.
          if (!w.closed && !this.silent && w.next > this.rev) w.handlers.onProgress?.(this.rev);
        });
      },
      close: async () => {
        w.closed = true;
      },
    };
  }

  async revision(): Promise<number> {
    return this.rev;
  }

  // --- election subset -------------------------------------------------------------------------

  async get(key: string): Promise<KeyValueLike | null> {
    this.expireLeases();
    return this.current.get(key) ?? null;
  }

  async txn(
    compares: { key: string; target: "createRevision"; equals: number }[],
    success: { type: "put"; key: string; value: string; lease?: string }[],
  ): Promise<{ succeeded: boolean; revision: number }> {
    this.expireLeases();
    const ok = compares.every((c) => (this.current.get(c.key)?.createRevision ?? 0) === c.equals);
    if (!ok) return { succeeded: false, revision: this.rev };
    return { succeeded: true, revision: this.commit(success) };
  }

  async grantLease(ttlSeconds: number) {
    const lease: FakeLease = { id: String(++this.leaseSeq), ttlMs: ttlSeconds * 1000, expiresAt: this.now() + ttlSeconds * 1000, alive: true };
    this.leases.set(lease.id, lease);
    return {
      id: lease.id,
      ttlSeconds,
      keepAliveOnce: async () => {
        if (this.keepAliveGate) await this.keepAliveGate;
        this.expireLeases();
        if (!lease.alive) throw new FakeLeaseLostError(`lease ${lease.id} lost`);
        lease.expiresAt = this.now() + lease.ttlMs;
        return ttlSeconds;
      },
      revoke: async () => {
        if (this.revokeGate) await this.revokeGate;
        this.endLease(lease);
      },
    };
  }

  /** Expire leases whose TTL has passed (the store's own clock). */
  expireLeases(): void {
    for (const lease of this.leases.values()) if (lease.alive && this.now() >= lease.expiresAt) this.endLease(lease);
  }

  private endLease(lease: FakeLease): void {
    if (!lease.alive) return;
    lease.alive = false;
    const attached = [...this.current.values()].filter((kv) => kv.lease === lease.id).map((kv) => kv.key);
    if (attached.length > 0) this.commit(attached.map((key) => ({ type: "delete" as const, key })));
  }

  // --- internals -------------------------------------------------------------------------------

  private stateAt(revision: number): Map<string, KeyValueLike> {
    if (revision >= this.rev) return new Map(this.current);
    const state = new Map<string, KeyValueLike>();
    for (const entry of this.log) {
      if (entry.revision > revision) break;
      for (const ev of entry.events) {
        if (ev.type === "put") state.set(ev.kv.key, ev.kv);
        else state.delete(ev.kv.key);
      }
    }
    return state;
  }

  private fail(w: LiveWatch, error: Error): void {
    w.closed = true;
    queueMicrotask(() => w.handlers.onError(error));
  }

  private deliver(): void {
    queueMicrotask(() => {
      if (this.silent) return;
      for (const w of this.watches) {
        if (w.closed) continue;
        for (const entry of this.log) {
          if (entry.revision < w.next) continue;
          const events = entry.events.filter((e) => e.kv.key.startsWith(w.prefix));
          w.next = entry.revision + 1;
          if (events.length > 0) w.handlers.onEvents(events);
          if (w.closed) break;
        }
      }
    });
  }
}
