// The node monitor: keeps one NodeRecord per cluster node in the store (nodes/<name>), which the
// API reads for its feasibility checks and GET /api/nodes, without calling Docker itself.
//
// When it writes: once at start, every intervalMs (10 s), and about debounceMs (1 s) after a
// Capstan container starts, dies or is destroyed anywhere (a burst of events costs one sync). A
// record is written only when something in it changed, or when it was last written heartbeatMs
// (60 s) ago, so updatedAt tells a reader how fresh it is: a record much older than a minute means
// no monitor is running.
//
// What it records: capacity and engine facts from cluster.nodes(); `reserved` = the summed limits
// of the node's up (running, paused, restarting) containers labelled io.capstan.podgroup or
// io.capstan.dependency (PodGroup instances and dependency pods). A container's limits never
// change in Capstan's hands, so each is inspected once (at most 8 at a time per node) and remembered
// while it stays up. Reachability is the engine's info call answering, nothing else: a node whose
// engine does not answer is recorded unreachable with the reason and since when (unreachableSince,
// carried over from a previous record of the outage no older than a heartbeat and two intervals,
// so a monitor restart does not restart the clock but a long-stale record is not trusted); a node
// whose containers cannot be listed or inspected in time stays ready with the error and the last
// known reservation (a slow engine is not a lost one). It never stops the loop. Records of nodes
// that are no longer in the cluster are deleted.
//
// Auto drift: once a node has been unreachable for nodeTimeoutMs (-node-timeout, 60 s), the monitor
// writes ONE drift task for the outage, {from: node, force: false, reason: "node-timeout"}, under
// the id node-timeout-<node>-<unreachableSince ms> (create-only, so a repeat is a no-op), and notes
// its id in the record (autoDriftTask), so a restarted monitor does not write it again for the same
// outage. The PodGroup controller moves the node's non-stateful instances elsewhere; when the node
// answers again, the copies left on it are removed as extras (controllers/podgroup/drift.ts).
//
// Leader-only: one writer, through the fenced store, so a deposed leader's late write is refused.
import PQueue from "p-queue";
import { Registry } from "prom-client";
import {
  NotFoundError,
  reservationOf,
  type Cluster,
  type ContainerSummary,
  type NodeResources,
  type ResourceRequest,
} from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import { keys, nameOf } from "../../api/resources/keys.ts";
import type { NodeRecord } from "../../api/resources/node.ts";
import type { DriftTask } from "../../api/resources/task.ts";
import { realClock, type Clock, type TimerHandle } from "../../runtime/clock.ts";
import { onAbort } from "../../runtime/abort-fanout.ts";
import { withDeadline } from "../../runtime/deadline.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { counter } from "../../runtime/metrics.ts";
import { noEvents, type EventSink } from "../shared/events.ts";
import { listingFailedRecord, nodeRecord, sameRecord, unreachableRecord } from "./record.ts";

export interface NodeMonitorOptions {
  /** The fenced store: only the leader's writes land. */
  store: Store;
  cluster: Cluster;
  /** Full sync period (default 10 s). */
  intervalMs?: number;
  /** Delay from a container event to the sync it triggers; events within it share one sync (default 1 s). */
  debounceMs?: number;
  /** Rewrite an unchanged record after this long, to refresh its updatedAt (default 60 s). */
  heartbeatMs?: number;
  /** Deadline of each engine or store call (default 10 s). */
  callTimeoutMs?: number;
  /** A node unreachable this long gets a drift task (default 60 s, -node-timeout). */
  nodeTimeoutMs?: number;
  clock?: Clock;
  /** Wall clock (ms since the epoch) for the times records keep; default Date.now. */
  now?: () => number;
  log?: Logger;
  registry?: Registry;
  /** Where node state changes are recorded (NodeReady, NodeDown, NodeTimedOut, NodeRemoved; docs/events.md). */
  events?: EventSink;
}

/** Containers whose limits count as reserved: Capstan's PodGroup instances... */
export const reservedLabel = "io.capstan.podgroup";
/** ...and dependency pods. */
export const dependencyLabel = "io.capstan.dependency";
const reservedLabels = [reservedLabel, dependencyLabel];
/** Inspects of newly seen containers in flight per node. */
const inspectConcurrency = 8;

