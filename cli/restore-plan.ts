// What `capstan restore` writes (docs/backup.md): the difference between the store now and a
// backup, as ordinary puts and deletes, so that a running platform's controllers converge the
// engines to the restored state. A plain function of the two key sets.
//
// - A key of the backup whose value differs now, or that is gone, is put back. A key equal to the
//   backup's is not written at all: its watchers see nothing, and a group that did not change is
//   not touched (no pass, no restart).
// - A key not in the backup is deleted, except a PodGroup or a dependency created since: deleting
//   its record would leave its containers running, unowned (the controllers never remove what no
//   record names: the engines may be shared with another platform). It is marked for deletion
//   instead, as DELETE does, and the controller removes its containers and then its keys; its
//   status and pod history stay for that removal.
// - Keys attached to a lease (leader keys) are neither backed up nor touched: they belong to the
//   processes running now.
// - Tasks and notify delivery markers are neither put back nor deleted: they record what was done
//   since (a finished task put back would run again; a delivery marker removed or put back at an
//   older count would send an event again).
// - A group or dependency whose spec is the backup's keeps its status and history as they are now:
//   the status of a spec that did not change describes the engines now, the backup's an older past.
// - Every write is conditional on the key being as it was when the plan was read (`expected`: its
//   modRevision, 0 for absent), so a restore never overwrites a change made in the meantime.
//
// The ops come in units that must not be split across transactions where it can be helped: a
// group's spec, status and history together, so a controller never sees a restored status
// without its spec (which it would take for a deletion behind its back).
import type { KeyValue, Op } from "../adapters/store/store.ts";
import { keys } from "../api/resources/keys.ts";
import { notifyKeys } from "../api/resources/notify.ts";

export interface RestorePlan {
  units: Op[][];
  puts: number;
  deletes: number;
  /** PodGroups and dependencies created since the backup, marked for deletion. */
  removing: string[];
  unchanged: number;
  /** Key -> modRevision when planned (0: absent), for every key the plan writes. */
  expected: Map<string, number>;
}

/** Keys that record what happened since, left as they are now (see above). */
function leftAlone(key: string): boolean {
  return key.startsWith(keys.tasks) || key.startsWith(notifyKeys.delivered);
}

/** The spec key of a group or dependency unit; undefined for other units. */
function specKeyOf(unit: string): string | undefined {
  if (unit.startsWith("pg:")) return keys.podGroup(unit.slice(3));
  if (unit.startsWith("dep:")) return `${keys.depends}${unit.slice(4)}`;
  return undefined;
}

/** The resource a key belongs to, for grouping (a PodGroup's spec, status and history; a dependency's spec and status). */
function unitOf(key: string): string {
  for (const [prefix, kind] of [
    [keys.podGroups, "pg"],
    [keys.podGroupStatus, "pg"],
    [keys.depends, "dep"],
    [keys.dependStatus, "dep"],
  ] as const) {
    if (key.startsWith(prefix)) return `${kind}:${key.slice(prefix.length)}`;
  }
  if (key.startsWith(keys.podGroupHistory)) return `pg:${key.slice(keys.podGroupHistory.length).split("/")[0]}`;
  return `key:${key}`;
}

/** `current`: every key under the backup's prefix now (leased ones are skipped here). */
export function planRestore(current: KeyValue[], backup: Map<string, string>, now: string): RestorePlan {
  const units = new Map<string, Op[]>();
  const add = (key: string, op: Op) => {
    const unit = unitOf(key);
    const ops = units.get(unit);
    if (ops) ops.push(op);
    else units.set(unit, [op]);
  };
  const live = new Map<string, KeyValue>();
  const leased = new Set<string>();
  for (const kv of current) {
    if (kv.lease === undefined) live.set(kv.key, kv);
    else leased.add(kv.key);
  }
  let puts = 0;
  let deletes = 0;
  let unchanged = 0;
  // A spec the same in both: its status and history are left as they are now.
  const keepsStatus = (key: string): boolean => {
    const spec = specKeyOf(unitOf(key));
    if (spec === undefined || spec === key) return false;
    const before = backup.get(spec);
    return before !== undefined && live.get(spec)?.value === before;
  };
  for (const [key, value] of backup) {
    // A key a live process holds under its lease now (a leader key) is that process's.
    if (leased.has(key) || leftAlone(key)) continue;
    if (live.get(key)?.value === value || keepsStatus(key)) {
      unchanged++;
      continue;
    }
    add(key, { type: "put", key, value });
    puts++;
  }
  // Groups and dependencies the backup does not know: removed by their controllers, not here.
  const removing = new Set<string>();
  for (const kv of live.values()) {
    if (backup.has(kv.key)) continue;
    const unit = unitOf(kv.key);
    const isRecord = kv.key.startsWith(keys.podGroups) || kv.key.startsWith(keys.depends);
    if (!isRecord) continue;
    removing.add(unit);
    const marked = markDeleting(kv.value, kv.key.startsWith(keys.podGroups) ? true : { force: false }, now);
    if (marked !== undefined) {
      add(kv.key, { type: "put", key: kv.key, value: marked });
      puts++;
    }
  }
  for (const kv of live.values()) {
    if (backup.has(kv.key) || removing.has(unitOf(kv.key)) || leftAlone(kv.key) || keepsStatus(kv.key)) continue;
    add(kv.key, { type: "delete", key: kv.key });
    deletes++;
  }
  const names = [...removing].map((u) => u.replace(/^pg:/, "podgroup ").replace(/^dep:/, "dependency ")).sort();
  const expected = new Map<string, number>();
  for (const op of [...units.values()].flat()) if (op.type !== "deletePrefix") expected.set(op.key, live.get(op.key)?.modRevision ?? 0);
  return { units: [...units.values()], puts, deletes, removing: names, unchanged, expected };
}

/** The record with `deleting` set, as DELETE sets it; undefined when it is already being deleted (or not JSON). */
function markDeleting(value: string, deleting: true | { force: boolean }, now: string): string | undefined {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(value) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof record !== "object" || record === null || (record.deleting !== undefined && record.deleting !== false && record.deleting !== null)) return undefined;
  return JSON.stringify({ ...record, deleting, updatedAt: now });
}
