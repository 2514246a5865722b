// The one way the orchestrator API writes its records (PodGroups in records.ts, dependencies in
// depends-records.ts). Each write is one store transaction: create-only for a new record,
// compare-and-swap on the key's modRevision for a change, so concurrent requests on any replica
// never overwrite each other (a lost race re-reads and re-applies the change). The rule is stated
// at the top of docs/orchestrator.md (and for creates, "Create: `POST /api/podgroups`").
import type { Compare, Op, Store } from "../../adapters/store/store.ts";
import { notAllowed, notFound, unavailable } from "../http/index.ts";

export interface Versioned<T> {
  record: T;
  modRevision: number;
}

/** Compares and operations a write adds to its own transaction (a PodGroup's dependency guard, its spec history). */
export interface TxnExtras {
  compares: Compare[];
  ops: Op[];
}

export const noExtras: TxnExtras = { compares: [], ops: [] };

/** What a record is called in the answers: `${kind} ${name} not found`, `... change it with ${changeWith}`. */
export interface RecordKind {
  kind: string;
  /** The method that changes an existing record (PATCH for a PodGroup, PUT for a dependency). */
  changeWith: string;
}

export async function readVersioned<T>(store: Store, key: string): Promise<Versioned<T> | null> {
  const kv = await store.get(key);
  if (kv === null) return null;
  return { record: JSON.parse(kv.value) as T, modRevision: kv.modRevision };
}

/**
 * Store a new record in one create-only transaction (no read before it); resolves with the
 * write's revision. `extras` (read again on every attempt) join the transaction: a lost race with
 * one of their compares while the key is still free is retried. A 409 AlreadyExists when the name
 * is taken (or still being deleted).
 */
export async function createOnly<T extends { deleting?: unknown }>(
  store: Store,
  key: string,
  name: string,
  record: T,
  what: RecordKind,
  extras: () => TxnExtras | Promise<TxnExtras> = () => noExtras,
  maxAttempts = 64,
): Promise<number> {
  let existing: Versioned<T> | null = null;
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const extra = await extras();
    const { succeeded, revision } = await store.txn(
      [{ key, target: "createRevision", equals: 0 }, ...extra.compares],
      [{ type: "put", key, value: JSON.stringify(record) }, ...extra.ops],
    );
    if (succeeded) return revision;
    // Lost to a change of an extra compare (a DELETE in flight): read it again.
    existing = await readVersioned<T>(store, key);
    if (existing !== null) break;
  }
  if (existing?.record.deleting) {
    throw notAllowed("AlreadyExists", `${what.kind} ${name} is being deleted; create it again once GET answers 404`);
  }
  throw notAllowed("AlreadyExists", `${what.kind} ${name} already exists; change it with ${what.changeWith}`);
}

export interface Updated<T> {
  written: boolean;
  record: T;
  /** The write's revision, or when nothing was written the modRevision of the record `change` saw. */
  revision: number;
}

/**
 * Apply `change` to the stored record with compare-and-swap, re-reading and re-applying it after a
 * lost race. `change` returns the new record, or undefined when there is nothing to write; it may
 * throw an ApiError (e.g. 409 InsufficientResources), which ends the update unwritten. A missing
 * record is a 404. Each round that loses a race means another writer won, so with N concurrent
 * writers N rounds always suffice; the bound only stops a pathological livelock. `extras` join the
 * transaction of each attempt.
 */
export async function compareAndSwap<T>(
  store: Store,
  key: string,
  name: string,
  what: RecordKind,
  change: (current: T) => T | undefined | Promise<T | undefined>,
  extras: (current: T, next: T) => TxnExtras | Promise<TxnExtras> = () => noExtras,
  maxAttempts = 64,
): Promise<Updated<T>> {
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const current = await readVersioned<T>(store, key);
    if (current === null) throw notFound(`${what.kind} ${name} not found`);
    const next = await change(current.record);
    if (next === undefined) return { written: false, record: current.record, revision: current.modRevision };
    const extra = await extras(current.record, next);
    const { succeeded, revision } = await store.txn(
      [{ key, target: "modRevision", equals: current.modRevision }, ...extra.compares],
      [{ type: "put", key, value: JSON.stringify(next) }, ...extra.ops],
    );
    if (succeeded) return { written: true, record: next, revision };
  }
  throw unavailable(`${what.kind} ${name} is being changed by too many concurrent requests; retry`);
}
