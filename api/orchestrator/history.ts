// The version history of a PodGroup's pod spec (docs/orchestrator.md, "Spec history"): every
// stored pod version, written in the same transaction as the spec that makes it, so the history
// can never miss or invent a version. The newest `historyDepth` are kept; a rollback is a PATCH
// cmd=spec with an older entry's pod, which becomes the next version (as `kubectl rollout undo`).
//
//   GET /api/podgroups/history?name=      200 SpecVersion[] (newest first) | 400 | 404
//
// Entries of an earlier group of the same name (deleted, then created again) may still be in the
// store until the controller's removal clears them; each entry names the createdAt of the group
// that wrote it, so they are never answered for the new one (no clock is compared).
import type { Op, Store } from "../../adapters/store/store.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import { keys } from "../resources/keys.ts";
import type { PodSpec, StoredPodGroup } from "../resources/podgroup.ts";

export const historyDepth = 20;

/** One stored pod version. */
export interface SpecVersion {
  version: number;
  pod: PodSpec & { name: string; version: number };
  /** When this version was written (the group's updatedAt then). */
  savedAt: string;
  /** The createdAt of the group that wrote it: which incarnation of the name it belongs to. */
  groupCreatedAt: string;
}

/** The history entries of group `name` live under this prefix. */
export const historyPrefix = (name: string) => `${keys.podGroupHistory}${name}/`;
const historyKey = (name: string, version: number) => `${historyPrefix(name)}${String(version).padStart(10, "0")}`;

/**
 * The ops that record `next`'s pod version, for the transaction that writes `next`: nothing when
 * the pod version did not change (a scale, a restart, a delete).
 */
export function historyOps(before: StoredPodGroup | undefined, next: StoredPodGroup): Op[] {
  if (before !== undefined && before.pod.version === next.pod.version) return [];
  const entry: SpecVersion = { version: next.pod.version, pod: next.pod, savedAt: next.updatedAt, groupCreatedAt: next.createdAt };
  const ops: Op[] = [{ type: "put", key: historyKey(next.name, next.pod.version), value: JSON.stringify(entry) }];
  if (next.pod.version > historyDepth) ops.push({ type: "delete", key: historyKey(next.name, next.pod.version - historyDepth) });
  return ops;
}

/** The group's stored versions, newest first: those of this incarnation of the name only. */
export async function readHistory(store: Store, group: StoredPodGroup): Promise<SpecVersion[]> {
  const { items } = await listAll(store, historyPrefix(group.name));
  const out: SpecVersion[] = [];
  for (const kv of items) {
    let entry: SpecVersion;
    try {
      entry = JSON.parse(kv.value) as SpecVersion;
    } catch {
      continue;
    }
    if (entry.version > group.pod.version || entry.groupCreatedAt !== group.createdAt) continue;
    out.push(entry);
  }
  return out.sort((a, b) => b.version - a.version);
}