/** The auto-drift task id of one outage: the same outage always gives the same id. */
export function autoDriftTaskId(node: string, unreachableSince: string): string {
  return `node-timeout-${node}-${Date.parse(unreachableSince)}`;
}

export function createNodeMonitor(opts: NodeMonitorOptions): Runnable {
  return new NodeMonitor(opts);
}

interface Written {
  record: NodeRecord;
  /** clock.now() of the write. */
  at: number;
}

class NodeMonitor implements Runnable {
  readonly name = "node-monitor";
  private readonly store: Store;
  private readonly cluster: Cluster;
  private readonly intervalMs: number;
  private readonly debounceMs: number;
  private readonly heartbeatMs: number;
  private readonly callTimeoutMs: number;
  private readonly nodeTimeoutMs: number;
  private readonly clock: Clock;
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly events: EventSink;
  private readonly metrics: { syncs: ReturnType<typeof counter<"result">>; writes: ReturnType<typeof counter<"kind">> };

  /** What the store holds, as far as this monitor knows: seeded by a list at start, then by its writes. */
  private readonly written = new Map<string, Written>();
  /** Limits of up containers by `node/id`: inspected once, dropped when the container is no longer up. */
  private readonly limits = new Map<string, ResourceRequest>();

  constructor(opts: NodeMonitorOptions) {
    this.store = opts.store;
    this.cluster = opts.cluster;
    this.intervalMs = opts.intervalMs ?? 10_000;
    this.debounceMs = opts.debounceMs ?? 1_000;
    this.heartbeatMs = opts.heartbeatMs ?? 60_000;
    this.callTimeoutMs = opts.callTimeoutMs ?? 10_000;
    this.nodeTimeoutMs = opts.nodeTimeoutMs ?? 60_000;
    this.clock = opts.clock ?? realClock;
    this.now = opts.now ?? Date.now;
    this.log = opts.log ?? silentLogger;
    this.events = opts.events ?? noEvents;
    if (!(this.intervalMs > 0 && this.debounceMs >= 0 && this.heartbeatMs > 0 && this.callTimeoutMs > 0 && this.nodeTimeoutMs > 0)) {
      throw new RangeError("node monitor: intervalMs, heartbeatMs, callTimeoutMs and nodeTimeoutMs must be > 0, debounceMs >= 0");
    }
    // Without a registry the metrics go to a private one nobody scrapes.
    const registry = opts.registry ?? new Registry();
    this.metrics = {
      syncs: counter(registry, { name: "node_monitor_syncs_total", help: "Node monitor sync passes by result", labelNames: ["result"] }),
      writes: counter(registry, { name: "node_monitor_writes_total", help: "Node records written or deleted", labelNames: ["kind"] }),
    };
  }

  async start(signal: AbortSignal): Promise<void> {
    let dirty = false;
    let wake: (() => void) | undefined;
    let debounce: TimerHandle | undefined;
    const trigger = () => {
      dirty = true;
      wake?.();
    };
    // Every relist, node state change or container event of interest: sync soon, once. One
    // subscription per label, since an engine ANDs the labels of one filter.
    const onEvent = () => {
      debounce ??= this.clock.setTimer(this.debounceMs, () => {
        debounce = undefined;
        trigger();
      });
    };
    const subscriptions = reservedLabels.map((label) =>
      this.cluster.subscribe(onEvent, { filters: { label: [label], event: ["start", "die", "destroy"] } }),
    );
    try {
      await this.seed(signal);
      while (!signal.aborted) {
        dirty = false;
        const nextTimeoutIn = await this.syncOnce(signal);
        if (dirty || signal.aborted) continue;
        await new Promise<void>((resolve) => {
          // Wake for a node timeout falling due before the next interval, so auto drift is on time.
          const timer = this.clock.setTimer(Math.min(this.intervalMs, nextTimeoutIn), done);
          function done() {
            timer.cancel();
            signal.removeEventListener("abort", done);
            wake = undefined;
            resolve();
          }
          wake = done;
          signal.addEventListener("abort", done, { once: true });
        });
      }
    } finally {
      debounce?.cancel();
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
    }
  }

