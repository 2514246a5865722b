// The API's reads and writes of PodGroup records. Each write is one store transaction, create-only
// or compare-and-swap (versioned-writes.ts), so concurrent requests on any replica never overwrite
// each other.
// GETs are answered from the informer caches by PodGroupReader, with the consistency rules
// written there (and in docs/orchestrator.md, "Reads").
import { randomUUID } from "node:crypto";
import type { Compare, Op, Store } from "../../adapters/store/store.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import type { Informer } from "../../runtime/informer.ts";
import { ReadYourWrites } from "../../runtime/read-your-writes.ts";
import { keys } from "../resources/keys.ts";
import type { PodGroupWithSpec, StoredPodGroup } from "../resources/podgroup.ts";
import type { RefreshTask } from "../resources/task.ts";
import { notAllowed } from "../http/index.ts";
import { historyOps } from "./history.ts";
import { parseStatusValue, type CachedStatus } from "./informers.ts";
import { compareAndSwap, createOnly, readVersioned, noExtras, type RecordKind, type TxnExtras, type Updated, type Versioned } from "./versioned-writes.ts";

export type { Versioned } from "./versioned-writes.ts";

const podGroupKind: RecordKind = { kind: "podgroup", changeWith: "PATCH" };

export async function getPodGroup(store: Store, name: string): Promise<Versioned<StoredPodGroup> | null> {
  return readVersioned<StoredPodGroup>(store, keys.podGroup(name));
}

/**
 * Store a new group in one create-only transaction (no read before it); resolves with the write's
 * revision. A 409 AlreadyExists when the name is taken (or still being deleted).
 */
export async function createPodGroup(store: Store, group: StoredPodGroup, maxAttempts = 64): Promise<number> {
  return createOnly(store, keys.podGroup(group.name), group.name, group, podGroupKind, async () => {
    const guard = await dependencyGuard(store, group);
    return { compares: guard.compares, ops: [...guard.ops, ...historyOps(undefined, group)] };
  }, maxAttempts);
}

/**
 * Apply `change` to the stored group with compare-and-swap (versioned-writes.ts compareAndSwap:
 * re-read and re-applied after a lost race, 404 for a missing group, an ApiError from `change`
 * ends it unwritten). Every write also touches the group's dependencies (dependencyGuard) unless
 * it marks the group deleted, and records a new pod version in the spec history.
 */
export async function updatePodGroup(
  store: Store,
  name: string,
  change: (current: StoredPodGroup) => StoredPodGroup | undefined,
  maxAttempts = 64,
): Promise<Updated<StoredPodGroup>> {
  return compareAndSwap(store, keys.podGroup(name), name, podGroupKind, change, async (current, next) => {
    const guard = next.deleting ? noExtras : await dependencyGuard(store, next);
    return { compares: guard.compares, ops: [...guard.ops, ...historyOps(current, next)] };
  }, maxAttempts);
}

/**
 * Writing a group that lists dependencies touches each of them in the same transaction (the same
 * value put back, compared on the modRevision read): a DELETE of a dependency compares that
 * modRevision too, after it has listed the groups that use it, so one of the two writes loses and
 * re-reads (docs/dependencies.md, "Deleting"). A dependency being deleted cannot be listed anew:
 * 409, as its pods are going.
 */
async function dependencyGuard(store: Store, group: StoredPodGroup): Promise<TxnExtras> {
  const names = [...new Set((group.pod?.dependencies ?? []).map((d) => d.podName))];
  if (names.length === 0) return noExtras;
  const compares: Compare[] = [];
  const ops: Op[] = [];
  for (const name of names) {
    const depKey = `${keys.depends}${name}`;
    const kv = await store.get(depKey);
    if (kv === null) continue; // not created yet: nothing to delete under the group
    if ((JSON.parse(kv.value) as { deleting?: unknown }).deleting) {
      throw notAllowed("DependencyDeleting", `dependency ${name} is being deleted; create it again (or list another) before podgroup ${group.name} uses it`);
    }
    compares.push({ key: depKey, target: "modRevision", equals: kv.modRevision });
    ops.push({ type: "put", key: depKey, value: kv.value });
  }
  return { compares, ops };
}

/** GET's answer: the spec with the controller's status, or a pending status before it has one. */
export async function getPodGroupWithStatus(store: Store, name: string): Promise<PodGroupWithSpec | null> {
  const [spec, status] = await Promise.all([store.get(keys.podGroup(name)), store.get(keys.podGroupStatusOf(name))]);
  if (spec === null) return null;
  return withStatus(JSON.parse(spec.value) as StoredPodGroup, status === null ? null : parseStatusValue(status.value));
}

