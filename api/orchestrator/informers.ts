// The orchestrator's shared caches: node records and stored PodGroup specs. Every replica runs them
// (the API's feasibility check reads them); the PodGroup controller may read them too.
import type { Registry } from "prom-client";
import type { Store } from "../../adapters/store/store.ts";
import type { Clock } from "../../runtime/clock.ts";
import { Informer } from "../../runtime/informer.ts";
import type { KeyValueLike } from "../../runtime/listwatch.ts";
import type { Logger } from "../../runtime/log.ts";
import { keys, nameOf } from "../resources/keys.ts";
import type { NodeRecord } from "../resources/node.ts";
import type { StoredPodGroup } from "../resources/podgroup.ts";

export interface OrchestratorInformers {
  nodes: Informer<NodeRecord>;
  podGroups: Informer<StoredPodGroup>;
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

/** A JSON object whose `name` is the last segment of its key (the invariant every writer keeps). */
function parseNamed(kv: KeyValueLike): Record<string, unknown> {
  const value = JSON.parse(kv.value) as unknown;
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeError(`${kv.key} does not hold a JSON object`);
  const name = (value as { name?: unknown }).name;
  if (name !== nameOf(kv.key)) throw new TypeError(`${kv.key} holds a record named ${JSON.stringify(name)}`);
  return value as Record<string, unknown>;
}
