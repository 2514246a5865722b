// The store contract every Capstan component programs against. Two implementations satisfy it:
// EtcdStore (etcd v3 through the `etcd3` package) and SqliteStore (the embedded default, a revision
// log in the manner of k3s's kine). One contract test suite runs against both
// (test/integration/store/contract.test.ts), so behaviour here is defined by that suite.
//
// Revision semantics are etcd's:
// - one global revision counter, incremented by every successful write transaction (a transaction
//   that writes several keys consumes one revision);
// - every key carries createRevision (revision of the put that created it, since its last delete),
//   modRevision (revision of its last put) and version (puts since creation, 1 on create);
// - a delete event carries the deletion revision in kv.modRevision;
// - list(prefix) answers with the revision it read at (R); watch(prefix, R + 1) then yields every
//   later change, in revision order, with no gap: list + watch is the informer's snapshot + stream;
// - history below the compact revision is gone: a watch or a list at a revision below it fails with
//   CompactedError, which carries the compact revision.
//
// Values are strings (callers store JSON). Revisions are JavaScript numbers (safe to 2^53).

/** One stored key with its revision metadata. */
export interface KeyValue {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  version: number;
  /** Lease the key is attached to, if any (decimal string, as etcd lease ids are 64-bit). */
  lease?: string;
}

/** A condition for a conditional write. All compares of one write/transaction must hold. */
export type Compare =
  | { key: string; target: "modRevision"; equals: number } // CAS on last write; 0 = key absent
  | { key: string; target: "createRevision"; equals: number } // 0 = key absent (create-only)
  | { key: string; target: "version"; equals: number }
  | { key: string; target: "value"; equals: string }
  | { key: string; target: "lease"; equals: string }; // "0" = no lease

export type Op =
  | { type: "put"; key: string; value: string; lease?: string }
  | { type: "delete"; key: string }
  | { type: "deletePrefix"; prefix: string };

export interface TxnResult {
  /** True when every compare held and the success ops were applied. */
  succeeded: boolean;
  /** Store revision after the transaction (the new revision when it wrote, else the current one). */
  revision: number;
}

export interface PutOptions {
  /** Only write when these hold (e.g. {key, target: "modRevision", equals: seen}). */
  expect?: Compare[];
  lease?: string;
}

export interface ListOptions {
  /** Read at this past revision (a consistent snapshot); CompactedError if below the compact revision. */
  revision?: number;
  /** At most this many keys, in key order, starting at `startAfter` (exclusive) when given. */
  limit?: number;
  startAfter?: string;
}

export interface ListResult {
  items: KeyValue[];
  /** The revision the list was read at. Watching from revision + 1 misses nothing. */
  revision: number;
  /** True when `limit` cut the answer short. */
  more: boolean;
}

export interface WatchEvent {
  type: "put" | "delete";
  /** For a delete: key, empty value, modRevision = the deletion revision. */
  kv: KeyValue;
  /** The previous version of the key, when the store has it. */
  prevKv?: KeyValue;
}

export interface WatchHandlers {
  /**
   * Events in revision order. All events of one store revision arrive in the same call, so a
   * consumer may resume from (last event's modRevision + 1) after any call.
   */
  onEvents(events: WatchEvent[]): void;
  /** Everything up to and including `revision` has been delivered (etcd's progress notification). */
  onProgress?(revision: number): void;
  /**
   * The watch is over and will deliver nothing more; the consumer must list again and start a new
   * watch. CompactedError when it was started or fell below the compact revision.
   */
  onError(error: Error): void;
}

export interface Watch {
  /** Ask the store to send a progress notification soon (liveness check for quiet watches). */
  requestProgress(): void;
  close(): Promise<void>;
}

/** A lease: keys attached to it vanish (with delete events) when it expires or is revoked. */
export interface Lease {
  readonly id: string;
  readonly ttlSeconds: number;
  /** Renew once. Resolves with the remaining TTL in seconds; rejects with LeaseLostError if the lease is gone. */
  keepAliveOnce(): Promise<number>;
  revoke(): Promise<void>;
}

export interface Store {
  /** Human-readable form of where it stores, for logs (no credentials). */
  readonly description: string;
  get(key: string): Promise<KeyValue | null>;
  list(prefix: string, options?: ListOptions): Promise<ListResult>;
  /** Resolves `{succeeded: false}` (not an error) when an `expect` compare fails. */
  put(key: string, value: string, options?: PutOptions): Promise<TxnResult>;
  delete(key: string, options?: { expect?: Compare[] }): Promise<TxnResult>;
  /** Remove every key under the prefix in one revision ("remove a directory"). */
  deletePrefix(prefix: string): Promise<TxnResult>;
  /** If every compare holds, apply `success`, otherwise `failure`; atomically, in one revision. */
  txn(compares: Compare[], success: Op[], failure?: Op[]): Promise<TxnResult>;
  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Watch;
  /** Current revision of the store. */
  revision(): Promise<number>;
  /** Forget history below `revision`; watches and lists below it fail with CompactedError. */
  compact(revision: number): Promise<void>;
  grantLease(ttlSeconds: number): Promise<Lease>;
  close(): Promise<void>;
}
