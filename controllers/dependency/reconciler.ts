// Reconcile(name): a dependency's desired state (its spec, and the reference counts derived from
// PodGroup specs and statuses) vs actual (the container cache, corrected by inspects) -> the next
// safe steps -> status. Level-triggered: correct whenever it runs, however often, after a crash
// at any point. The operations table it implements is in docs/dependencies.md.
//
// Per slot (node, scope) the status keeps refCount, verifyTime and deployStartedAt. Each pass
// compares the derived count with the stored one:
//   no record, count > 0          add:    deploy the pod; verifyTime = deployStartedAt = now
//   count went up or down         add / remove: refCount = count, verifyTime = now; never removed here
//   count unchanged > 0, refresh  verify: verifyTime = now
//   count 0                       reclaimed once now >= max(verifyTime, deployStartedAt) + gc
//
// Invariants, with where they are kept:
// - D1 a pod is reclaimed only when its count is 0 AND the GC time has passed since both its
//   verifyTime and its deployStartedAt (converge). Both times are in the store, and counts are
//   rebuilt from complete caches before any reconcile runs (reference-index.ts), so a restart
//   reclaims nothing early; every count-0 pod requeues for its reclaim time, so nothing is kept
//   forever either.
// - D2 one pod per slot: names are deterministic (a second create is a 409 and is adopted), and
//   every other container of the slot is an extra of classify() and removed.
// - D3 an upgrade (spec version or data format) replaces one pod at a time, its intent persisted
//   before each step ({slot, phase: "removing"} before the removal, {phase: "removed", at} after),
//   so a restart neither skips the update wait nor replaces two pods at once.
//   A step whose node becomes unreachable is set aside (the rollout moves on to the next pod);
//   the pod is taken up again once its node is back: so "one at a time" holds among the pods
//   that can be reached, and a dead node never stalls an update.
// - D4 a container whose node is unreachable is unknown, not missing: nothing is deployed,
//   removed or reclaimed for that slot until the node is back.
// - D6 the removal of a dependency waits only for unreachable nodes that may hold its containers:
//   those with containers in the cache, and those never heard from since this process started
//   (the cache has not seen their list). A node heard from holds none beyond what the cache shows:
//   every create of ours is recorded in it, so waiting for it would only block the removal.
// - D5 the status is written only when it changed, with compare-and-swap on its modRevision; the
//   pass waits for the status informer to reflect its own last write before reading it again.
// - D7 a pod is created only once its images are on its node: a missing one is pulled first
//   (controllers/shared/image-pull.ts, in the background; the pod is pending with the pull's progress as its
//   lastError until it is done; a failed pull is a failed deploy, with back-off).
import PQueue from "p-queue";
import type { CachedContainer, ContainerCache } from "../../adapters/cluster/container-cache.ts";
import {
  ConflictError,
  matchesFilters,
  parsePlacementFilters,
  type Cluster,
  type NodeResources,
} from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { DependencyEvents } from "./events.ts";
import type { DependencyLayout, DependencyPodStatus, DependencyState, DependencyStatus } from "../../api/resources/dependency.ts";
import type { Clock } from "../../runtime/clock.ts";
import { withDeadline } from "../../runtime/deadline.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { Logger } from "../../runtime/log.ts";
import type { ReconcileContext, Result } from "../../runtime/result.ts";
import type { RestartBackoff } from "../shared/backoff.ts";
import { countExit, countFailure } from "../shared/restart.ts";
import { inspectAll, stopAndRemove, sweepNode, type ContainerOpsContext } from "../shared/container-ops.ts";
import { containerStatus, needsDetails, pausedError, podContainersState, stoppedPod } from "../shared/containers.ts";
import { ForeignContainerError, StatusConflictError } from "../shared/errors.ts";
import { currentFormat } from "../shared/format.ts";
import { pullRecheckMs, type ImagePuller } from "../shared/image-pull.ts";
import { settleAll } from "../shared/settle.ts";
import { readOwnStatus, writeStatusIfChanged } from "../shared/status-records.ts";
import { filtersFor, killTimeoutOf, planContainer } from "./container-spec.ts";
import { identify, labelKeys, parseSlotKey, type Slot } from "./naming.ts";
import { classify, podComplete, podContainers, podRunning, podStale, slotContainers, type DependencyView, type Pod } from "./observe.ts";
import type { ReferenceIndex } from "./reference-index.ts";
import {
  decodeStatus,
  readInternal,
  readSlotRecord,
  type Internal,
  type SlotMemory,
  type SlotRecord,
  type SpecEntry,
  type StatusEntry,
  type StoredDependency,
} from "./stored.ts";

