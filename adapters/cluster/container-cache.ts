// ContainerCache: a watch cache of containers across every node, the cluster's counterpart of an
// informer. It knows nothing of PodGroups: it is told which label to subscribe with and which
// labels to index by, so the dependency and secret-sync controllers can reuse it as is.
//
//   start(signal)  learn the node names, subscribe to container events (relist after every
//                  (re)connect, events.ts), resync by listing every `resyncIntervalMs`;
//   byLabel(k, v)  the cached containers carrying label k=v (k must be one of `indexLabels`);
//   source(map)    a runtime Source: every change of a container enqueues map(container) at once,
//                  so a die / destroy / oom is repaired in seconds, not at the next refresh;
//   record*()      read-your-own-writes: a controller records what it just did (create, start,
//                  remove, rename, inspect) so its next reconcile does not act on stale data.
//
// Invariants (each kept where noted):
// - I1 a relist is the truth for its node, with two exceptions that are never wrong:
//   (a) an id we saw destroyed (event or our own remove) is tombstoned and never re-enters the
//       cache: container ids are never reused, so a relist or event that still shows it is older
//       than the destroy (applyRelist, applyEvent);
//   (b) a container we recorded as created but no event or relist has confirmed yet survives a
//       relist that lacks it: the list was answered before the create (applyRelist). Once
//       confirmed, a later relist that lacks it means it is gone.
// - I2 events of one node are applied in stream order, and a node's relist precedes that
//   connection's events (events.ts), so a state from an event is never older than the relist's.
// - I3 recordDetails() and recordStarted() apply a state only if the entry did not change since
//   the caller read its generation: an event that arrived meanwhile is newer than the call.
// - I4 while a node is unreachable its containers stay cached with the last known state, and
//   nodeState() says so: callers must treat them as unknown, not as gone.
import type { Registry } from "prom-client";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { Enqueue, EnqueueOptions, Source } from "../../runtime/source.ts";
import { withDeadline } from "../../runtime/deadline.ts";
import { gauge } from "../../runtime/metrics.ts";
import type {
  Cluster,
  ClusterEvent,
  ContainerDetails,
  ContainerEvent,
  ContainerState,
  ContainerSummary,
  NodeState,
  PublishedPort,
  Subscription,
} from "./cluster.ts";

/** One container as the cache knows it. Entries are immutable: every change replaces the object. */
export interface CachedContainer {
  readonly node: string;
  readonly id: string;
  readonly name: string;
  readonly image: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly state: ContainerState;
  /** Known after a die event, an inspect, or a relist whose status line carries it. */
  readonly exitCode: number | undefined;
  /** Milliseconds since the epoch (engine clock); undefined when unknown (e.g. only relisted). */
  readonly startedAt: number | undefined;
  readonly finishedAt: number | undefined;
  readonly oomKilled: boolean;
  readonly created: number;
  readonly ports: readonly PublishedPort[];
  /** First network address, from an inspect ("" with networking off). */
  readonly ip: string | undefined;
  /** Resource limits, from an inspect or from the create we recorded. */
  readonly limits: { memoryBytes: number; nanoCpus: number } | undefined;
  /** True once an event or a relist has shown the container (false right after recordCreated). */
  readonly confirmed: boolean;
  /** Bumped on every change; pass it to recordDetails (I3). */
  readonly generation: number;
}

/** What changed, delivered to listeners and sources after the cache already reflects it. */
export interface ContainerChange {
  /** Engine action ("create", "start", "die", "destroy", ...), "relist", "node-unreachable", "node-ready" or "recorded". */
  action: string;
  /** The container as it is now, or its last state when it is gone. */
  container: CachedContainer;
  /** True when the container is no longer in the cache. */
  gone: boolean;
}

export type ContainerListener = (change: ContainerChange) => void;

export interface ContainerCacheOptions {
  cluster: Cluster;
  /** Names the cache in logs and the metric label. */
  name?: string;
  /** Subscription and relist label filter (`key` or `key=value`), e.g. ["io.capstan.podgroup"]. */
  labelFilter?: string[];
  /** Labels byLabel() can look up. */
  indexLabels: string[];
  /** Full relist of every node this often, as a safety net under the event streams (default 5 min). */
  resyncIntervalMs?: number;
  /** How long a destroyed id is remembered (default 10 min). */
  tombstoneMs?: number;
  /** Bound on the start-up nodes() call and each resync list (default 15 s). */
  callTimeoutMs?: number;
  clock?: Clock;
  log?: Logger;
  registry?: Registry;
}

