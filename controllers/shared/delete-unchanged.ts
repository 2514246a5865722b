// The last write of a removal: a controller deletes its records (spec, status, and what goes with
// them) in ONE transaction, each guarded by the modRevision it was read at. Shared by the PodGroup
// controller (spec, history, status, tasks) and the Dependency controller (spec, status).
//
// Invariant, kept here: a record is deleted only if nobody wrote it since the pass read it. A
// spec updated meanwhile (a DELETE withdrawn by a new create, a changed list of users) or a status
// written by someone else fails the whole transaction with StatusConflictError; the pass is
// retried and decides again from what is stored now. Nothing is deleted half.
import type { Op, Store, TxnResult } from "../../adapters/store/store.ts";
import { StatusConflictError } from "./errors.ts";

/** A record to delete only if its modRevision is still `modRevision`, with `alsoDelete` going with it (unguarded). */
export interface GuardedDelete {
  key: string;
  modRevision: number;
  alsoDelete?: Op[];
}

/**
 * Delete every `guarded` record (each only if unchanged) and apply `extra` (unguarded deletes),
 * all in one transaction, in that order. Absent records (undefined) are skipped. Nothing to
 * delete: no transaction, undefined. A failed compare: StatusConflictError(`conflict`).
 */
export async function deleteUnchanged(
  store: Store,
  guarded: readonly (GuardedDelete | undefined)[],
  extra: readonly Op[],
  conflict: string,
): Promise<TxnResult | undefined> {
  const compares = [];
  const ops: Op[] = [];
  for (const record of guarded) {
    if (!record) continue;
    compares.push({ key: record.key, target: "modRevision" as const, equals: record.modRevision });
    ops.push({ type: "delete", key: record.key }, ...(record.alsoDelete ?? []));
  }
  ops.push(...extra);
  if (ops.length === 0) return undefined;
  const res = await store.txn(compares, ops);
  if (!res.succeeded) throw new StatusConflictError(conflict);
  return res;
}
