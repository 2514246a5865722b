// The Dependency API's reads and writes. Each write is one store transaction, create-only or
// compare-and-swap (versioned-writes.ts), so concurrent requests on any replica never overwrite
// each other.
import type { Store } from "../../adapters/store/store.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import type { DependencyLayout, DependencyStatus, DependencyWithStatus, StoredDependency } from "../resources/dependency.ts";
import type { StoredPodGroup } from "../resources/podgroup.ts";
import { compareAndSwap, createOnly, type RecordKind } from "./versioned-writes.ts";

const dependencyKind: RecordKind = { kind: "dependency", changeWith: "PUT" };

/** Store a new dependency; 409 AlreadyExists when the name is taken (or still being deleted). */
export async function createDependency(store: Store, layout: DependencyLayout, record: StoredDependency): Promise<void> {
  await createOnly(store, layout.dependency(record.name), record.name, record, dependencyKind);
}

/**
 * Apply `change` with compare-and-swap (versioned-writes.ts compareAndSwap: re-read after a lost
 * race, 404 for a missing dependency, an ApiError from `change` ends it unwritten).
 */
export async function updateDependency(
  store: Store,
  layout: DependencyLayout,
  name: string,
  change: (current: StoredDependency, dependents: string[]) => StoredDependency | undefined,
  /** Read after the record, before the write that compares the record's modRevision (a DELETE's "in use" check). */
  readDependents?: () => Promise<string[]>,
  maxAttempts = 64,
): Promise<{ written: boolean; record: StoredDependency }> {
  const { written, record } = await compareAndSwap<StoredDependency>(
    store,
    layout.dependency(name),
    name,
    dependencyKind,
    async (current) => change(current, readDependents ? await readDependents() : []),
    undefined,
    maxAttempts,
  );
  return { written, record };
}

/**
 * Names of the stored PodGroups whose pod lists `name`, sorted. A group being deleted counts only
 * while its status still shows an instance with a node and a container (as the controller counts
 * references): such an instance may still need the dependency's pod. Once its instances are gone
 * it no longer blocks the DELETE, even if the group's own removal has not finished (e.g. waiting
 * for a node), so a stuck group removal does not keep the dependency "in use" forever.
 */
export async function dependentsOf(store: Store, layout: DependencyLayout, name: string): Promise<string[]> {
  const out: string[] = [];
  for (const kv of (await listAll(store, layout.podGroups)).items) {
    let group: StoredPodGroup;
    try {
      group = JSON.parse(kv.value) as StoredPodGroup;
    } catch {
      continue; // unreadable: the PodGroup controller reports it; it deploys nothing either
    }
    if (!group.pod?.dependencies?.some((d) => d.podName === name)) continue;
    if (!group.deleting) out.push(group.name);
    else if (await hasInstances(store, layout, group.name)) out.push(`${group.name} (being deleted)`);
  }
  return out.sort();
}

/** Whether the group's status shows an instance with a node and at least one container. */
async function hasInstances(store: Store, layout: DependencyLayout, group: string): Promise<boolean> {
  const kv = await store.get(`${layout.podGroupStatus}${group}`);
  if (kv === null) return false;
  try {
    const pods = (JSON.parse(kv.value) as { pods?: unknown }).pods;
    return Array.isArray(pods) && pods.some((p: { node?: unknown; containers?: unknown }) => typeof p?.node === "string" && p.node !== "" && Array.isArray(p.containers) && p.containers.length > 0);
  } catch {
    return true; // unreadable: it may have instances; refuse rather than guess
  }
}

export async function getDependencyWithStatus(store: Store, layout: DependencyLayout, name: string): Promise<DependencyWithStatus | null> {
  const [spec, status] = await Promise.all([store.get(layout.dependency(name)), store.get(layout.statusOf(name))]);
  if (spec === null) return null;
  return withStatus(JSON.parse(spec.value) as StoredDependency, status === null ? null : parseStatus(status.value));
}

/** Every dependency with its status, read at one store revision, in name order. */
export async function listDependenciesWithStatus(store: Store, layout: DependencyLayout): Promise<DependencyWithStatus[]> {
  const specs = await listAll(store, layout.depends);
  const statuses = new Map<string, DependencyStatus | "unreadable">();
  for (const kv of (await listAll(store, layout.status, specs.revision)).items) statuses.set(kv.key.slice(layout.status.length), parseStatus(kv.value));
  return specs.items.map((kv) => {
    const spec = JSON.parse(kv.value) as StoredDependency;
    return withStatus(spec, statuses.get(spec.name) ?? null);
  });
}

function withStatus(spec: StoredDependency, status: DependencyStatus | "unreadable" | null): DependencyWithStatus {
  const removing = spec.deleting !== undefined;
  if (status === null || status === "unreadable") {
    const lastError = status === "unreadable" ? "the status record is not valid JSON; the controller rewrites it" : "";
    return { spec, state: removing ? "removing" : "idle", lastError, updatedAt: spec.updatedAt, pods: [] };
  }
  const { internal: _internal, ...shown } = status;
  return { spec, ...shown, state: removing ? "removing" : shown.state };
}

function parseStatus(value: string): DependencyStatus | "unreadable" {
  try {
    const v = JSON.parse(value) as DependencyStatus;
    return v && typeof v === "object" && Array.isArray(v.pods) ? v : "unreadable";
  } catch {
    return "unreadable";
  }
}
