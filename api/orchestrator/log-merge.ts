// Merging the logs of several containers into one stream (docs/orchestrator.md, "Logs"). Each
// source yields batches of records, in its own order; the merges yield batches too, so a response
// is written in few large pieces rather than one per line.
//
//   byTime     a log read to its end: a k-way merge on the engine's times, the streams read in
//              step, so memory holds one batch per source. Equal times keep the sources' order.
//   byArrival  a follow stream: each batch as soon as it arrives, whichever source it came from.
//              Each source has one read outstanding, so a slow client slows every source down
//              instead of queueing their output here.
//
// Sources must not throw (a failure is a record, LogFailure); a merge that is stopped (its consumer
// breaks out) asks every source to stop, without waiting for one that is waiting for input: the
// caller ends such a wait by aborting the sources' reads.
import type { LogRecord } from "./log-lines.ts";

type Source = AsyncIterable<LogRecord[]>;

export async function* mergeByTime(sources: readonly Source[], batchSize = 512): AsyncGenerator<LogRecord[], void, undefined> {
  const its = sources.map((s) => s[Symbol.asyncIterator]());
  const heads = its.map(() => ({ batch: [] as LogRecord[], at: 0, done: false }));
  try {
    let out: LogRecord[] = [];
    for (;;) {
      const empty = heads.flatMap((h, i) => (!h.done && h.at >= h.batch.length ? [i] : []));
      if (empty.length > 0) {
        // Every live source needs its next record before the earliest can be told.
        if (out.length > 0) {
          yield out;
          out = [];
        }
        await Promise.all(
          empty.map(async (i) => {
            const r = await its[i]!.next();
            const h = heads[i]!;
            if (r.done) h.done = true;
            else Object.assign(h, { batch: r.value, at: 0 });
          }),
        );
        continue;
      }
      let best = -1;
      for (let i = 0; i < heads.length; i++) {
        const h = heads[i]!;
        if (h.done) continue;
        if (best < 0 || h.batch[h.at]!.time < heads[best]!.batch[heads[best]!.at]!.time) best = i;
      }
      if (best < 0) break;
      const h = heads[best]!;
      out.push(h.batch[h.at++]!);
      if (out.length >= batchSize) {
        yield out;
        out = [];
      }
    }
    if (out.length > 0) yield out;
  } finally {
    stopAll(its);
  }
}

export async function* mergeByArrival(sources: readonly Source[]): AsyncGenerator<LogRecord[], void, undefined> {
  const its = sources.map((s) => s[Symbol.asyncIterator]());
  const reads = new Map<number, Promise<[number, IteratorResult<LogRecord[]>]>>();
  const read = (i: number) => {
    const p = its[i]!.next().then((r) => [i, r] as [number, IteratorResult<LogRecord[]>]);
    p.catch(() => undefined); // a read still outstanding when the merge stops must not go unhandled
    reads.set(i, p);
  };
  its.forEach((_, i) => read(i));
  try {
    while (reads.size > 0) {
      const [i, r] = await Promise.race(reads.values());
      if (r.done) {
        reads.delete(i);
        continue;
      }
      read(i);
      if (r.value.length > 0) yield r.value;
    }
  } finally {
    stopAll(its);
  }
}

function stopAll(its: AsyncIterator<LogRecord[]>[]): void {
  for (const it of its) void it.return?.(undefined)?.catch(() => undefined);
}
