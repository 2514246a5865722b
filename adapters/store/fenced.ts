// Fenced writes (docs/runtime.md, "Leader election and fencing"): a Store view for leader-only components in which every write
// also requires that the leader key still has the createRevision of *our* leadership term. A
// leader that was deposed (lease expired during a pause, network partition) cannot overwrite the
// new leader's work, however late it notices: the store refuses the write atomically.
//
// How outcomes look to the caller:
// - no fence (we are not the leader right now): the write is not attempted; NotLeaderError.
// - the write's compares failed: we read the leader key. If it no longer carries our term's
//   createRevision, leadership was lost: NotLeaderError (a deposed leader must stop, not retry a
//   compare-and-swap that can never succeed). Otherwise our own compares failed: the ordinary
//   {succeeded: false} of a compare-and-swap conflict.
// Reads, watches and leases pass straight through; they need no fence.
//
// A fenced txn cannot carry failure ops: the store runs them exactly when some compare fails,
// which includes the fence compare, i.e. precisely when we are no longer allowed to write.
import type { Compare, KeyValue, ListOptions, ListResult, Op, PutOptions, Store, TxnResult, Watch, WatchHandlers, Lease } from "./store.ts";

/** One leadership term: the leader key and its createRevision when we created it. */
export interface Fence {
  key: string;
  createRevision: number;
}

/** The write was refused because this process is not (or no longer) the leader. */
export class NotLeaderError extends Error {
  override readonly name = "NotLeaderError";
  constructor(
    readonly leaderKey: string | undefined,
    reason: string,
  ) {
    super(`not the leader: ${reason}`);
  }
}

/** The caller asked for something a fenced store cannot do safely. */
export class FencedWriteArgumentError extends TypeError {
  override readonly name = "FencedWriteArgumentError";
}

/**
 * A view of `store` whose writes are fenced by `fence()` (read at every write; typically
 * `() => elector.fence()`). close() does not close `store`: the view does not own it.
 */
export function fencedStore(store: Store, fence: () => Fence | null): Store {
  const current = (): Fence => {
    const f = fence();
    if (!f) throw new NotLeaderError(undefined, "no leadership term held");
    return f;
  };
  const guard = (f: Fence): Compare => ({ key: f.key, target: "createRevision", equals: f.createRevision });

  /** After a failed write: leadership lost (throw) or an ordinary compare failure (return). */
  const explain = async (f: Fence, result: TxnResult): Promise<TxnResult> => {
    const holder = await store.get(f.key);
    if (!holder) throw new NotLeaderError(f.key, "the leader key is gone (lease expired or revoked)");
    if (holder.createRevision !== f.createRevision) {
      throw new NotLeaderError(f.key, `another term holds the leader key (created at revision ${holder.createRevision})`);
    }
    return result;
  };

  return {
    description: `${store.description} (writes fenced)`,
    get: (key: string): Promise<KeyValue | null> => store.get(key),
    list: (prefix: string, options?: ListOptions): Promise<ListResult> => store.list(prefix, options),
    watch: (prefix: string, fromRevision: number, handlers: WatchHandlers): Watch => store.watch(prefix, fromRevision, handlers),
    revision: (): Promise<number> => store.revision(),
    grantLease: (ttlSeconds: number): Promise<Lease> => store.grantLease(ttlSeconds),

    async put(key: string, value: string, options?: PutOptions): Promise<TxnResult> {
      const f = current();
      const result = await store.put(key, value, { ...options, expect: [...(options?.expect ?? []), guard(f)] });
      return result.succeeded ? result : explain(f, result);
    },

    async delete(key: string, options?: { expect?: Compare[] }): Promise<TxnResult> {
      const f = current();
      const result = await store.delete(key, { expect: [...(options?.expect ?? []), guard(f)] });
      return result.succeeded ? result : explain(f, result);
    },

    async deletePrefix(prefix: string): Promise<TxnResult> {
      const f = current();
      const result = await store.txn([guard(f)], [{ type: "deletePrefix", prefix }]);
      return result.succeeded ? result : explain(f, result);
    },

    async txn(compares: Compare[], success: Op[], failure?: Op[]): Promise<TxnResult> {
      if (failure && failure.length > 0) {
        throw new FencedWriteArgumentError("fencedStore.txn: failure ops cannot be fenced; run them as a separate fenced write");
      }
      const f = current();
      const result = await store.txn([...compares, guard(f)], success);
      return result.succeeded ? result : explain(f, result);
    },

    /** Compaction cannot carry a compare; only the current leader may ask for it. */
    async compact(revision: number): Promise<void> {
      current();
      await store.compact(revision);
    },

    async close(): Promise<void> {},
  };
}
