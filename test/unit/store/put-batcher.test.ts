// PutBatcher's batching rules against an in-memory txn whose answers the test releases one at a
// time: what goes together, in what order, and whose promise settles how.
import { describe, expect, it } from "vitest";
import { PutBatcher } from "../../../adapters/store/put-batcher.ts";
import type { Op, TxnResult } from "../../../adapters/store/store.ts";

interface Call {
  keys: string[];
  answer(result: TxnResult | Error): void;
}

/** A txn that records each call and answers when told to. */
class HeldTxn {
  readonly calls: Call[] = [];
  txn = (_compares: unknown[], success: Op[]): Promise<TxnResult> =>
    new Promise((resolve, reject) => {
      this.calls.push({
        keys: success.map((op) => (op.type === "put" ? op.key : "?")),
        answer: (r) => (r instanceof Error ? reject(r) : resolve(r)),
      });
    });
}

/** Lets the batcher act: microtasks settle, then its check-phase send runs (scheduled after ours, hence two). */
const turn = async () => {
  for (let i = 0; i < 2; i++) await new Promise((r) => setImmediate(r));
};

/** A batcher whose last transaction carried three puts (so it counts as under load), answered. */
async function afterBatchOfThree(lingerMs: number): Promise<{ store: HeldTxn; b: PutBatcher }> {
  const store = new HeldTxn();
  const b = new PutBatcher(store, { lingerMs });
  const three = ["/a", "/b", "/c"].map((k) => b.put(k, "1"));
  await turn();
  store.calls[0]!.answer({ succeeded: true, revision: 1 });
  await Promise.all(three);
  return { store, b };
}

