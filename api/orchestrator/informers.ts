// The orchestrator's shared caches: node records, stored PodGroup specs and the controller's status
// records. Every replica runs them: the API's feasibility check reads nodes and specs, its GETs read
// specs and statuses (records.ts, PodGroupReader); the PodGroup controller may read them too.
import type { Registry } from "prom-client";
import type { Store } from "../../adapters/store/store.ts";
import type { Clock } from "../../runtime/clock.ts";
import { Informer } from "../../runtime/informer.ts";
import type { KeyValueLike } from "../../runtime/listwatch.ts";
import type { Logger } from "../../runtime/log.ts";
import { keys, nameOf } from "../resources/keys.ts";
import type { NodeRecord } from "../resources/node.ts";
import type { PodGroupStatus, StoredPodGroup } from "../resources/podgroup.ts";

/** A status record as cached: "unreadable" when the stored value is not a JSON object (GET says so). */
export type CachedStatus = PodGroupStatus | "unreadable";

export interface OrchestratorInformers {
  nodes: Informer<NodeRecord>;
  podGroups: Informer<StoredPodGroup>;
  podGroupStatuses: Informer<CachedStatus>;
}

export interface OrchestratorInformerOptions {
  clock?: Clock;
  log?: Logger;
  registry?: Registry;
}

export function orchestratorInformers(store: Store, options: OrchestratorInformerOptions = {}): OrchestratorInformers {
  return {
    nodes: new Informer<NodeRecord>({ name: "nodes", source: store, prefix: keys.nodes, decode: decodeNodeRecord, ...options }),
    podGroups: new Informer<StoredPodGroup>({ name: "podgroups", source: store, prefix: keys.podGroups, decode: decodeStoredPodGroup, ...options }),
    podGroupStatuses: new Informer<CachedStatus>({
      name: "podgroup-status",
      source: store,
      prefix: keys.podGroupStatus,
      decode: decodePodGroupStatus,
      ...options,
    }),
  };
}

// Decoding checks the fields the readers rely on, not the whole schema: the writers (the API, the
// node monitor) validated fully, and a full zod parse of thousands of specs would slow every relist.
// A record that fails is left out of the cache (the informer counts and logs it).

export function decodeNodeRecord(kv: KeyValueLike): NodeRecord {
  const r = parseNamed(kv) as unknown as NodeRecord;
  if (typeof r.cpus !== "number" || typeof r.memoryBytes !== "number" || (r.state !== "ready" && r.state !== "unreachable")) {
    throw new TypeError(`node record ${kv.key} lacks cpus, memoryBytes or state`);
  }
  return r;
}

export function decodeStoredPodGroup(kv: KeyValueLike): StoredPodGroup {
  const g = parseNamed(kv) as unknown as StoredPodGroup;
  if (typeof g.numInstances !== "number" || typeof g.pod !== "object" || g.pod === null || !Array.isArray(g.pod.containers)) {
    throw new TypeError(`podgroup record ${kv.key} lacks numInstances or pod.containers`);
  }
  return g;
}

/**
 * Never throws: an unreadable status is cached as such, so GET shows "the status record is not
 * valid JSON" (as a store read does) instead of a pending group. The controller wrote the record;
 * GET shows it without checking its fields, as a store read would.
 */
export function decodePodGroupStatus(kv: KeyValueLike): CachedStatus {
  return parseStatusValue(kv.value);
}

/** A stored status value as GET shows it (cached or read from the store: the same rule). */
export function parseStatusValue(text: string): CachedStatus {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as PodGroupStatus) : "unreadable";
  } catch {
    return "unreadable";
  }
}

/** A JSON object whose `name` is the last segment of its key (the invariant every writer keeps). */
function parseNamed(kv: KeyValueLike): Record<string, unknown> {
  const value = JSON.parse(kv.value) as unknown;
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeError(`${kv.key} does not hold a JSON object`);
  const name = (value as { name?: unknown }).name;
  if (name !== nameOf(kv.key)) throw new TypeError(`${kv.key} holds a record named ${JSON.stringify(name)}`);
  return value as Record<string, unknown>;
}
