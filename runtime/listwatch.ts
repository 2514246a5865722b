// What the runtime needs from a revisioned key-value store, stated structurally so that runtime/
// imports nothing outside itself. adapters/store's Store satisfies these interfaces as it is
// (test/unit/runtime/store-shapes.test.ts checks that at the type level); a test may hand in any
// other object of the same shape.
//
// Revision semantics are etcd's: one global, monotonically increasing revision; list(prefix)
// answers with the revision R it read at; watch(prefix, R + 1) then yields every later change in
// revision order with no gap, or fails with a compaction error when R + 1 is already forgotten.

/** One stored key with its revision metadata (a subset of adapters/store's KeyValue). */
export interface KeyValueLike {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  version: number;
  lease?: string;
}

export interface WatchEventLike {
  type: "put" | "delete";
  /** For a delete, modRevision is the deletion revision. */
  kv: KeyValueLike;
}

export interface ListPage {
  items: KeyValueLike[];
  /** The revision the page was read at. */
  revision: number;
  /** True when `limit` cut the answer short. */
  more: boolean;
}

export interface WatchHandlersLike {
  /** All events of one revision arrive in one call, in revision order. */
  onEvents(events: WatchEventLike[]): void;
  /** Every change up to and including `revision` has been delivered. */
  onProgress?(revision: number): void;
  /** The watch is over; nothing more will be delivered. */
  onError(error: Error): void;
}

export interface WatchLike {
  requestProgress(): void;
  close(): Promise<void>;
}

/** A prefix that can be listed at a pinned revision and watched from a revision. */
export interface ListWatchSource {
  list(
    prefix: string,
    options?: { revision?: number; limit?: number; startAfter?: string },
  ): Promise<ListPage>;
  watch(prefix: string, fromRevision: number, handlers: WatchHandlersLike): WatchLike;
  /** Current store revision (used only for the watch-lag metric). */
  revision(): Promise<number>;
}

/**
 * A compaction error, recognised by shape so runtime/ need not import adapters/store/errors.ts:
 * `name === "CompactedError"` and a numeric `compactRevision` (adapters/store's CompactedError
 * has both). Callers treat it exactly like any other watch failure (relist), but log and count it
 * separately because frequent compactions past a live watch mean the retention is too short.
 */
export function isCompactedError(error: unknown): error is Error & { compactRevision: number } {
  return (
    error instanceof Error &&
    error.name === "CompactedError" &&
    typeof (error as { compactRevision?: unknown }).compactRevision === "number"
  );
}

/**
 * A lease-expired error, recognised by shape (`name === "LeaseLostError"`), for the same reason as
 * isCompactedError.
 */
export function isLeaseLostError(error: unknown): boolean {
  return error instanceof Error && error.name === "LeaseLostError";
}