describe("PutBatcher", () => {
  it("sends a lone put at once and resolves it with its transaction's revision", async () => {
    const store = new HeldTxn();
    const b = new PutBatcher(store);
    const p = b.put("/a", "1");
    await turn();
    expect(store.calls.map((c) => c.keys)).toEqual([["/a"]]);
    store.calls[0]!.answer({ succeeded: true, revision: 7 });
    await expect(p).resolves.toBe(7);
  });

  it("sends the puts made in one turn together, and those made while it is in flight as the next transaction", async () => {
    const store = new HeldTxn();
    const b = new PutBatcher(store);
    const first = [b.put("/a", "1"), b.put("/b", "1")];
    await turn();
    const later = [b.put("/c", "1"), b.put("/d", "1"), b.put("/e", "1")];
    await turn();
    expect(store.calls.map((c) => c.keys)).toEqual([["/a", "/b"]]); // one in flight at a time
    store.calls[0]!.answer({ succeeded: true, revision: 10 });
    await turn();
    expect(store.calls.map((c) => c.keys)).toEqual([["/a", "/b"], ["/c", "/d", "/e"]]);
    store.calls[1]!.answer({ succeeded: true, revision: 11 });
    expect(await Promise.all([...first, ...later])).toEqual([10, 10, 11, 11, 11]);
  });

  it("never puts a key twice in one transaction: the second put of it leads the next, so puts of a key commit in order", async () => {
    const store = new HeldTxn();
    const b = new PutBatcher(store);
    const puts = [b.put("/a", "1"), b.put("/b", "1"), b.put("/a", "2"), b.put("/c", "1")];
    await turn();
    expect(store.calls.map((c) => c.keys)).toEqual([["/a", "/b"]]);
    store.calls[0]!.answer({ succeeded: true, revision: 3 });
    await turn();
    expect(store.calls[1]!.keys).toEqual(["/a", "/c"]);
    store.calls[1]!.answer({ succeeded: true, revision: 4 });
    expect(await Promise.all(puts)).toEqual([3, 3, 4, 4]);
  });

  it("splits at maxOps and at maxBytes, and sends a put larger than maxBytes alone", async () => {
    const store = new HeldTxn();
    const b = new PutBatcher(store, { maxOps: 2, maxBytes: 20 });
    const puts = [b.put("/a", "1"), b.put("/b", "1"), b.put("/c", "1"), b.put("/d", "x".repeat(10)), b.put("/e", "y".repeat(10)), b.put("/f", "z".repeat(50)), b.put("/g", "1")];
    const sent: string[][] = [];
    for (let i = 0; i < 5; i++) {
      await turn();
      const call = store.calls[i]!;
      sent.push(call.keys);
      call.answer({ succeeded: true, revision: 100 + i });
    }
    expect(sent).toEqual([["/a", "/b"], ["/c", "/d"], ["/e"], ["/f"], ["/g"]]);
    expect(await Promise.all(puts)).toEqual([100, 100, 101, 101, 102, 103, 104]);
  });

  it("fails exactly the puts of a failed transaction and goes on with the next", async () => {
    const store = new HeldTxn();
    const b = new PutBatcher(store);
    const failed = [b.put("/a", "1"), b.put("/b", "1")];
    await turn();
    const next = b.put("/c", "1");
    store.calls[0]!.answer(new Error("etcd unavailable"));
    for (const p of failed) await expect(p).rejects.toThrow("etcd unavailable");
    await turn();
    expect(store.calls[1]!.keys).toEqual(["/c"]);
    store.calls[1]!.answer({ succeeded: true, revision: 9 });
    await expect(next).resolves.toBe(9);
  });

  it("under load, waits for the writers just answered: sends once as many puts are queued as the last transaction carried plus those waiting", async () => {
    const store = new HeldTxn();
    const b = new PutBatcher(store, { lingerMs: 60_000 });
    const first = ["/a", "/b", "/c"].map((k) => b.put(k, "1"));
    await turn();
    const waiting = b.put("/d", "1"); // queued while the first is in flight
    store.calls[0]!.answer({ succeeded: true, revision: 1 });
    await Promise.all(first);
    await turn();
    expect(store.calls).toHaveLength(1); // 3 answered + 1 waiting: lingers for 4 queued
    const more = ["/e", "/f"].map((k) => b.put(k, "1"));
    await turn();
    expect(store.calls).toHaveLength(1);
    more.push(b.put("/g", "1")); // the fourth
    await turn();
    expect(store.calls.map((c) => c.keys)).toEqual([["/a", "/b", "/c"], ["/d", "/e", "/f", "/g"]]);
    store.calls[1]!.answer({ succeeded: true, revision: 2 });
    expect(await Promise.all([waiting, ...more])).toEqual([2, 2, 2, 2]);
  });

  it("under load, sends what came after lingerMs; idle, or with lingerMs 0, sends at once", async () => {
    const { store, b } = await afterBatchOfThree(40);
    const started = performance.now();
    const lone = b.put("/d", "1");
    await turn();
    expect(store.calls).toHaveLength(1);
    while (store.calls.length < 2) await new Promise((r) => setTimeout(r, 5));
    expect(performance.now() - started).toBeGreaterThanOrEqual(35);
    store.calls[1]!.answer({ succeeded: true, revision: 2 });
    await lone;
    // The last transaction carried one put: idle, the next goes this turn.
    const next = b.put("/e", "1");
    await turn();
    expect(store.calls).toHaveLength(3);
    store.calls[2]!.answer({ succeeded: true, revision: 3 });
    await next;

    const { store: eager, b: e } = await afterBatchOfThree(0);
    void e.put("/d", "1");
    await turn();
    expect(eager.calls).toHaveLength(2);
  });

  it("refuses limits below one and a negative linger", () => {
    const store = new HeldTxn();
    expect(() => new PutBatcher(store, { maxOps: 0 })).toThrow(RangeError);
    expect(() => new PutBatcher(store, { maxBytes: 0 })).toThrow(RangeError);
    expect(() => new PutBatcher(store, { lingerMs: -1 })).toThrow(RangeError);
  });
});