export interface DependencyReconcilerOptions {
  store: Store;
  cluster: Cluster;
  cache: ContainerCache;
  specs: Informer<SpecEntry>;
  statuses: Informer<StatusEntry>;
  references: ReferenceIndex;
  layout: DependencyLayout;
  /** Unreferenced pods are reclaimed after this long (-depends-gc). */
  gcMs: number;
  /** Wait between removing a pod and deploying its new version (-update-wait). */
  updateWaitMs: number;
  refreshIntervalMs: number;
  backoff: RestartBackoff;
  /** Wall clock (ms since the epoch): persisted times must mean the same after a restart. */
  now: () => number;
  random: () => number;
  clock: Clock;
  callTimeoutMs: number;
  /** Pulls missing images before a pod is created (D7). */
  images: Pick<ImagePuller, "ensureImages">;
  /** Events read from each status write (events.ts; docs/events.md). */
  events?: DependencyEvents;
}

interface Memory {
  statusRevision: number;
  nextFullRefreshAt: number;
}

const asap = 1;
const unreachableRecheckMs = 5_000;
const nodesTtlMs = 30_000;

export class DependencyReconciler {
  private readonly memory = new Map<string, Memory>();
  private nodesCache: { at: number; nodes: NodeResources[] } | undefined;

  constructor(readonly o: DependencyReconcilerOptions) {}

  /** Revision of our last status write (the status source skips its own echo). */
  lastStatusRevision(name: string): number | undefined {
    return this.memory.get(name)?.statusRevision;
  }

  readonly reconcile = async (name: string, ctx: ReconcileContext): Promise<Result | void> => {
    const mem = this.memory.get(name) ?? { statusRevision: 0, nextFullRefreshAt: 0 };
    this.memory.set(name, mem);
    const status = await this.readStatus(name, mem, ctx.signal);
    const specEntry = this.o.specs.get(this.o.layout.dependency(name));
    if (!specEntry && !status) {
      // Fully removed, or containers of a dependency this store never had: another orchestrator's
      // (one engine may serve several Capstan stores). Neither is ours to touch.
      this.memory.delete(name);
      return;
    }
    if (specEntry && !specEntry.spec) {
      // A spec we cannot read must not look deleted: touch nothing, say why.
      const prev = status?.status;
      const next: DependencyStatus = {
        ...(prev ?? { pods: [], state: "degraded", lastError: "", updatedAt: "" }),
        state: "degraded",
        lastError: `the stored spec cannot be read (${specEntry.invalid}); nothing is changed until it is fixed`,
        updatedAt: new Date(this.o.now()).toISOString(),
      };
      await this.writeStatus(name, mem, status, next);
      return;
    }
    return new Pass(this, name, specEntry, status, mem, ctx).run();
  };

  private readStatus(name: string, mem: Memory, signal: AbortSignal): Promise<StatusEntry | undefined> {
    const { statuses, layout, store } = this.o;
    return readOwnStatus({ statuses, store, key: layout.statusOf(name), ownRevision: mem.statusRevision, decode: decodeStatus, signal });
  }

  /** D5: compare-and-swap, only when changed. Returns the entry now stored. */
  async writeStatus(name: string, mem: Memory, prev: StatusEntry | undefined, next: DependencyStatus): Promise<StatusEntry> {
    const { record, written } = await writeStatusIfChanged(this.o.store, this.o.layout.statusOf(name), prev, next);
    if (written) mem.statusRevision = record.modRevision;
    if (written) this.o.events?.statusWritten(name, this.o.specs.get(this.o.layout.dependency(name))?.spec, prev?.status, next);
    return record;
  }