  /** Learn which records exist, so unchanged ones are not rewritten and stale ones can be deleted. */
  private async seed(signal: AbortSignal): Promise<void> {
    try {
      const page = await this.bounded("list node records", signal, () => this.store.list(keys.nodes));
      const now = this.clock.now();
      for (const kv of page.items) {
        try {
          this.written.set(nameOf(kv.key), { record: JSON.parse(kv.value) as NodeRecord, at: now - this.heartbeatMs });
        } catch {
          // Unreadable: treat as absent; the first sync overwrites it.
        }
      }
    } catch (e) {
      if (!signal.aborted) this.log.warn({ err: e }, "cannot list node records; every record will be written");
    }
  }

  /**
   * One pass over every node. Never throws: failures are logged, counted and retried next pass.
   * Returns the ms until the next node timeout falls due (Infinity when none is pending).
   */
  private async syncOnce(signal: AbortSignal): Promise<number> {
    let next = Infinity;
    try {
      const nodes = await this.bounded("cluster nodes", signal, (s) => this.cluster.nodes({ signal: s }));
      const records = await Promise.all(nodes.map((n) => this.observe(n, signal)));
      await Promise.all(
        records.map(async (r) => {
          next = Math.min(next, await this.autoDrift(r, signal));
          await this.write(r, signal);
        }),
      );
      const current = new Set(nodes.map((n) => n.name));
      for (const name of [...this.written.keys()].filter((n) => !current.has(n))) await this.forget(name, signal);
      this.metrics.syncs.inc({ result: "ok" });
    } catch (e) {
      if (signal.aborted) return next;
      this.metrics.syncs.inc({ result: "error" });
      this.log.warn({ err: e }, "node sync failed; retrying at the next interval");
    }
    return next;
  }

  /**
   * Writes the outage's drift task once the node has been unreachable for nodeTimeoutMs, and
   * notes it in `record` (which the caller writes next). Returns the ms until the timeout falls
   * due, or Infinity when nothing is pending for this node.
   */
  private async autoDrift(record: NodeRecord, signal: AbortSignal): Promise<number> {
    if (record.state !== "unreachable" || record.unreachableSince === undefined || record.autoDriftTask !== undefined) return Infinity;
    const left = Date.parse(record.unreachableSince) + this.nodeTimeoutMs - this.now();
    if (left > 0) return left;
    const task: DriftTask = {
      id: autoDriftTaskId(record.name, record.unreachableSince),
      kind: "drift",
      from: record.name,
      force: false,
      reason: "node-timeout",
      createdAt: new Date(this.now()).toISOString(),
    };
    const key = keys.task(task.id);
    // Create-only: the same outage's task, written by an earlier monitor, is not written twice.
    const res = await this.bounded(`write drift task for ${record.name}`, signal, () =>
      this.store.txn([{ key, target: "createRevision", equals: 0 }], [{ type: "put", key, value: JSON.stringify(task) }]),
    );
    record.autoDriftTask = task.id;
    this.metrics.writes.inc({ kind: "drift-task" });
    if (res.succeeded) {
      this.log.warn({ node: record.name, since: record.unreachableSince, task: task.id }, "node unreachable past the node timeout; its instances drift elsewhere");
      this.nodeEvent("NodeTimedOut", record.name, `unreachable since ${record.unreachableSince}: its instances drift to other nodes (task ${task.id})`);
    }
    return Infinity;
  }

  private async observe(node: NodeResources, signal: AbortSignal): Promise<NodeRecord> {
    const now = new Date(this.now());
    const previous = this.written.get(node.name)?.record;
    // A record is rewritten at least every heartbeat, at the next sync after it: one older than
    // that (plus slack) was left by a monitor that has not been running since.
    const maxAgeMs = this.heartbeatMs + 2 * this.intervalMs;
    if (node.state !== "ready") return unreachableRecord(node, node.error ?? "unreachable", previous, now, maxAgeMs);
    try {
      return nodeRecord(node, await this.reserved(node.name, signal), now);
    } catch (e) {
      if (signal.aborted) throw e;
      const reason = e instanceof Error ? e.message : String(e);
      return listingFailedRecord(node, `listing containers failed: ${reason}`, previous, now);
    }
  }

