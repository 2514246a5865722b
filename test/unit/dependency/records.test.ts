// records.ts: the reference bookkeeping (the events table of docs/dependencies.md) and D1 (a pod is
// reclaimed only at count 0, GC time after both its verifyTime and its deployStartedAt). Table
// rows on a fake clock: `now` is t0 + a few ms.
import { describe, expect, it } from "vitest";
import { planRecords, previousRecords, reclaimAt, type RecordsInput } from "../../../controllers/dependency/records.ts";
import type { SlotRecord } from "../../../controllers/dependency/stored.ts";
import { gcMs, t0 } from "./fixtures.ts";

const slot = "n1|";
const at = (refCount: number, verifyTime: number, deployStartedAt = verifyTime): SlotRecord => ({ refCount, verifyTime, deployStartedAt });

interface Row {
  row: string;
  count: number;
  previous?: SlotRecord;
  occupied?: boolean;
  full?: boolean;
  now: number;
  record: SlotRecord | undefined;
  event?: string;
  due: boolean;
  wakeAt?: number;
}

const rows: Row[] = [
  { row: "events: add, first reference to a slot with no pod", count: 2, now: t0, record: at(2, t0), event: "add", due: false },
  { row: "events: add, a pod found without a record is adopted, counted from now (D1)", count: 0, occupied: true, now: t0, record: at(0, t0), event: "adopt", due: false, wakeAt: t0 + gcMs },
  { row: "no reference, no pod, no record: nothing", count: 0, now: t0, record: undefined, due: false },
  { row: "events: add, count went up, pod exists", count: 3, previous: at(1, t0 - 500, t0 - 900), occupied: true, now: t0, record: at(3, t0, t0 - 900), event: "count", due: false },
  { row: "events: remove, count went down, the pod is not removed", count: 1, previous: at(2, t0 - 500, t0 - 900), occupied: true, now: t0, record: at(1, t0, t0 - 900), event: "count", due: false },
  { row: "events: remove to 0 starts the GC time (D1)", count: 0, previous: at(1, t0 - 500, t0 - 900), occupied: true, now: t0, record: at(0, t0, t0 - 900), event: "count", due: false, wakeAt: t0 + gcMs },
  { row: "events: verify, a refresh while referenced", count: 2, previous: at(2, t0 - 500), occupied: true, full: true, now: t0, record: at(2, t0, t0 - 500), event: "verify", due: false },
  { row: "no refresh, count unchanged: the record as it is", count: 2, previous: at(2, t0 - 500), occupied: true, now: t0, record: at(2, t0 - 500), due: false },
  { row: "a refresh at count 0 does not verify", count: 0, previous: at(0, t0 - 500), occupied: true, full: true, now: t0, record: at(0, t0 - 500), due: false, wakeAt: t0 - 500 + gcMs },
  { row: "D1: 1 ms before the GC time: kept", count: 0, previous: at(0, t0 - gcMs + 1), occupied: true, now: t0, record: at(0, t0 - gcMs + 1), due: false, wakeAt: t0 + 1 },
  { row: "D1: at the GC time: due", count: 0, previous: at(0, t0 - gcMs), occupied: true, now: t0, record: at(0, t0 - gcMs), due: true },
  { row: "D1: GC time past verifyTime but not deployStartedAt: kept", count: 0, previous: at(0, t0 - gcMs - 5, t0 - 10), occupied: true, now: t0, record: at(0, t0 - gcMs - 5, t0 - 10), due: false, wakeAt: t0 - 10 + gcMs },
  { row: "D1: referenced again before its GC time: kept, never due", count: 1, previous: at(0, t0 - gcMs), occupied: true, now: t0, record: at(1, t0, t0 - gcMs), event: "count", due: false },
  { row: "D1: a record whose pod is gone is still reclaimed (its record dropped)", count: 0, previous: at(0, t0 - gcMs - 1), now: t0, record: at(0, t0 - gcMs - 1), due: true },
];

describe("planRecords (events table, D1)", () => {
  it.each(rows)("$row", (r) => {
    const input: RecordsInput = {
      counts: new Map(r.count > 0 ? [[slot, r.count]] : []),
      previous: new Map(r.previous ? [[slot, r.previous]] : []),
      occupied: new Set(r.occupied ? [slot] : []),
      now: r.now,
      full: r.full ?? false,
      gcMs,
    };
    const plan = planRecords(input);
    expect(plan.records.get(slot)).toEqual(r.record);
    expect(plan.events.map((e) => e.event)).toEqual(r.event ? [r.event] : []);
    expect(plan.due).toEqual(r.due ? [slot] : []);
    expect(plan.wakeAt).toEqual(r.wakeAt !== undefined ? [r.wakeAt] : []);
  });

  it("every slot with a record, a count or a container, in key order", () => {
    const plan = planRecords({
      counts: new Map([["n2|shop", 1]]),
      previous: new Map([["n1|", at(0, t0 - gcMs)]]),
      occupied: new Set(["n1|b"]),
      now: t0,
      full: false,
      gcMs,
    });
    expect([...plan.records.keys()]).toEqual(["n1|", "n1|b", "n2|shop"]);
    expect(plan.due).toEqual(["n1|"]);
  });

  it("reclaimAt is GC time after the later of verifyTime and deployStartedAt", () => {
    expect(reclaimAt(at(0, t0, t0 + 7), gcMs)).toBe(t0 + 7 + gcMs);
    expect(reclaimAt(at(0, t0 + 9, t0), gcMs)).toBe(t0 + 9 + gcMs);
  });

  it("previousRecords reads the stored pods; one whose times cannot be read has no record", () => {
    const pod = (node: string, verifyTime: string) => ({
      node, namespace: "", refCount: 1, verifyTime, deployStartedAt: new Date(t0).toISOString(),
      state: "running" as const, version: 1, restartCount: 0, lastError: "", containers: [],
    });
    const records = previousRecords([pod("n1", new Date(t0 + 5).toISOString()), pod("n2", "not a time")]);
    expect([...records]).toEqual([["n1|", at(1, t0 + 5, t0)]]);
  });
});