  /** Delete spec and status in one transaction, each only if unchanged since read. */
  async deleteKeys(name: string, mem: Memory, spec: SpecEntry | undefined, status: StatusEntry | undefined): Promise<void> {
    const { layout, store } = this.o;
    const compares = [];
    const ops = [];
    if (status) {
      compares.push({ key: layout.statusOf(name), target: "modRevision" as const, equals: status.modRevision });
      ops.push({ type: "delete" as const, key: layout.statusOf(name) });
    }
    if (spec) {
      compares.push({ key: layout.dependency(name), target: "modRevision" as const, equals: spec.modRevision });
      ops.push({ type: "delete" as const, key: layout.dependency(name) });
    }
    if (ops.length === 0) return;
    const res = await store.txn(compares, ops);
    if (!res.succeeded) throw new StatusConflictError(`dependency ${name} changed while its removal finished; retrying`);
    mem.statusRevision = res.revision;
  }

  /** Node resources (labels for filters, addresses for status), reused for a while: they rarely change. */
  async nodes(signal: AbortSignal): Promise<NodeResources[]> {
    const { clock, cluster, callTimeoutMs } = this.o;
    const c = this.nodesCache;
    if (c && clock.now() - c.at < nodesTtlMs && !c.nodes.some((n) => n.state !== "ready" && this.reachable(n.name))) return c.nodes;
    const nodes = await withDeadline(cluster.nodes({ signal }), callTimeoutMs, clock, "list nodes", signal);
    this.nodesCache = { at: clock.now(), nodes };
    return nodes;
  }

  address(node: string): string {
    return this.nodesCache?.nodes.find((n) => n.name === node)?.address ?? "";
  }

  /** Whether the node's event stream is up, so that its containers in the cache are current. */
  reachable(node: string): boolean {
    return this.o.cache.nodeState(node) === "ready";
  }

  /** Whether the cache has had the node's container list since this process started (D6). */
  heardFrom(node: string): boolean {
    return this.o.cache.listedSinceStart(node);
  }

  forget(name: string): void {
    this.memory.delete(name);
  }
}

/** One reconcile of one dependency. */
class Pass {
  private readonly o: DependencyReconcilerOptions;
  private readonly log: Logger;
  private readonly signal: AbortSignal;
  private readonly now: number;
  private readonly spec: StoredDependency | undefined;
  private readonly internal: Internal;
  private view!: DependencyView;
  /** The pods this pass keeps a record of, by slot key (D1's bookkeeping). */
  private readonly records = new Map<string, SlotRecord>();
  private readonly wakeups: number[] = [];
  private readonly notes: string[] = [];
  /** Slots whose pod waits for an image pull (D7), with its progress shown as lastError. */
  private readonly pulling = new Map<string, string>();
  private statusEntry: StatusEntry | undefined;

  constructor(
    private readonly r: DependencyReconciler,
    private readonly name: string,
    private readonly specEntry: SpecEntry | undefined,
    status: StatusEntry | undefined,
    private readonly mem: Memory,
    ctx: ReconcileContext,
  ) {
    this.o = r.o;
    this.log = ctx.log;
    this.signal = ctx.signal;
    this.now = this.o.now();
    this.spec = specEntry?.spec;
    this.statusEntry = status;
    this.internal = readInternal(status?.status);
  }

  async run(): Promise<Result | void> {
    const full = this.fullRefreshDue();
    await this.inspect(full);
    this.observe();
    const spec = this.spec;
    if (!spec || spec.deleting) return this.remove(spec?.deleting?.force ?? false);
    await this.converge(spec, full);
    this.observe();
    await this.writeStatus(false);
    return this.result();
  }

  // ---- observation ----------------------------------------------------------------------------

  private fullRefreshDue(): boolean {
    const due = this.now >= this.mem.nextFullRefreshAt;
    if (due) this.mem.nextFullRefreshAt = this.now + this.o.refreshIntervalMs * (0.9 + 0.2 * this.o.random());
    this.wakeups.push(this.mem.nextFullRefreshAt);
    return due;
  }

