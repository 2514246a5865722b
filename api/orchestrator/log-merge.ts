// Merging the logs of several containers into one stream (docs/orchestrator.md, "Logs"). Each
// source yields batches of records, in its own order; the merges yield batches too, so a response
// is written in few large pieces rather than one per line.
//
//   byTime     a log read to its end: a k-way merge on the engine's times, the streams read in
//              step, so memory holds one batch per source. Equal times keep the sources' order.
//   following  a follow stream in time order: a record waits until every other live source has
//              shown a record at or after its time (so none earlier can still come from it). And
//              once the record that arrived first of those waiting has waited `holdMs`, it goes,
//              with every record not later than it. The tails every source sends at once come out
//              merged; no line waits longer than holdMs, whatever another source's clock says, and
//              a quiet source holds nobody back for longer. At most `maxHeld` records per source
//              wait here; a source with that many is not read until some are out.
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

export async function* mergeFollowing(sources: readonly Source[], holdMs = 250, maxHeld = 4096, now: () => number = () => performance.now()): AsyncGenerator<LogRecord[], void, undefined> {
  const its = sources.map((s) => s[Symbol.asyncIterator]());
  /** Waiting records, sorted by time, then arrival. */
  const held: { rec: LogRecord; source: number; at: number }[] = [];
  const heldBy = sources.map(() => 0);
  /** The latest time each source has shown; its next record is not earlier (one container's log is in order). */
  const latest = sources.map(() => "");
  const ended = sources.map(() => false);
  const reads = new Map<number, Promise<[number, IteratorResult<LogRecord[]>]>>();
  const read = (i: number) => {
    if (reads.has(i) || ended[i] || heldBy[i]! >= maxHeld) return;
    const p = its[i]!.next().then((r) => [i, r] as [number, IteratorResult<LogRecord[]>]);
    p.catch(() => undefined); // a read still outstanding when the merge stops must not go unhandled
    reads.set(i, p);
  };
  const hold = (rec: LogRecord, source: number, at: number) => {
    // Insert after every record not later than it (binary search): equal times keep arrival order.
    let lo = 0;
    let hi = held.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (held[mid]!.rec.time <= rec.time) lo = mid + 1;
      else hi = mid;
    }
    held.splice(lo, 0, { rec, source, at });
    heldBy[source]!++;
    if (rec.time > latest[source]!) latest[source] = rec.time;
  };
  /** Whether the first waiting record may go: no other live source can still send an earlier one. */
  const mayGo = (h: { rec: LogRecord; source: number }) => latest.every((time, j) => j === h.source || ended[j] || time >= h.rec.time);
  /** The waiting record that arrived first (its wait bounds every other's). */
  const firstArrived = () => held.reduce<(typeof held)[number] | undefined>((a, h) => (a === undefined || h.at < a.at ? h : a), undefined);
  its.forEach((_, i) => read(i));
  let timer: NodeJS.Timeout | undefined;
  try {
    for (;;) {
      const t = now();
      const out: LogRecord[] = [];
      const release = () => {
        const h = held.shift()!;
        heldBy[h.source]!--;
        out.push(h.rec);
      };
      for (;;) {
        while (held.length > 0 && mayGo(held[0]!)) release();
        const first = firstArrived();
        if (first === undefined || t - first.at < holdMs) break;
        // It waited long enough: it goes, with everything not later than it (they sort before it).
        while (held.length > 0 && held[0]!.rec.time <= first.rec.time) release();
      }
      if (out.length > 0) {
        yield out;
        its.forEach((_, i) => read(i));
      }
      if (reads.size === 0 && held.length === 0) return;
      const waits: Promise<[number, IteratorResult<LogRecord[]>] | "due">[] = [...reads.values()];
      if (held.length > 0) {
        const due = Math.max(0, firstArrived()!.at + holdMs - now());
        waits.push(new Promise((resolve) => (timer = setTimeout(() => resolve("due"), due))));
      }
      const next = await Promise.race(waits);
      clearTimeout(timer);
      if (next === "due") continue;
      const [i, r] = next;
      reads.delete(i);
      if (r.done) {
        ended[i] = true;
        continue;
      }
      const at = now();
      for (const rec of r.value) hold(rec, i, at);
      read(i);
    }
  } finally {
    clearTimeout(timer);
    stopAll(its);
  }
}

function stopAll(its: AsyncIterator<LogRecord[]>[]): void {
  for (const it of its) void it.return?.(undefined)?.catch(() => undefined);
}
