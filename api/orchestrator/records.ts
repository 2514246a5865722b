// The API's reads and writes of PodGroup records. Each write is one store transaction: create-only
// for a new group, compare-and-swap on the key's modRevision for a change, so concurrent requests
// on any replica never overwrite each other (a lost race re-reads and re-applies the change).
import { randomUUID } from "node:crypto";
import type { KeyValue, Store } from "../../adapters/store/store.ts";
import { keys } from "../resources/keys.ts";
import type { PodGroupStatus, PodGroupWithSpec, StoredPodGroup } from "../resources/podgroup.ts";
import type { RefreshTask } from "../resources/task.ts";
import { notAllowed, notFound, unavailable } from "../http/index.ts";

export interface Versioned<T> {
  record: T;
  modRevision: number;
}

export async function getPodGroup(store: Store, name: string): Promise<Versioned<StoredPodGroup> | null> {
  const kv = await store.get(keys.podGroup(name));
  if (kv === null) return null;
  return { record: JSON.parse(kv.value) as StoredPodGroup, modRevision: kv.modRevision };
}

/** Store a new group; a 409 AlreadyExists when the name is taken (or still being deleted). */
export async function createPodGroup(store: Store, group: StoredPodGroup): Promise<void> {
  const key = keys.podGroup(group.name);
  const { succeeded } = await store.txn([{ key, target: "createRevision", equals: 0 }], [{ type: "put", key, value: JSON.stringify(group) }]);
  if (succeeded) return;
  const existing = await getPodGroup(store, group.name);
  if (existing?.record.deleting) {
    throw notAllowed("AlreadyExists", `podgroup ${group.name} is being deleted; create it again once GET answers 404`);
  }
  throw notAllowed("AlreadyExists", `podgroup ${group.name} already exists; change it with PATCH`);
}

/**
 * Apply `change` to the stored group with compare-and-swap, re-reading and re-applying it after a
 * lost race. `change` returns the new record, or undefined when there is nothing to write; it may
 * throw an ApiError (e.g. 409 InsufficientResources), which ends the update unwritten. A missing
 * group is a 404. Each round that loses a race means another writer won, so with N concurrent
 * writers N rounds always suffice; the bound only stops a pathological livelock.
 */
export async function updatePodGroup(
  store: Store,
  name: string,
  change: (current: StoredPodGroup) => StoredPodGroup | undefined,
  maxAttempts = 64,
): Promise<{ written: boolean; record: StoredPodGroup }> {
  const key = keys.podGroup(name);
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const current = await getPodGroup(store, name);
    if (current === null) throw notFound(`podgroup ${name} not found`);
    const next = change(current.record);
    if (next === undefined) return { written: false, record: current.record };
    const { succeeded } = await store.put(key, JSON.stringify(next), {
      expect: [{ key, target: "modRevision", equals: current.modRevision }],
    });
    if (succeeded) return { written: true, record: next };
  }
  throw unavailable(`podgroup ${name} is being changed by too many concurrent requests; retry`);
}

/** GET's answer: the spec with the controller's status, or a pending status before it has one. */
export async function getPodGroupWithStatus(store: Store, name: string): Promise<PodGroupWithSpec | null> {
  const [spec, status] = await Promise.all([store.get(keys.podGroup(name)), store.get(keys.podGroupStatusOf(name))]);
  if (spec === null) return null;
  return withStatus(JSON.parse(spec.value) as StoredPodGroup, status === null ? null : parseStatus(status.value));
}

/** Every group with its status, read at one store revision, in name order. */
export async function listPodGroupsWithStatus(store: Store): Promise<PodGroupWithSpec[]> {
  const specs = await listAll(store, keys.podGroups);
  const statuses = new Map<string, PodGroupStatus | "unreadable">();
  for (const kv of (await listAll(store, keys.podGroupStatus, specs.revision)).items) {
    statuses.set(kv.key.slice(keys.podGroupStatus.length), parseStatus(kv.value));
  }
  return specs.items.map((kv) => {
    const spec = JSON.parse(kv.value) as StoredPodGroup;
    return withStatus(spec, statuses.get(spec.name) ?? null);
  });
}

/** Write a refresh task for the PodGroup controller (GET ?force_update=true). */
export async function requestRefresh(store: Store, name: string, now: Date): Promise<RefreshTask> {
  const task: RefreshTask = { id: randomUUID(), kind: "refresh", podGroup: name, createdAt: now.toISOString() };
  await store.put(keys.task(task.id), JSON.stringify(task));
  return task;
}

function withStatus(spec: StoredPodGroup, status: PodGroupStatus | "unreadable" | null): PodGroupWithSpec {
  // While the controller removes the group it may not have said so yet; the spec's flag is the truth.
  const removing = spec.deleting === true;
  if (status === null || status === "unreadable") {
    const lastError = status === "unreadable" ? "the status record is not valid JSON; the controller rewrites it" : "";
    return { spec, state: removing ? "removing" : "pending", lastError, updatedAt: spec.updatedAt, observedVersion: 0, pods: [] };
  }
  const { internal: _internal, ...shown } = status;
  return { spec, ...shown, state: removing ? "removing" : shown.state };
}

/** A status the controller wrote; an unreadable one is shown as such rather than failing the GET. */
function parseStatus(value: string): PodGroupStatus | "unreadable" {
  try {
    return JSON.parse(value) as PodGroupStatus;
  } catch {
    return "unreadable";
  }
}

const pageSize = 1000;

async function listAll(store: Store, prefix: string, revision?: number): Promise<{ items: KeyValue[]; revision: number | undefined }> {
  const items: KeyValue[] = [];
  let startAfter: string | undefined;
  let at = revision;
  for (;;) {
    const page = await store.list(prefix, { limit: pageSize, ...(at !== undefined && { revision: at }), ...(startAfter !== undefined && { startAfter }) });
    at ??= page.revision;
    items.push(...page.items);
    const last = page.items.at(-1);
    if (!page.more || last === undefined) break;
    startAfter = last.key;
  }
  return { items, revision: at };
}