  private containers(): CachedContainer[] {
    return this.o.cache.byLabel(labelKeys.dependency, this.name);
  }

  /** Runtime data is corrected from the engines: everything on a full refresh, else what is incomplete. */
  private async inspect(full: boolean): Promise<void> {
    const todo = this.containers().filter((c) => this.r.reachable(c.node) && (full || needsDetails(c)));
    await inspectAll(this.ops(), todo, 8);
  }

  private ops(): ContainerOpsContext {
    return { cache: this.o.cache, cluster: this.o.cluster, signal: this.signal, log: this.log };
  }

  private observe(): void {
    const version = this.spec?.version ?? Number.MAX_SAFE_INTEGER;
    this.view = classify(this.containers(), this.name, version, this.spec?.containers.length ?? 0);
  }

  private slotMemory(key: string): SlotMemory {
    return this.internal.slots[key] ?? { restarts: 0, failures: 0 };
  }

  private setSlotMemory(key: string, m: SlotMemory): void {
    this.internal.slots[key] = m;
  }

  private wakeAt(at: number): void {
    this.wakeups.push(at);
  }

  private reclaimAt(rec: SlotRecord): number {
    return Math.max(rec.verifyTime, rec.deployStartedAt) + this.o.gcMs;
  }

  // ---- the steps ------------------------------------------------------------------------------

  private async converge(spec: StoredDependency, full: boolean): Promise<void> {
    for (const c of this.view.unidentified) {
      this.notes.push(`container ${c.name} on ${c.node} is labelled ${labelKeys.dependency}=${this.name} but its version cannot be read; left alone`);
    }
    const counts = this.o.references.of(this.name);
    const previous = new Map<string, SlotRecord>();
    for (const p of this.statusEntry?.status?.pods ?? []) {
      const rec = readSlotRecord(p);
      if (rec) previous.set(`${p.node}|${p.namespace}`, rec);
    }
    const reclaim: string[] = [];
    const keys = [...new Set([...previous.keys(), ...counts.keys(), ...this.view.slots.keys()])].sort();
    for (const key of keys) {
      const n = counts.get(key) ?? 0;
      const prev = previous.get(key);
      let rec: SlotRecord;
      if (!prev) {
        if (n === 0 && slotContainers(this.view.slots.get(key)).length === 0) continue;
        // add (the first reference), or a pod found without a record (its record was lost):
        // counted from now, so an adopted pod is never reclaimed early either.
        rec = { refCount: n, verifyTime: this.now, deployStartedAt: this.now };
        this.log.info({ slot: key, refCount: n }, n > 0 ? "first reference: pod wanted" : "unreferenced pod adopted");
      } else if (prev.refCount !== n) {
        rec = { ...prev, refCount: n, verifyTime: this.now }; // add / remove
        this.log.info({ slot: key, from: prev.refCount, to: n }, "reference count changed");
      } else if (n > 0 && full) {
        rec = { ...prev, verifyTime: this.now }; // verify
      } else {
        rec = prev;
      }
      this.records.set(key, rec);
      if (n === 0) {
        const at = this.reclaimAt(rec);
        if (this.now >= at) reclaim.push(key);
        else this.wakeAt(at);
      }
    }
    const reclaiming = new Set(reclaim);
    const rolloutRemoval = await this.rollout(spec, reclaiming);

    const work: Promise<void>[] = [];
    for (const key of reclaim) work.push(this.reclaim(spec, key));
    if (rolloutRemoval !== undefined) work.push(this.removeSlot(spec, rolloutRemoval, false));
    const q = new PQueue({ concurrency: 8 });
    for (const key of this.records.keys()) {
      if (reclaiming.has(key) || key === rolloutRemoval) continue;
      work.push(q.add(() => this.maintain(spec, key)));
    }
    await settleAll(work);
    if (rolloutRemoval !== undefined && this.internal.rollout?.phase === "removing") {
      // D3: the old pod is gone now; the update wait starts.
      this.internal.rollout = { ...this.internal.rollout, phase: "removed", at: this.o.now() };
      this.wakeAt(this.internal.rollout.at + this.o.updateWaitMs);
    }
  }