/** Every group with its status, read at one store revision, in name order. */
export async function listPodGroupsWithStatus(store: Store): Promise<PodGroupWithSpec[]> {
  const specs = await listAll(store, keys.podGroups);
  const statuses = new Map<string, CachedStatus>();
  for (const kv of (await listAll(store, keys.podGroupStatus, specs.revision)).items) {
    statuses.set(kv.key.slice(keys.podGroupStatus.length), parseStatusValue(kv.value));
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

function withStatus(spec: StoredPodGroup, status: CachedStatus | null): PodGroupWithSpec {
  // While the controller removes the group it may not have said so yet; the spec's flag is the truth.
  const removing = spec.deleting === true;
  if (status === null || status === "unreadable") {
    const lastError = status === "unreadable" ? "the status record is not valid JSON; the controller rewrites it" : "";
    return { spec, state: removing ? "removing" : "pending", lastError, updatedAt: spec.updatedAt, observedVersion: 0, pods: [] };
  }
  const { internal: _internal, instanceBase: _instanceBase, ...shown } = status;
  return { spec, ...shown, state: removing ? "removing" : shown.state };
}

/**
 * GET's reads, answered from the podgroups and podgroup-status informers instead of two store reads
 * per request. The consistency a client sees (docs/orchestrator.md, "Reads"):
 *
 * - Read-your-own-writes on a replica: every spec write made through this replica's API is noted
 *   with its revision; a GET of that group first waits until the spec cache reflects it, and
 *   GET _all until the cache reflects every write noted. An answer never shows a spec older than
 *   one this replica wrote (or said was unchanged), and the cache only moves forward, so
 *   successive GETs on one replica never go back in time either.
 * - A miss is confirmed by the store: a group created through another replica a moment ago (its
 *   event not yet delivered here) is read from the store, never answered 404 from the cache.
 * - When the caches are behind (not synced yet, or the spec cache does not reach the write within
 *   `catchUpMs` because its watch is down or relisting), the GET reads the store: an informer that
 *   is behind never makes an answer older than the store.
 * - Otherwise a change written through another replica shows here once its watch event arrives
 *   (milliseconds); status records are the controller's, and trail the spec as they always have.
 *
 * Waiting per group rather than for the replica's latest write keeps a GET of one group from
 * queueing behind the watch events of other groups' writes under a busy mix.
 *
 * Why not linearizable reads from the cache (Kubernetes' consistent reads from its watch cache):
 * they need the store's current revision per request and a watch progress request to bring the
 * cache up to it, and etcd before 3.4.31 / 3.5.13 cannot answer progress requests safely (see
 * EtcdStore.progressRequestsSafe); waiting for the periodic progress notification instead would
 * cost up to its interval per GET.
 */
export class PodGroupReader {
  /** This replica's spec writes, per group name, against the spec cache. */
  private readonly writes: ReadYourWrites;

  constructor(
    private readonly store: Store,
    private readonly specs: Informer<StoredPodGroup>,
    private readonly statuses: Informer<CachedStatus> | undefined,
    catchUpMs = 1_000,
  ) {
    this.writes = new ReadYourWrites(specs, catchUpMs);
  }

  /** After a write of `name`'s spec through this replica (POST, PATCH, DELETE): later GETs reflect it. */
  wrote(name: string, revision: number): void {
    this.writes.wrote(name, revision);
  }

  async get(name: string): Promise<PodGroupWithSpec | null> {
    if (!(await this.current(name))) return getPodGroupWithStatus(this.store, name);
    const spec = this.specs.get(keys.podGroup(name));
    if (spec === undefined) return getPodGroupWithStatus(this.store, name);
    return withStatus(spec, this.statuses!.get(keys.podGroupStatusOf(name)) ?? null);
  }

  /** Every group with its status, in name order (the store's key order: names are ASCII). */
  async list(): Promise<PodGroupWithSpec[]> {
    if (!(await this.current())) return listPodGroupsWithStatus(this.store);
    const statuses = this.statuses!;
    return this.specs
      .list()
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((spec) => withStatus(spec, statuses.get(keys.podGroupStatusOf(spec.name)) ?? null));
  }

  /** True when both caches are synced and the spec cache reflects this replica's writes of `name` (of all, without it). */
  private current(name?: string): Promise<boolean> | false {
    if (this.statuses === undefined || !this.statuses.hasSynced()) return false;
    return this.writes.caughtUp(name);
  }
}