/** Actions the cache subscribes to; others (exec, attach, kill, stop, ...) never change what it keeps. */
const watchedActions = ["create", "start", "die", "destroy", "rename", "oom", "pause", "unpause"];

const exitedStatus = /^Exited \((-?\d+)\)/;

export class ContainerCacheSyncTimeoutError extends Error {
  override readonly name = "ContainerCacheSyncTimeoutError";
}

export class ContainerCache {
  readonly name: string;
  private readonly cluster: Cluster;
  private readonly labelFilter: string[] | undefined;
  private readonly indexLabels: Set<string>;
  private readonly resyncIntervalMs: number;
  private readonly tombstoneMs: number;
  private readonly callTimeoutMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly sizeGauge: ReturnType<typeof gauge<"name">> | undefined;

  /** node -> id -> entry */
  private readonly byNode = new Map<string, Map<string, CachedContainer>>();
  /** "label=value" -> set of "node/id" */
  private readonly index = new Map<string, Set<string>>();
  /** "node/id" -> clock time it was destroyed (I1a). */
  private readonly tombstones = new Map<string, number>();
  private readonly nodeStates = new Map<string, NodeState>();
  /** Nodes that delivered a relist or were reported unreachable since start (sync condition). */
  private readonly heardFrom = new Set<string>();
  /** Nodes that delivered a relist since start: what the cache holds of them was seen, not assumed. */
  private readonly listed = new Set<string>();
  private nodeNames: string[] | undefined;
  private readonly listeners = new Set<ContainerListener>();
  private syncWaiters: (() => void)[] = [];
  private generation = 0;
  private running = false;

  constructor(opts: ContainerCacheOptions) {
    if (opts.indexLabels.length === 0) throw new TypeError("container cache: indexLabels must name at least one label");
    this.name = opts.name ?? "containers";
    this.cluster = opts.cluster;
    this.labelFilter = opts.labelFilter?.length ? [...opts.labelFilter] : undefined;
    this.indexLabels = new Set(opts.indexLabels);
    this.resyncIntervalMs = opts.resyncIntervalMs ?? 300_000;
    this.tombstoneMs = opts.tombstoneMs ?? 600_000;
    this.callTimeoutMs = opts.callTimeoutMs ?? 15_000;
    if (!(this.resyncIntervalMs > 0)) throw new RangeError("container cache: resyncIntervalMs must be > 0");
    this.clock = opts.clock ?? realClock;
    this.log = (opts.log ?? silentLogger).child({ cache: this.name });
    if (opts.registry) {
      this.sizeGauge = gauge(opts.registry, {
        name: "container_cache_objects",
        help: "Containers in the container watch cache",
        labelNames: ["name"],
      });
    }
  }

  /**
   * Runnable: watch until `signal` aborts. A cache can be started again after it stopped (a new
   * leadership term); it then starts from empty and syncs again.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error(`container cache ${this.name} is already running`);
    this.running = true;
    this.reset();
    let subscription: Subscription | undefined;
    let resync: { cancel(): void } | undefined;
    try {
      const nodes = await withDeadline(this.cluster.nodes({ signal }), this.callTimeoutMs, this.clock, "list nodes", signal);
      this.nodeNames = nodes.map((n) => n.name);
      subscription = this.cluster.subscribe((ev) => this.onClusterEvent(ev), {
        filters: { ...(this.labelFilter && { label: this.labelFilter }), event: watchedActions },
      });
      const scheduleResync = () => {
        resync = this.clock.setTimer(this.resyncIntervalMs, () => {
          void this.resyncAll(signal).finally(() => {
            if (!signal.aborted) scheduleResync();
          });
        });
      };
      scheduleResync();
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener("abort", () => resolve(), { once: true });
      });
    } finally {
      resync?.cancel();
      await subscription?.unsubscribe();
      this.running = false;
      this.nodeNames = undefined;
    }
  }

  /** True once every node delivered its first relist or was reported unreachable. */
  hasSynced(): boolean {
    return this.nodeNames !== undefined && this.nodeNames.every((n) => this.heardFrom.has(n));
  }

  waitForSync(signal?: AbortSignal, timeoutMs = 120_000): Promise<void> {
    if (this.hasSynced()) return Promise.resolve();
    const synced = new Promise<void>((resolve) => this.syncWaiters.push(resolve));
    return withDeadline(synced, timeoutMs, this.clock, `container cache ${this.name} sync`, signal).catch((e: unknown) => {
      if (e instanceof Error && e.name === "DeadlineExceededError") {
        throw new ContainerCacheSyncTimeoutError(`container cache ${this.name} did not sync within ${timeoutMs} ms`);
      }
      throw e;
    });
  }