  /** D1: the pod's time is up. Removed (stop, then remove, then a sweep of its node), record dropped. */
  private async reclaim(spec: StoredDependency, key: string): Promise<void> {
    const { node } = parseSlotKey(key);
    if (!this.r.reachable(node)) {
      this.notes.push(`pod on ${node} is due for reclaiming, but ${node} is unreachable; waiting for it`);
      this.wakeAt(this.now + unreachableRecheckMs);
      return;
    }
    await this.removeSlot(spec, key, false);
    this.records.delete(key);
    delete this.internal.slots[key];
    this.log.info({ slot: key }, "unreferenced pod reclaimed");
  }

  /**
   * The upgrade step (D3). Returns the slot whose old pod must be removed in this pass, if any
   * (its intent is already persisted).
   */
  private async rollout(spec: StoredDependency, reclaiming: ReadonlySet<string>): Promise<string | undefined> {
    const version = spec.version;
    let ro = this.internal.rollout;
    if (ro && (!this.records.has(ro.slot) || reclaiming.has(ro.slot))) ro = undefined;
    if (ro && ro.toVersion !== version) ro = { ...ro, toVersion: version };
    this.internal.rollout = ro;
    if (ro && !this.r.reachable(parseSlotKey(ro.slot).node)) {
      // D3, D4: set aside; its pod is stale (or missing) still, and is taken up once the node is back.
      this.log.info({ slot: ro.slot }, "upgrade step set aside: its node is unreachable");
      ro = undefined;
    }
    this.internal.rollout = ro;
    if (ro) {
      const kept = this.view.slots.get(ro.slot)?.kept;
      if (kept && podStale(kept, version)) {
        if (ro.phase === "removing") return ro.slot; // intent persisted by an earlier pass
        this.internal.rollout = { ...ro, phase: "removing", at: this.now };
        await this.writeStatus(true);
        return ro.slot;
      }
      if (!kept) {
        // Removed before a crash, or behind our back: the wait starts now (never shorter).
        if (ro.phase === "removing") this.internal.rollout = { ...ro, phase: "removed", at: this.now };
        const until = this.internal.rollout!.at + this.o.updateWaitMs;
        if (this.now < until) this.wakeAt(until);
        return undefined; // maintain() deploys it once the wait is over
      }
      if (!(podRunning(kept) && podComplete(kept, spec.containers.length))) return undefined; // a start or event wakes us
      this.internal.rollout = undefined; // this pod is done
    }
    const stale = [...this.records.keys()].filter((k) => {
      const kept = this.view.slots.get(k)?.kept;
      return !reclaiming.has(k) && kept !== undefined && podStale(kept, version) && this.r.reachable(parseSlotKey(k).node);
    });
    if (stale.length === 0) return undefined;
    // A pod that is down anyway goes first: replacing it costs no availability.
    const next = stale.find((k) => !podRunning(this.view.slots.get(k)!.kept!)) ?? stale[0]!;
    this.internal.rollout = { slot: next, toVersion: version, phase: "removing", at: this.now };
    this.setSlotMemory(next, { restarts: 0, failures: 0 }); // the new version starts with a clean slate
    await this.writeStatus(true); // D3: intent first
    this.log.info({ slot: next, toVersion: version }, "upgrading dependency pod");
    return next;
  }