  /** Summed limits of the node's up Capstan containers (PodGroup instances and dependency pods). */
  private async reserved(node: string, signal: AbortSignal): Promise<ResourceRequest> {
    const lists: ContainerSummary[][] = await Promise.all(
      reservedLabels.map((label) =>
        this.bounded(`list containers on ${node}`, signal, (s) =>
          this.cluster.listContainers(node, { all: true, filters: { label: [label], status: ["running", "paused", "restarting"] }, signal: s }),
        ),
      ),
    );
    // A container carrying both labels counts once.
    const up = [...new Map(lists.flat().map((c) => [c.id, c])).values()];
    const seen = new Set<string>();
    const total = { memoryBytes: 0, nanoCpus: 0 };
    // Bounded: a node with hundreds of new containers must not get hundreds of inspects at once.
    const q = new PQueue({ concurrency: inspectConcurrency });
    await Promise.all(
      up.map((c) =>
        q.add(async () => {
          const key = `${node}/${c.id}`;
          seen.add(key);
          let request = this.limits.get(key);
          if (request === undefined) {
            try {
              const details = await this.bounded(`inspect ${c.name} on ${node}`, signal, (s) => this.cluster.inspect(c, { signal: s }));
              // Stopped (or not ours) since the list: it reserves nothing.
              request = reservationOf(details) ?? { memoryBytes: 0, nanoCpus: 0 };
              if (details.status.running || details.status.paused || details.status.restarting) this.limits.set(key, request);
            } catch (e) {
              if (e instanceof NotFoundError) return; // removed since the list
              throw e;
            }
          }
          total.memoryBytes += request.memoryBytes;
          total.nanoCpus += request.nanoCpus;
        }),
      ),
    );
    for (const key of this.limits.keys()) if (key.startsWith(`${node}/`) && !seen.has(key)) this.limits.delete(key);
    return total;
  }

  private async write(record: NodeRecord, signal: AbortSignal): Promise<void> {
    const last = this.written.get(record.name);
    const fresh = last !== undefined && this.clock.now() - last.at < this.heartbeatMs;
    if (last !== undefined && fresh && sameRecord(last.record, record)) return;
    await this.bounded(`write node record ${record.name}`, signal, () => this.store.put(keys.node(record.name), JSON.stringify(record)));
    if (last === undefined || !sameRecord(last.record, record)) {
      this.log.info({ node: record.name, state: record.state, reserved: record.reserved, error: record.error }, "node record changed");
    }
    if (last?.record.state !== record.state) {
      if (record.state === "ready") this.nodeEvent("NodeReady", record.name, `engine ${record.engineVersion} answers: ${record.cpus} CPUs, ${Math.round(record.memoryBytes / 2 ** 20)} MiB`);
      else this.nodeEvent("NodeDown", record.name, `unreachable: ${record.error ?? "no answer"}`);
    }
    this.written.set(record.name, { record, at: this.clock.now() });
    this.metrics.writes.inc({ kind: "put" });
  }

  private async forget(name: string, signal: AbortSignal): Promise<void> {
    await this.bounded(`delete node record ${name}`, signal, () => this.store.delete(keys.node(name)));
    this.written.delete(name);
    this.metrics.writes.inc({ kind: "delete" });
    this.log.info({ node: name }, "node left the cluster; record deleted");
    this.nodeEvent("NodeRemoved", name, "no longer in -cluster; its record was deleted");
  }

  private nodeEvent(reason: "NodeReady" | "NodeDown" | "NodeTimedOut" | "NodeRemoved", node: string, message: string): void {
    this.events.record({ type: reason === "NodeDown" || reason === "NodeTimedOut" ? "Warning" : "Normal", reason, kind: "node", name: node, node, message });
  }

  /** `call`, given a signal that aborts at the deadline or on stop; rejects at the deadline either way. */
  private async bounded<T>(what: string, outer: AbortSignal, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const abort = new AbortController();
    // One listener on `outer` for all calls in flight (runtime/abort-fanout.ts).
    const unsubscribe = onAbort(outer, () => abort.abort(outer.reason));
    try {
      return await withDeadline(call(abort.signal), this.callTimeoutMs, this.clock, what, outer);
    } finally {
      unsubscribe();
      abort.abort();
    }
  }
}
