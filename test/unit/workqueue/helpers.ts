// Shared helpers for the work queue tests.
import { flushMicrotasks } from "../../../runtime/clock.ts";
import type { GetResult, WorkQueue } from "../../../runtime/workqueue/index.ts";

/** Observe a promise without awaiting it: its state after pending microtasks have run. */
export function track<T>(p: Promise<T>): { readonly state: "pending" | "resolved" | "rejected"; value?: T; reason?: unknown } {
  const t: { state: "pending" | "resolved" | "rejected"; value?: T; reason?: unknown } = { state: "pending" };
  p.then(
    (v) => {
      t.state = "resolved";
      t.value = v;
    },
    (e: unknown) => {
      t.state = "rejected";
      t.reason = e;
    },
  );
  return t;
}

/** get() a key that must be ready now; fails the test otherwise. */
export async function take<K extends string>(q: WorkQueue<K>): Promise<{ key: K; priority: number }> {
  const t = track(q.get());
  await flushMicrotasks();
  const r: GetResult<K> | undefined = t.value;
  if (t.state !== "resolved" || r === undefined || r.shutdown) {
    throw new Error(`expected a ready key, got ${t.state} ${JSON.stringify(r)}`);
  }
  return { key: r.key, priority: r.priority };
}

/** Drain every ready key (calling done on each), in hand-out order. */
export async function drain<K extends string>(q: WorkQueue<K>): Promise<K[]> {
  const out: K[] = [];
  while (q.len() > 0) {
    const { key } = await take(q);
    out.push(key);
    q.done(key);
  }
  return out;
}

export { mulberry32 } from "../../helpers/prng.ts";