  /** Deploy, complete, start or restart the slot's pod; remove its extras. */
  private async maintain(spec: StoredDependency, key: string): Promise<void> {
    const slot = parseSlotKey(key);
    if (!this.r.reachable(slot.node)) return; // D4
    const v = this.view.slots.get(key);
    if (v && v.extras.length > 0) await this.removeContainers(v.extras.map((o) => o.c), killTimeoutOf(spec), false);
    const ro = this.internal.rollout;
    const kept = v?.kept;
    if (ro?.slot === key && !kept && this.now < ro.at + this.o.updateWaitMs) return; // D3: the wait
    let m = this.slotMemory(key);
    const podSize = spec.containers.length;
    if (!kept) {
      if (m.nextDeployAt !== undefined && this.now < m.nextDeployAt) {
        this.wakeAt(m.nextDeployAt);
        return;
      }
      await this.deploy(spec, key, slot, Array.from({ length: podSize }, (_, k) => k));
      return;
    }
    if (kept.version === spec.version && !podComplete(kept, podSize)) {
      await this.deploy(spec, key, slot, Array.from({ length: podSize }, (_, k) => k).filter((k) => !kept.containers.has(k)));
      return;
    }
    if (podRunning(kept)) {
      if (m.lastError !== undefined || m.failures > 0 || m.nextAttemptAt !== undefined) {
        // Running again: the back-off starts over only after a long enough run (resetAfterMs).
        const since = Math.max(...podContainers(kept).map((o) => o.c.startedAt ?? this.now));
        const ok = this.now - since >= this.o.backoff.resetAfterMs;
        const { lastError: _e, nextAttemptAt: _a, nextDeployAt: _d, ...rest } = m;
        this.setSlotMemory(key, ok ? { ...rest, failures: 0 } : rest);
      }
      return;
    }
    const { blocked, lastStopped: last } = stoppedPod(podContainers(kept).map((o) => o.c));
    if (blocked === "busy") {
      this.wakeAt(this.now + 1_000); // the engine is busy with it
      return;
    }
    if (blocked === "paused") {
      this.setSlotMemory(key, { ...m, lastError: pausedError });
      return;
    }
    // Dead or exited: restarted, always (a dependency has no restart policy), with back-off.
    if (last) {
      const exit = { key: `${last.id}#${m.restarts}`, exitCode: last.exitCode, oomKilled: last.oomKilled, startedAt: last.startedAt, finishedAt: last.finishedAt };
      const counted = countExit(m, exit, "always", this.now, this.o.backoff);
      if (counted !== m) {
        m = counted;
        this.setSlotMemory(key, m);
      }
    }
    if (m.nextAttemptAt !== undefined && this.now < m.nextAttemptAt) {
      this.wakeAt(m.nextAttemptAt);
      return;
    }
    try {
      await this.startContainers(kept);
      this.setSlotMemory(key, { ...m, restarts: m.restarts + (last ? 1 : 0) });
      if (last) this.log.info({ slot: key, restarts: m.restarts + 1 }, "dependency pod restarted");
    } catch (e) {
      if (this.signal.aborted) throw e;
      this.fail(key, `cannot start: ${(e as Error).message}`, "start");
    }
  }

  /** Create (or adopt, D2) containers `indexes` of the slot's pod, then start the pod. */
  private async deploy(spec: StoredDependency, key: string, slot: Slot, indexes: number[]): Promise<void> {
    const { cluster, cache } = this.o;
    try {
      const nodes = await this.r.nodes(this.signal);
      const node = nodes.find((n) => n.name === slot.node);
      if (!node) throw new Error(`node ${slot.node} is not in the cluster`);
      const filters = filtersFor(parsePlacementFilters(spec.filters ?? []));
      if (!matchesFilters(node, filters)) throw new Error(`node ${slot.node} does not match the dependency's filters (${(spec.filters ?? []).join(", ")})`);
      // D7: the images first.
      const images = await this.o.images.ensureImages(slot.node, indexes.map((k) => spec.containers[k]!.image), `dependency/${this.name}/${key}`, this.signal);
      if (images.kind === "pulling") {
        this.pulling.set(key, images.message);
        this.wakeAt(this.now + pullRecheckMs);
        return;
      }
      if (images.kind === "failed") {
        this.fail(key, images.message, "deploy");
        return;
      }
      for (const k of indexes) {
        const plan = planContainer(spec, slot, k);
        try {
          const ref = await cluster.create(slot.node, plan.name, plan.spec, { signal: this.signal });
          cache.recordCreated({ node: slot.node, id: ref.id, name: plan.name, image: plan.spec.image, labels: plan.spec.labels ?? {}, limits: plan.limits });
        } catch (e) {
          if (!(e instanceof ConflictError)) throw e;
          // The name is taken on this node: ours from an earlier attempt (re-registered), or not ours.
          const d = await cluster.inspect({ node: slot.node, id: plan.name }, { signal: this.signal });
          const id = identify(d, this.name);
          if (!id || id.scope !== slot.scope || id.version !== spec.version || id.index !== k || id.format !== currentFormat) {
            throw new ForeignContainerError(`container name ${plan.name} on ${slot.node} is taken by another container (id ${d.id.slice(0, 12)}); rename or remove it`);
          }
          cache.recordDetails(d, undefined);
        }
      }
      this.observe();
      const kept = this.view.slots.get(key)?.kept;
      if (kept) await this.startContainers(kept);
      const m = this.slotMemory(key);
      this.setSlotMemory(key, { restarts: m.restarts, failures: 0 });
      this.log.info({ slot: key, version: spec.version }, "dependency pod deployed");
    } catch (e) {
      if (this.signal.aborted) throw e;
      this.fail(key, `cannot deploy on ${slot.node}: ${(e as Error).message}`, "deploy");
    }
  }