  /** Containers carrying label `key=value`; `key` must be one of the index labels. */
  byLabel(key: string, value: string): CachedContainer[] {
    if (!this.indexLabels.has(key)) throw new RangeError(`container cache ${this.name}: label ${key} is not indexed`);
    const refs = this.index.get(`${key}=${value}`);
    if (!refs) return [];
    const out: CachedContainer[] = [];
    for (const ref of refs) {
      const [node, id] = splitRef(ref);
      const c = this.byNode.get(node)?.get(id);
      if (c) out.push(c);
    }
    return out;
  }

  get(node: string, id: string): CachedContainer | undefined {
    return this.byNode.get(node)?.get(id);
  }

  list(): CachedContainer[] {
    return [...this.byNode.values()].flatMap((m) => [...m.values()]);
  }

  /** The event stream's view of a node: undefined before it was heard from (I4). */
  nodeState(node: string): NodeState | undefined {
    return this.nodeStates.get(node);
  }

  /**
   * Whether the node delivered a relist since start. A node unreachable ever since counts as heard
   * from (the cache is synced) but not as listed: whatever runs there is unknown, not absent.
   */
  listedSinceStart(node: string): boolean {
    return this.listed.has(node);
  }

  /** Listen to every change; returns the unregister function. Listeners run synchronously: keep them cheap. */
  addListener(listener: ContainerListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * A runtime Source: each change enqueues the keys `map` gives for the container. `priority`
   * chooses the priority per change (default 0).
   */
  source(map: (c: CachedContainer) => string[], priority?: (change: ContainerChange) => number): Source {
    let unregister: (() => void) | undefined;
    return {
      name: `containers:${this.name}`,
      start: (enqueue: Enqueue) => {
        unregister?.();
        unregister = this.addListener((change) => {
          const options: EnqueueOptions = { priority: priority?.(change) ?? 0 };
          for (const key of map(change.container)) enqueue(key, options);
        });
      },
      stop: () => {
        unregister?.();
        unregister = undefined;
      },
      waitForSync: (signal, timeoutMs) => this.waitForSync(signal, timeoutMs),
    };
  }

  // ---- read-your-own-writes -------------------------------------------------------------------

  /** We created this container (not started). Unconfirmed until an event or relist shows it (I1b). */
  recordCreated(c: {
    node: string;
    id: string;
    name: string;
    image: string;
    labels: Record<string, string>;
    limits?: { memoryBytes: number; nanoCpus: number };
  }): void {
    if (this.isTombstoned(c.node, c.id)) return;
    const old = this.get(c.node, c.id);
    if (old) return; // an event got here first: it is at least as new as our create
    this.put(
      {
        node: c.node,
        id: c.id,
        name: c.name,
        image: c.image,
        labels: { ...c.labels },
        state: "created",
        exitCode: undefined,
        startedAt: undefined,
        finishedAt: undefined,
        oomKilled: false,
        created: Date.now(),
        ports: [],
        ip: undefined,
        limits: c.limits,
        confirmed: false,
        generation: 0,
      },
      "recorded",
    );
  }

  /**
   * We started it (the start call returned). `generation` is the entry's generation read before
   * the call: if an event changed the entry since, the event is at least as new as our start
   * (e.g. a container that died at once) and wins (I3).
   */
  recordStarted(node: string, id: string, generation: number | undefined, at = Date.now()): void {
    const old = this.get(node, id);
    if (!old || old.state === "running") return;
    if (generation !== undefined && old.generation !== generation) return;
    this.put({ ...old, state: "running", startedAt: at, finishedAt: undefined, exitCode: undefined, oomKilled: false }, "recorded");
  }

  /** We removed it, or it turned out not to exist (inspect 404): gone for good (I1a). */
  recordRemoved(node: string, id: string): void {
    this.tombstone(node, id);
    const old = this.get(node, id);
    if (old) this.delete(old, "recorded");
  }

  /** We renamed it. */
  recordRenamed(node: string, id: string, name: string): void {
    const old = this.get(node, id);
    if (old && old.name !== name) this.put({ ...old, name }, "recorded");
  }

  /**
   * An inspect's answer. State fields are applied only if the entry has not changed since the
   * caller read `generation` (I3); limits, ports and ip always are (they do not race).
   */
  recordDetails(d: ContainerDetails, generation: number | undefined): void {
    if (this.isTombstoned(d.node, d.id)) return;
    const old = this.get(d.node, d.id);
    const limits = { memoryBytes: d.memoryBytes, nanoCpus: d.nanoCpus };
    const ports = d.status.running ? d.network.ports : old?.ports ?? [];
    const ip = d.network.networks[0]?.ipAddress ?? "";
    if (old && generation !== undefined && old.generation !== generation) {
      this.put({ ...old, limits, ip }, "recorded", false);
      return;
    }
    this.put(
      {
        node: d.node,
        id: d.id,
        name: d.name,
        image: d.image,
        labels: { ...d.labels },
        state: d.status.state,
        exitCode: d.status.running ? undefined : d.status.exitCode,
        startedAt: d.status.startedAt,
        finishedAt: d.status.running ? undefined : d.status.finishedAt,
        oomKilled: d.status.oomKilled,
        created: d.created,
        ports,
        ip,
        limits,
        confirmed: true,
        generation: 0,
      },
      "recorded",
      old === undefined || old.state !== d.status.state,
    );
  }

  // ---- event intake ---------------------------------------------------------------------------

  private onClusterEvent(ev: ClusterEvent): void {
    if (!this.running) return;
    switch (ev.type) {
      case "relist":
        this.applyRelist(ev.node, ev.containers);
        this.listed.add(ev.node);
        this.markHeard(ev.node);
        return;
      case "node":
        this.applyNodeState(ev.node, ev.state);
        return;
      case "container":
        this.applyEvent(ev);
    }
  }

  private applyNodeState(node: string, state: NodeState): void {
    const before = this.nodeStates.get(node);
    this.nodeStates.set(node, state);
    if (state === "unreachable") this.markHeard(node);
    if (before === state) return;
    // I4: keep the containers, but let their owners know their state is now unknown (or known again).
    const action = state === "ready" ? "node-ready" : "node-unreachable";
    for (const c of this.byNode.get(node)?.values() ?? []) this.notify({ action, container: c, gone: false });
  }

  private applyEvent(ev: ContainerEvent): void {
    const tombstoned = this.isTombstoned(ev.node, ev.id);
    const old = this.get(ev.node, ev.id);
    if (ev.action === "destroy") {
      this.tombstone(ev.node, ev.id);
      if (old) this.delete(old, ev.action);
      return;
    }
    if (tombstoned) return; // I1a: older than the destroy we already know of
    const base: CachedContainer = old ?? {
      node: ev.node,
      id: ev.id,
      name: ev.name,
      image: "",
      labels: ev.labels,
      state: "created",
      exitCode: undefined,
      startedAt: undefined,
      finishedAt: undefined,
      oomKilled: false,
      created: ev.time,
      ports: [],
      ip: undefined,
      limits: undefined,
      confirmed: true,
      generation: 0,
    };
    const at = ev.time || Date.now();
    let next: CachedContainer;
    switch (ev.action) {
      case "create":
        next = { ...base, name: ev.name || base.name, labels: { ...base.labels, ...ev.labels } };
        break;
      case "start":
      case "unpause":
        next = {
          ...base,
          state: "running",
          startedAt: ev.action === "start" ? at : base.startedAt,
          finishedAt: undefined,
          exitCode: undefined,
          oomKilled: ev.action === "start" ? false : base.oomKilled,
        };
        break;
      case "die":
        next = { ...base, state: "exited", exitCode: ev.exitCode, finishedAt: at, ports: [] };
        break;
      case "oom":
        next = { ...base, oomKilled: true };
        break;
      case "pause":
        next = { ...base, state: "paused" };
        break;
      case "rename":
        next = { ...base, name: ev.name || base.name };
        break;
      default:
        return;
    }
    this.put({ ...next, confirmed: true }, ev.action);
  }

  /** I1: replace one node's containers with a list of them, keeping what the list cannot know. */
  private applyRelist(node: string, containers: ContainerSummary[]): void {
    const current = this.byNode.get(node) ?? new Map<string, CachedContainer>();
    const seen = new Set<string>();
    for (const s of containers) {
      if (this.isTombstoned(node, s.id)) continue; // I1a
      seen.add(s.id);
      const old = current.get(s.id);
      const sameState = old !== undefined && old.state === s.state;
      const exitMatch = exitedStatus.exec(s.status);
      const next: CachedContainer = {
        node,
        id: s.id,
        name: s.name,
        image: s.image,
        labels: { ...s.labels },
        state: s.state,
        exitCode: sameState ? old.exitCode : exitMatch ? Number(exitMatch[1]) : undefined,
        startedAt: sameState ? old.startedAt : undefined,
        finishedAt: sameState ? old.finishedAt : undefined,
        oomKilled: sameState ? old.oomKilled : false,
        created: s.created,
        ports: s.ports,
        ip: old?.ip,
        limits: old?.limits,
        confirmed: true,
        generation: old?.generation ?? 0,
      };
      if (!old || !sameState || old.name !== s.name || !old.confirmed) this.put(next, "relist");
    }
    for (const old of [...current.values()]) {
      if (seen.has(old.id)) continue;
      if (!old.confirmed) continue; // I1b: created after the list was answered
      this.delete(old, "relist");
    }
  }

  private async resyncAll(signal: AbortSignal): Promise<void> {
    for (const node of this.nodeNames ?? []) {
      if (signal.aborted) return;
      if (this.nodeStates.get(node) !== "ready") continue; // the stream's reconnect relists it
      try {
        const containers = await withDeadline(
          this.cluster.listContainers(node, { all: true, filters: this.labelFilter ? { label: this.labelFilter } : {}, signal }),
          this.callTimeoutMs,
          this.clock,
          `resync ${node}`,
          signal,
        );
        if (!signal.aborted && this.running) this.applyRelist(node, containers);
      } catch (err) {
        if (!signal.aborted) this.log.warn({ err, node }, "container resync failed; the next one retries");
      }
    }
  }

  // ---- storage --------------------------------------------------------------------------------

  private put(c: CachedContainer, action: string, notify = true): void {
    let m = this.byNode.get(c.node);
    if (!m) this.byNode.set(c.node, (m = new Map()));
    const old = m.get(c.id);
    if (old) this.unindex(old);
    const entry = { ...c, generation: ++this.generation };
    m.set(c.id, entry);
    this.indexEntry(entry);
    this.sizeGauge?.set({ name: this.name }, this.countAll());
    if (notify) this.notify({ action, container: entry, gone: false });
  }

  private delete(c: CachedContainer, action: string): void {
    const m = this.byNode.get(c.node);
    if (!m?.delete(c.id)) return;
    this.unindex(c);
    this.sizeGauge?.set({ name: this.name }, this.countAll());
    this.notify({ action, container: c, gone: true });
  }

  private indexEntry(c: CachedContainer): void {
    for (const k of this.indexLabels) {
      const v = c.labels[k];
      if (v === undefined) continue;
      const key = `${k}=${v}`;
      let s = this.index.get(key);
      if (!s) this.index.set(key, (s = new Set()));
      s.add(refOf(c.node, c.id));
    }
  }

  private unindex(c: CachedContainer): void {
    for (const k of this.indexLabels) {
      const v = c.labels[k];
      if (v === undefined) continue;
      const key = `${k}=${v}`;
      const s = this.index.get(key);
      s?.delete(refOf(c.node, c.id));
      if (s?.size === 0) this.index.delete(key);
    }
  }

  private tombstone(node: string, id: string): void {
    const now = this.clock.now();
    const ref = refOf(node, id);
    this.tombstones.delete(ref); // re-inserted last, so the map stays in time order
    this.tombstones.set(ref, now);
    // Amortised expiry: entries are inserted in time order, so the oldest are first.
    for (const [old, at] of this.tombstones) {
      if (now - at <= this.tombstoneMs) break;
      this.tombstones.delete(old);
    }
  }

  private isTombstoned(node: string, id: string): boolean {
    return this.tombstones.has(refOf(node, id));
  }

  private markHeard(node: string): void {
    this.heardFrom.add(node);
    if (!this.hasSynced()) return;
    const waiters = this.syncWaiters;
    this.syncWaiters = [];
    for (const w of waiters) w();
  }

  private notify(change: ContainerChange): void {
    for (const l of this.listeners) {
      try {
        l(change);
      } catch (err) {
        this.log.error({ err, action: change.action }, "container cache listener threw");
      }
    }
  }

  private countAll(): number {
    let n = 0;
    for (const m of this.byNode.values()) n += m.size;
    return n;
  }

  private reset(): void {
    this.byNode.clear();
    this.index.clear();
    this.tombstones.clear();
    this.nodeStates.clear();
    this.heardFrom.clear();
    this.listed.clear();
  }
}

function refOf(node: string, id: string): string {
  return `${node}/${id}`;
}

function splitRef(ref: string): [string, string] {
  const i = ref.indexOf("/");
  return [ref.slice(0, i), ref.slice(i + 1)];
}
