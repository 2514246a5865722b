// The orchestrator's shared caches: node records, stored PodGroup specs and the controller's status
// records. Every replica runs them: the API's feasibility check reads nodes and specs, its GETs read
// specs and statuses (records.ts, PodGroupReader); the PodGroup controller may read them too.
//
// `capstan orchestrator` runs one informer per prefix for the API and both controllers
// (cli/orchestrator.ts): there the API's podgroups and podgroup-status caches are InformerViews of
// those shared informers, which parse each value once (storedPodGroupOf, cachedStatusOf).
import type { Registry } from "prom-client";
import type { Store } from "../../adapters/store/store.ts";
import type { Clock } from "../../runtime/clock.ts";
import { Informer, type AddMeta, type DeleteMeta, type EventHandler } from "../../runtime/informer.ts";
import type { KeyValueLike, ListWatchSource } from "../../runtime/listwatch.ts";
import type { Logger } from "../../runtime/log.ts";
import { keys, nameOf } from "../resources/keys.ts";
import type { NodeRecord } from "../resources/node.ts";
import { podsNumberedFromOne, type PodGroupStatus, type StoredPodGroup } from "../resources/podgroup.ts";

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
    nodes: nodesInformer(store, options),
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

/** The node records' informer (the API's feasibility checks and GET /nodes read it). */
export function nodesInformer(store: Store, options: OrchestratorInformerOptions = {}): Informer<NodeRecord> {
  return new Informer<NodeRecord>({ name: "nodes", source: store, prefix: keys.nodes, decode: decodeNodeRecord, ...options });
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
  return storedPodGroupOf(kv.key, JSON.parse(kv.value));
}

/** decodeStoredPodGroup of a value already parsed (`json`: JSON.parse of the value at `key`); throws alike. */
export function storedPodGroupOf(key: string, json: unknown): StoredPodGroup {
  const g = namedObject(key, json) as unknown as StoredPodGroup;
  if (typeof g.numInstances !== "number" || typeof g.pod !== "object" || g.pod === null || !Array.isArray(g.pod.containers)) {
    throw new TypeError(`podgroup record ${key} lacks numInstances or pod.containers`);
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
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return "unreadable";
  }
  return cachedStatusOf(value);
}

/** parseStatusValue of a value already parsed. */
export function cachedStatusOf(value: unknown): CachedStatus {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "unreadable";
  const status = value as PodGroupStatus;
  // A record of a release that numbered instances from 0 reads as numbered from 1 (podsNumberedFromOne).
  return Array.isArray(status.pods) ? podsNumberedFromOne(status) : status;
}

/** A JSON object whose `name` is the last segment of its key (the invariant every writer keeps). */
function parseNamed(kv: KeyValueLike): Record<string, unknown> {
  return namedObject(kv.key, JSON.parse(kv.value));
}

function namedObject(key: string, value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeError(`${key} does not hold a JSON object`);
  const name = (value as { name?: unknown }).name;
  if (name !== nameOf(key)) throw new TypeError(`${key} holds a record named ${JSON.stringify(name)}`);
  return value as Record<string, unknown>;
}

// ---- views ---------------------------------------------------------------------------------------

const viewSource: ListWatchSource = {
  list: () => Promise.reject(new Error("an informer view lists nothing itself")),
  watch: () => {
    throw new Error("an informer view watches nothing itself");
  },
  revision: () => Promise.reject(new Error("an informer view has no store")),
};

/**
 * One reader's view of an informer that several readers share: `pick` turns the shared informer's
 * object into this reader's (undefined: not in this view, as a value the reader's own decode would
 * reject). Reads, waits and revisions are the shared informer's; handlers registered here get
 * events in this view's terms (an update whose new object is not in the view is a delete, one
 * whose old object was not is an add). `pick` runs on every read and event, so it should only
 * pick (a property of an object decoded once), not decode.
 *
 * It is an Informer so that it goes wherever one goes, but holds no cache, watch or metrics of
 * its own: start() and stop() do nothing (the shared informer's owner starts and stops that; a
 * view is not given to the manager). Every public member of Informer is overridden here.
 */
export class InformerView<S, T> extends Informer<T> {
  constructor(
    private readonly shared: Informer<S>,
    private readonly pick: (obj: S) => T | undefined,
    name = shared.name,
  ) {
    super({ name, source: viewSource, prefix: shared.prefix, decode: () => undefined as T });
  }

  override addEventHandler(handler: EventHandler<T>): () => void {
    const pick = this.pick;
    const add = (obj: T, key: string, meta: AddMeta) => handler.onAdd?.(obj, key, meta);
    const del = (obj: T, key: string, meta: DeleteMeta) => handler.onDelete?.(obj, key, meta);
    return this.shared.addEventHandler({
      onAdd: (s, key, meta) => {
        const t = pick(s);
        if (t !== undefined) add(t, key, meta);
      },
      onUpdate: (oldS, newS, key) => {
        const before = pick(oldS);
        const after = pick(newS);
        if (before !== undefined && after !== undefined) handler.onUpdate?.(before, after, key);
        else if (after !== undefined) add(after, key, { isInInitialList: false });
        else if (before !== undefined) del(before, key, { finalStateUnknown: false });
      },
      onDelete: (s, key, meta) => {
        const t = pick(s);
        if (t !== undefined) del(t, key, meta);
      },
    });
  }

  override start(): void {}

  override stop(): Promise<void> {
    return Promise.resolve();
  }

  override hasSynced(): boolean {
    return this.shared.hasSynced();
  }

  override waitForSync(signal?: AbortSignal, timeoutMs?: number): Promise<void> {
    return this.shared.waitForSync(signal, timeoutMs);
  }

  override waitForRevision(revision: number, signal?: AbortSignal, timeoutMs?: number): Promise<void> {
    return this.shared.waitForRevision(revision, signal, timeoutMs);
  }

  override get(key: string): T | undefined {
    const s = this.shared.get(key);
    return s === undefined ? undefined : this.pick(s);
  }

  override list(): T[] {
    const out: T[] = [];
    for (const s of this.shared.list()) {
      const t = this.pick(s);
      if (t !== undefined) out.push(t);
    }
    return out;
  }

  override keys(): string[] {
    return this.shared.keys().filter((key) => this.get(key) !== undefined);
  }

  override get size(): number {
    return this.keys().length;
  }

  override cacheRevision(): number {
    return this.shared.cacheRevision();
  }

  override get lastSyncRevision(): number {
    return this.shared.lastSyncRevision;
  }

  override get resumeRevision(): number {
    return this.shared.resumeRevision;
  }
}