  private async startContainers(pod: Pod): Promise<void> {
    for (const o of podContainers(pod)) {
      if (o.c.state === "running") continue;
      const generation = this.o.cache.get(o.c.node, o.c.id)?.generation;
      await this.o.cluster.start(o.c, { signal: this.signal });
      this.o.cache.recordStarted(o.c.node, o.c.id, generation);
    }
  }

  private fail(key: string, error: string, kind: "deploy" | "start"): void {
    this.log.warn({ slot: key, error }, kind === "deploy" ? "dependency pod not deployed" : "dependency pod not started");
    const m = countFailure(this.slotMemory(key), error, kind, this.now, this.o.backoff);
    this.setSlotMemory(key, m);
    const at = (kind === "deploy" ? m.nextDeployAt : m.nextAttemptAt)!;
    this.wakeAt(at);
  }

  /** Remove every container of the slot, then list its node (not the cache) and remove any leftover. */
  private async removeSlot(spec: StoredDependency | undefined, key: string, force: boolean): Promise<void> {
    const slot = parseSlotKey(key);
    const cs = slotContainers(this.view.slots.get(key)).map((o) => o.c);
    await this.removeContainers(cs, spec ? killTimeoutOf(spec) : 10, force);
    await this.sweep(slot.node, (id) => id?.scope === slot.scope);
  }

  /** Stop (kill timeout; skipped when forced) and remove, with force so nothing is left behind. */
  private removeContainers(cs: CachedContainer[], killTimeout: number, force: boolean): Promise<void> {
    return stopAndRemove(this.ops(), cs, killTimeout, force);
  }

  /** List `node` for the dependency's containers (same label as the cache's) and force-remove those `match` selects. */
  private sweep(node: string, match: (id: ReturnType<typeof identify>) => boolean): Promise<number> {
    return sweepNode(this.ops(), node, `${labelKeys.dependency}=${this.name}`, (c) => match(identify(c, this.name)));
  }

  // ---- removal of the whole dependency (RemoveSpec) --------------------------------------------

  private async remove(force: boolean): Promise<Result | void> {
    const spec = this.spec;
    const killTimeout = spec ? killTimeoutOf(spec) : 10;
    const cs = this.containers();
    const reachable = cs.filter((c) => this.r.reachable(c.node));
    if (reachable.length > 0) {
      await this.writeStatus(false); // "removing" is visible while the stops take their time
      await this.removeContainers(reachable, killTimeout, force);
      this.observe();
    }
    const nodes = await this.r.nodes(this.signal);
    // D6: wait for a down node only if it holds cached containers or was never heard from.
    const holding = new Set(this.containers().map((c) => c.node));
    const down = [...new Set([...holding, ...nodes.map((n) => n.name)])].filter((n) => !this.r.reachable(n) && (holding.has(n) || !this.r.heardFrom(n)));
    if (down.length > 0) {
      this.notes.push(`waiting for node ${down.join(", ")} to confirm the removal`);
      this.wakeAt(this.now + unreachableRecheckMs);
      await this.writeStatus(false);
      return this.result();
    }
    // Nothing cached on a node that could hold some: the reachable engines' own lists have the last word.
    let leftovers = 0;
    for (const n of nodes) if (this.r.reachable(n.name)) leftovers += await this.sweep(n.name, () => true);
    if (leftovers > 0) return { requeueAfterMs: asap };
    await this.r.deleteKeys(this.name, this.mem, this.specEntry, this.statusEntry);
    this.r.forget(this.name);
    this.log.info({ force }, "dependency removed");
    return;
  }

