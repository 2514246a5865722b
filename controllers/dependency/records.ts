// The reference bookkeeping of one pass (docs/dependencies.md, "Reference counts, VerifyTime and
// garbage collection"), as a plain function: from the counts derived from the store, the records
// of the stored status and the slots that hold containers, the records the pass keeps and the
// pods whose time is up. No I/O; `now` is wall-clock ms.
//
//   no record, count > 0            add:    verifyTime = deployStartedAt = now
//   no record, count 0, containers  adopt:  the same (a pod whose record was lost is counted from now)
//   count changed                   add / remove: refCount = count, verifyTime = now
//   count unchanged > 0, refresh    verify: verifyTime = now
//   count 0                         reclaimed once now >= max(verifyTime, deployStartedAt) + gc (D1)
import type { DependencyPodStatus } from "../../api/resources/dependency.ts";
import { readSlotRecord, type SlotRecord } from "./stored.ts";

/** A slot's record changed; what the docs call the event. */
export type RecordEvent =
  | { slot: string; event: "add" | "adopt"; refCount: number }
  | { slot: string; event: "count"; from: number; to: number }
  | { slot: string; event: "verify" };

export interface RecordsInput {
  /** Reference count per slot key (absent: none). */
  counts: ReadonlyMap<string, number>;
  /** The records of the stored status, by slot key (previousRecords). */
  previous: ReadonlyMap<string, SlotRecord>;
  /** Slot keys with at least one container of the dependency (kept or extra). */
  occupied: ReadonlySet<string>;
  now: number;
  /** A full refresh: a referenced slot is verified. */
  full: boolean;
  gcMs: number;
}

export interface RecordsPlan {
  /** The record of every slot the dependency has, by slot key, in key order. */
  records: Map<string, SlotRecord>;
  events: RecordEvent[];
  /** Slots whose count is 0 and whose GC time has come (D1), in key order. */
  due: string[];
  /** The GC times of the unreferenced slots not due yet: the pass looks again then. */
  wakeAt: number[];
}

/** When an unreferenced pod may be reclaimed: GC time after both its verifyTime and its deployStartedAt (D1). */
export function reclaimAt(record: SlotRecord, gcMs: number): number {
  return Math.max(record.verifyTime, record.deployStartedAt) + gcMs;
}

/** The slot records of a stored status, by slot key; an entry whose times cannot be read has none. */
export function previousRecords(pods: readonly DependencyPodStatus[]): Map<string, SlotRecord> {
  const previous = new Map<string, SlotRecord>();
  for (const pod of pods) {
    const record = readSlotRecord(pod);
    if (record) previous.set(`${pod.node}|${pod.namespace}`, record);
  }
  return previous;
}

export function planRecords(input: RecordsInput): RecordsPlan {
  const { counts, previous, now } = input;
  const plan: RecordsPlan = { records: new Map(), events: [], due: [], wakeAt: [] };
  const keys = [...new Set([...previous.keys(), ...counts.keys(), ...input.occupied])].sort();
  for (const slot of keys) {
    const count = counts.get(slot) ?? 0;
    const before = previous.get(slot);
    let record: SlotRecord;
    if (!before) {
      if (count === 0 && !input.occupied.has(slot)) continue;
      // add (the first reference), or a pod found without a record (its record was lost):
      // counted from now, so an adopted pod is never reclaimed early either.
      record = { refCount: count, verifyTime: now, deployStartedAt: now };
      plan.events.push({ slot, event: count > 0 ? "add" : "adopt", refCount: count });
    } else if (before.refCount !== count) {
      record = { ...before, refCount: count, verifyTime: now }; // add / remove
      plan.events.push({ slot, event: "count", from: before.refCount, to: count });
    } else if (count > 0 && input.full) {
      record = { ...before, verifyTime: now }; // verify
      plan.events.push({ slot, event: "verify" });
    } else {
      record = before;
    }
    plan.records.set(slot, record);
    if (count === 0) {
      const at = reclaimAt(record, input.gcMs);
      if (now >= at) plan.due.push(slot);
      else plan.wakeAt.push(at);
    }
  }
  return plan;
}