  // ---- status ---------------------------------------------------------------------------------

  /** Build the status from what is observed now and write it if it changed. `intent`: before a step (D3). */
  private async writeStatus(intent: boolean): Promise<void> {
    const status = this.buildStatus();
    this.statusEntry = await this.r.writeStatus(this.name, this.mem, this.statusEntry, status);
    if (intent) this.log.info({ rollout: this.internal.rollout }, "upgrade step recorded");
  }

  private buildStatus(): DependencyStatus {
    const spec = this.spec;
    const version = spec?.version ?? 0;
    const removing = !spec || spec.deleting !== undefined;
    const ro = this.internal.rollout;
    const pods: DependencyPodStatus[] = [];
    const keys = removing ? [...this.view.slots.keys()].sort() : [...this.records.keys()].sort();
    for (const key of keys) {
      const slot = parseSlotKey(key);
      const rec = this.records.get(key) ?? { refCount: 0, verifyTime: this.now, deployStartedAt: this.now };
      const m = this.slotMemory(key);
      const kept = this.view.slots.get(key)?.kept;
      const reachable = this.r.reachable(slot.node);
      let state: DependencyPodStatus["state"];
      let lastError = m.lastError ?? "";
      if (!reachable) {
        state = "unknown";
        lastError = `node ${slot.node} is unreachable: state unknown`;
      } else if (ro?.slot === key) {
        state = "upgrading";
      } else if (!kept) {
        state = m.lastError ? "failed" : "missing";
      } else {
        state = podContainersState(podContainers(kept).map((o) => o.c));
        if (state === "running" && kept.version === version) lastError = "";
      }
      const pull = this.pulling.get(key);
      if (pull !== undefined) {
        lastError = pull;
        if (!kept && (state === "missing" || state === "failed")) state = "pending";
      }
      const p: DependencyPodStatus = {
        node: slot.node,
        namespace: slot.scope,
        refCount: rec.refCount,
        verifyTime: new Date(rec.verifyTime).toISOString(),
        deployStartedAt: new Date(rec.deployStartedAt).toISOString(),
        state,
        version: kept?.version ?? version,
        restartCount: m.restarts,
        lastError,
        containers: kept ? podContainers(kept).map((o) => containerStatus(o.c, this.r.address(o.c.node), o.id.format)) : [],
      };
      if (rec.refCount === 0 && !removing) p.reclaimAt = new Date(this.reclaimAt(rec)).toISOString();
      pods.push(p);
    }
    let state: DependencyState;
    if (removing) state = "removing";
    else if (pods.length === 0) state = "idle";
    else if (ro || pods.some((p) => p.containers.length > 0 && p.version !== version)) state = "updating";
    else if (pods.every((p) => p.state === "pending")) state = "pending";
    else if (pods.some((p) => p.state !== "running")) state = "degraded";
    else state = "running";
    const firstError = pods.find((p) => p.lastError !== "");
    const status: DependencyStatus = {
      state,
      lastError: this.notes[0] ?? (firstError ? `pod on ${firstError.node}${firstError.namespace ? ` for ${firstError.namespace}` : ""}: ${firstError.lastError}` : ""),
      updatedAt: new Date(this.o.now()).toISOString(),
      pods,
    };
    const slots: Record<string, SlotMemory> = {};
    for (const key of keys) {
      const m = this.internal.slots[key];
      if (m && (m.restarts > 0 || m.failures > 0 || m.lastExit !== undefined || m.lastError !== undefined)) slots[key] = m;
    }
    if (ro || Object.keys(slots).length > 0) status.internal = { ...(ro && { rollout: ro }), slots } as unknown as Record<string, unknown>;
    return status;
  }

  private result(): Result {
    const at = Math.min(...this.wakeups);
    return { requeueAfterMs: Math.max(asap, Math.ceil(at - this.o.now())) };
  }
}
