// Reconcile(name): a dependency's desired state (its spec, and the reference counts derived from
// PodGroup specs and statuses) vs actual (the container cache, corrected by inspects) -> the next
// safe steps -> status. Level-triggered: correct whenever it runs, however often, after a crash
// at any point. The tables it implements, and the invariants below, are stated in
// docs/dependencies.md ("The other operations", "Invariants").
//
// A pass observes (inspects, classifies the containers into slots), decides with plain functions
// (records.ts: the reference bookkeeping and the pods due for reclaiming; upgrade.ts: the rollout
// step; slot-plan.ts: what each slot's pod needs; removal.ts: RemoveSpec), acts on those plans,
// and writes the status (status.ts).
//
// Invariants, with where they are kept:
// - D1 a pod is reclaimed only when its count is 0 AND the GC time has passed since both its
//   verifyTime and its deployStartedAt (records.ts). Both times are in the store, and counts are
//   rebuilt from complete caches before any reconcile runs (reference-index.ts), so a restart
//   reclaims nothing early; every count-0 pod requeues for its reclaim time, so nothing is kept
//   forever either.
// - D2 one pod per slot: names are deterministic (a second create is a 409 and is adopted:
//   controllers/shared/create-or-adopt.ts), and every other container of the slot is an extra of
//   classify() and removed (slot-plan.ts).
// - D3 an upgrade (spec version or data format) replaces one pod at a time, its intent persisted
//   before each step ({slot, phase: "removing"} before the removal, {phase: "removed", at} after),
//   so a restart neither skips the update wait nor replaces two pods at once (upgrade.ts, on
//   controllers/shared/rollout.ts). A step whose node becomes unreachable is set aside (the
//   rollout moves on to the next pod); the pod is taken up again once its node is back: so "one
//   at a time" holds among the pods that can be reached, and a dead node never stalls an update.
// - D4 a container whose node is unreachable is unknown, not missing: nothing is deployed,
//   removed or reclaimed for that slot until the node is back (slot-plan.ts, reclaim()).
// - D5 the removal of a dependency waits only for unreachable nodes that may hold its containers:
//   those with containers in the cache, and those never heard from since this process started
//   (the cache has not seen their list). A node heard from holds none beyond what the cache shows:
//   every create of ours is recorded in it, so waiting for it would only block the removal
//   (removal.ts).
// - D6 the status is written only when it changed, with compare-and-swap on its modRevision; the
//   pass waits for the status informer to reflect its own last write before reading it again
//   (controllers/shared/status-records.ts).
// - D7 a pod is created only once its images are on its node: a missing one is pulled first
//   (controllers/shared/image-pull.ts, in the background; the pod is pending with the pull's
//   progress as its lastError until it is done; a failed pull is a failed deploy, with back-off).
import PQueue from "p-queue";
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import type { DependencyEvents } from "./events.ts";
import type { DependencyLayout, DependencyStatus } from "../../api/resources/dependency.ts";
import type { Clock } from "../../runtime/clock.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { Logger } from "../../runtime/log.ts";
import type { ReconcileContext, Result } from "../../runtime/result.ts";
import { inspectAll, startContainers, stopAndRemove, sweepNode, type ContainerOpsContext } from "../shared/container-ops.ts";
import { needsDetails } from "../shared/containers.ts";
import type { PodReconcilerBase } from "../shared/controller-wiring.ts";
import { createOrAdopt, type AdoptRule } from "../shared/create-or-adopt.ts";
import { deleteUnchanged } from "../shared/delete-unchanged.ts";
import { currentFormat } from "../shared/format.ts";
import { pullRecheckMs } from "../shared/image-pull.ts";
import { countFailure } from "../shared/restart.ts";
import { settleAll } from "../shared/settle.ts";
import { readOwnStatus, writeStatusIfChanged } from "../shared/status-records.ts";
import { StatusWritesInFlight } from "../shared/status-writes-in-flight.ts";
import { unreadableSpecStatus } from "../shared/unreadable-spec.ts";
import { asap, Wakeups } from "../shared/wakeups.ts";
import { checkPlacement, killTimeoutOf, planContainer } from "./container-spec.ts";
import { identify, labelKeys, parseSlotKey, type Slot } from "./naming.ts";
import { classify, podContainers, slotContainers, type DependencyView } from "./observe.ts";
import { DependencyNodes } from "./nodes.ts";
import { planRecords, previousRecords } from "./records.ts";
import type { ReferenceIndex } from "./reference-index.ts";
import { nodesToWaitFor, removableNow } from "./removal.ts";
import { planSlot } from "./slot-plan.ts";
import { buildStatus } from "./status.ts";
import { decodeStatus, readInternal, type Internal, type SlotMemory, type SlotRecord, type SpecEntry, type StatusEntry, type StoredDependency } from "./stored.ts";
import { planUpgrade, upgradeStepRemoved } from "./upgrade.ts";

export interface DependencyReconcilerOptions extends PodReconcilerBase {
  specs: Informer<SpecEntry>;
  statuses: Informer<StatusEntry>;
  references: ReferenceIndex;
  layout: DependencyLayout;
  /** Unreferenced pods are reclaimed after this long (-depends-gc). */
  gcMs: number;
  clock: Clock;
  callTimeoutMs: number;
  /** Events read from each status write (events.ts; docs/events.md). */
  events?: DependencyEvents;
}

/** In-memory facts per dependency; losing them costs at most one extra refresh. */
interface Memory {
  statusRevision: number;
  nextFullRefreshAt: number;
}

/** Passes of one dependency that ended (returned) since this reconciler was made. */
export interface PassCounts {
  passes: number;
  /** Of those, the full refreshes (every container inspected; a referenced slot verified). */
  fullRefreshes: number;
  /** Wall-clock ms at which the last of them began (0: none yet). */
  lastStartedAt: number;
}

const unreachableRecheckMs = 5_000;
/** Kill timeout (s) of a removal whose spec is gone. */
const defaultKillTimeout = 10;

export class DependencyReconciler {
  private readonly memory = new Map<string, Memory>();
  private readonly counts = new Map<string, PassCounts>();
  /** The nodes as this reconciler knows them (nodes.ts). */
  readonly nodes: DependencyNodes;

  constructor(readonly options: DependencyReconcilerOptions) {
    this.nodes = new DependencyNodes(options.cluster, options.cache, options.clock, options.callTimeoutMs);
  }

  /** Status writes in flight, for the status source (their echo may come before their revision). */
  readonly statusWrites = new StatusWritesInFlight();

  /** Revision of our last status write (the status source skips its own echo). */
  lastStatusRevision(name: string): number | undefined {
    return this.memory.get(name)?.statusRevision;
  }

  /** The passes of `name` that ended (an observable for tests that wait for the controller to have looked). */
  passes(name: string): PassCounts {
    return { ...(this.counts.get(name) ?? { passes: 0, fullRefreshes: 0, lastStartedAt: 0 }) };
  }

  readonly reconcile = async (name: string, ctx: ReconcileContext): Promise<Result | void> => {
    const startedAt = this.options.now();
    const memory = this.memory.get(name) ?? { statusRevision: 0, nextFullRefreshAt: 0 };
    this.memory.set(name, memory);
    const status = await this.readStatus(name, memory, ctx.signal);
    const specEntry = this.options.specs.get(this.options.layout.dependency(name));
    if (!specEntry && !status) {
      // Fully removed, or containers of a dependency this store never had: another orchestrator's
      // (one engine may serve several Capstan stores). Neither is ours to touch.
      this.memory.delete(name);
      this.counted(name, startedAt, false);
      return;
    }
    if (specEntry && !specEntry.spec) {
      // A spec we cannot read must not look deleted: touch nothing, say why.
      const empty: DependencyStatus = { pods: [], state: "degraded", lastError: "", updatedAt: "" };
      await this.writeStatus(name, memory, status, unreadableSpecStatus(status?.status, empty, "degraded", specEntry.invalid, this.options.now()));
      this.counted(name, startedAt, false);
      return;
    }
    const pass = new Pass(this, name, specEntry, status, memory, ctx);
    const result = await pass.run();
    this.counted(name, startedAt, pass.fullRefresh);
    return result;
  };

  private counted(name: string, startedAt: number, full: boolean): void {
    // Counted for dependencies that still exist: a removed one's count goes with its memory, so
    // names of removed (or other stores') dependencies do not pile up.
    if (!this.memory.has(name)) {
      this.counts.delete(name);
      return;
    }
    const before = this.counts.get(name) ?? { passes: 0, fullRefreshes: 0, lastStartedAt: 0 };
    this.counts.set(name, { passes: before.passes + 1, fullRefreshes: before.fullRefreshes + (full ? 1 : 0), lastStartedAt: startedAt });
  }

  private readStatus(name: string, memory: Memory, signal: AbortSignal): Promise<StatusEntry | undefined> {
    const { statuses, layout, store } = this.options;
    return readOwnStatus({ statuses, store, key: layout.statusOf(name), ownRevision: memory.statusRevision, decode: decodeStatus, signal });
  }

  /** D6: compare-and-swap, only when changed. Returns the entry now stored. */
  async writeStatus(name: string, memory: Memory, prev: StatusEntry | undefined, next: DependencyStatus): Promise<StatusEntry> {
    const { store, layout, specs, events } = this.options;
    const own = { writes: this.statusWrites, recorded: (revision: number) => (memory.statusRevision = revision) };
    const { record, written } = await writeStatusIfChanged(store, layout.statusOf(name), prev, next, own);
    if (written) events?.statusWritten(name, specs.get(layout.dependency(name))?.spec, prev?.status, next);
    return record;
  }

  /** Delete spec and status in one transaction, each only if unchanged since read. */
  async deleteKeys(name: string, memory: Memory, spec: SpecEntry | undefined, status: StatusEntry | undefined): Promise<void> {
    const { layout, store } = this.options;
    const result = await deleteUnchanged(
      store,
      [status && { key: layout.statusOf(name), modRevision: status.modRevision }, spec && { key: layout.dependency(name), modRevision: spec.modRevision }],
      [],
      `dependency ${name} changed while its removal finished; retrying`,
    );
    if (result) memory.statusRevision = result.revision;
  }

  forget(name: string): void {
    this.memory.delete(name);
  }
}

/** One reconcile of one dependency: observe, decide (plain functions), act, write the status. */
class Pass {
  private readonly options: DependencyReconcilerOptions;
  private readonly log: Logger;
  private readonly signal: AbortSignal;
  /** Engine calls on the dependency's containers, with the cache kept in step. */
  private readonly ops: ContainerOpsContext;
  private readonly now: number;
  private readonly spec: StoredDependency | undefined;
  private readonly internal: Internal;
  private view!: DependencyView;
  /** The pods this pass keeps a record of, by slot key (D1's bookkeeping). */
  private readonly records = new Map<string, SlotRecord>();
  private readonly wakeups = new Wakeups();
  private readonly notes: string[] = [];
  /** Slots whose pod waits for an image pull (D7), with its progress shown as lastError. */
  private readonly pulling = new Map<string, string>();
  private statusEntry: StatusEntry | undefined;
  /** Whether this pass is a full refresh. */
  fullRefresh = false;

  constructor(
    private readonly reconciler: DependencyReconciler,
    private readonly name: string,
    private readonly specEntry: SpecEntry | undefined,
    status: StatusEntry | undefined,
    private readonly memory: Memory,
    ctx: ReconcileContext,
  ) {
    this.options = reconciler.options;
    this.log = ctx.log;
    this.signal = ctx.signal;
    this.ops = { cache: this.options.cache, cluster: this.options.cluster, signal: ctx.signal, log: ctx.log };
    this.now = this.options.now();
    this.spec = specEntry?.spec;
    this.statusEntry = status;
    this.internal = readInternal(status?.status);
  }

  async run(): Promise<Result | void> {
    this.fullRefresh = this.fullRefreshDue();
    await this.inspect(this.fullRefresh);
    this.observe();
    const spec = this.spec;
    if (!spec || spec.deleting) return this.remove(spec?.deleting?.force ?? false);
    await this.converge(spec, this.fullRefresh);
    this.observe();
    await this.writeStatus(false);
    return this.result();
  }

  // ---- observation ----------------------------------------------------------------------------

  private fullRefreshDue(): boolean {
    const due = this.now >= this.memory.nextFullRefreshAt;
    if (due) this.memory.nextFullRefreshAt = this.now + this.options.refreshIntervalMs * (0.9 + 0.2 * this.options.random());
    this.wakeups.add(this.memory.nextFullRefreshAt);
    return due;
  }

  private containers(): CachedContainer[] {
    return this.options.cache.byLabel(labelKeys.dependency, this.name);
  }

  /** Runtime data is corrected from the engines: everything on a full refresh, else what is incomplete. */
  private async inspect(full: boolean): Promise<void> {
    const todo = this.containers().filter((container) => this.reachable(container.node) && (full || needsDetails(container)));
    await inspectAll(this.ops, todo, 8);
  }

  private observe(): void {
    const version = this.spec?.version ?? Number.MAX_SAFE_INTEGER;
    this.view = classify(this.containers(), this.name, version, this.spec?.containers.length ?? 0);
  }

  private reachable(node: string): boolean {
    return this.reconciler.nodes.reachable(node);
  }

  private slotMemory(slot: string): SlotMemory {
    return this.internal.slots[slot] ?? { restarts: 0, failures: 0 };
  }

  private setSlotMemory(slot: string, memory: SlotMemory): void {
    this.internal.slots[slot] = memory;
  }

  private wakeAt(at: number): void {
    this.wakeups.add(at);
  }

  // ---- the steps ------------------------------------------------------------------------------

  private async converge(spec: StoredDependency, full: boolean): Promise<void> {
    for (const container of this.view.unidentified) {
      this.notes.push(`container ${container.name} on ${container.node} is labelled ${labelKeys.dependency}=${this.name} but its version cannot be read; left alone`);
    }
    // Decide: the records and the pods due (records.ts), then the upgrade step (upgrade.ts, which
    // persists its intent before returning the slot to remove).
    const occupied = new Set([...this.view.slots].filter(([, slotView]) => slotContainers(slotView).length > 0).map(([slot]) => slot));
    const bookkeeping = planRecords({
      counts: this.options.references.of(this.name),
      previous: previousRecords(this.statusEntry?.status?.pods ?? []),
      occupied,
      now: this.now,
      full,
      gcMs: this.options.gcMs,
    });
    for (const change of bookkeeping.events) {
      if (change.event === "add") this.log.info({ slot: change.slot, refCount: change.refCount }, "first reference: pod wanted");
      else if (change.event === "adopt") this.log.info({ slot: change.slot, refCount: change.refCount }, "unreferenced pod adopted");
      else if (change.event === "count") this.log.info({ slot: change.slot, from: change.from, to: change.to }, "reference count changed");
    }
    for (const [slot, record] of bookkeeping.records) this.records.set(slot, record);
    for (const at of bookkeeping.wakeAt) this.wakeAt(at);
    const reclaiming = new Set(bookkeeping.due);
    const rolloutRemoval = await this.upgrade(spec, reclaiming);

    // Act: reclaim, the step's removal, and every other slot's plan (slot-plan.ts), at once.
    const work: Promise<void>[] = [];
    for (const slot of bookkeeping.due) work.push(this.reclaim(spec, slot));
    if (rolloutRemoval !== undefined) work.push(this.removeSlot(spec, rolloutRemoval, false));
    const queue = new PQueue({ concurrency: 8 });
    for (const slot of this.records.keys()) {
      if (reclaiming.has(slot) || slot === rolloutRemoval) continue;
      work.push(queue.add(() => this.maintain(spec, slot)));
    }
    await settleAll(work);
    const step = this.internal.rollout;
    if (rolloutRemoval !== undefined && step?.phase === "removing") {
      // D3: the old pod is gone now; the update wait starts.
      const removed = upgradeStepRemoved(step, this.options.now(), this.options.updateWaitMs);
      this.internal.rollout = removed.step;
      this.wakeAt(removed.wakeAt);
    }
  }

  /** D1: the pod's time is up. Removed (stop, then remove, then a sweep of its node), record dropped. */
  private async reclaim(spec: StoredDependency, slot: string): Promise<void> {
    const { node } = parseSlotKey(slot);
    if (!this.reachable(node)) {
      this.notes.push(`pod on ${node} is due for reclaiming, but ${node} is unreachable; waiting for it`);
      this.wakeAt(this.now + unreachableRecheckMs);
      return;
    }
    await this.removeSlot(spec, slot, false);
    this.records.delete(slot);
    delete this.internal.slots[slot];
    this.log.info({ slot }, "unreferenced pod reclaimed");
  }

  /**
   * The upgrade step (D3, upgrade.ts). Returns the slot whose old pod must be removed in this pass,
   * if any; its intent is persisted before this returns.
   */
  private async upgrade(spec: StoredDependency, reclaiming: ReadonlySet<string>): Promise<string | undefined> {
    const plan = planUpgrade({
      step: this.internal.rollout,
      version: spec.version,
      podSize: spec.containers.length,
      slots: [...this.records.keys()],
      reclaiming,
      view: this.view,
      reachable: (node) => this.reachable(node),
      now: this.now,
      updateWaitMs: this.options.updateWaitMs,
    });
    // D3, D4: a set-aside step's pod is stale (or missing) still, and is taken up once its node is back.
    if (plan.setAside !== undefined) this.log.info({ slot: plan.setAside }, "upgrade step set aside: its node is unreachable");
    this.internal.rollout = plan.step;
    if (plan.wakeAt !== undefined) this.wakeAt(plan.wakeAt);
    if (plan.started && plan.remove !== undefined) this.setSlotMemory(plan.remove, { restarts: 0, failures: 0 }); // the new version starts with a clean slate
    if (plan.persistFirst) {
      await this.writeStatus(true); // D3: intent first
      if (plan.started) this.log.info({ slot: plan.remove, toVersion: spec.version }, "upgrading dependency pod");
    }
    return plan.remove;
  }

  /** Carry out slot-plan.ts's plan for the slot's pod: remove extras, then deploy, start or restart it. */
  private async maintain(spec: StoredDependency, slot: string): Promise<void> {
    const slotView = this.view.slots.get(slot);
    const plan = planSlot({
      slot,
      version: spec.version,
      podSize: spec.containers.length,
      reachable: this.reachable(parseSlotKey(slot).node),
      view: slotView,
      rollout: this.internal.rollout,
      memory: this.slotMemory(slot),
      now: this.now,
      updateWaitMs: this.options.updateWaitMs,
      backoff: this.options.backoff,
    });
    if (plan.removeExtras.length > 0) await this.removeContainers(plan.removeExtras, killTimeoutOf(spec), false);
    if (plan.memory) this.setSlotMemory(slot, plan.memory);
    const action = plan.action;
    if (action.kind === "wait") this.wakeAt(action.until);
    else if (action.kind === "deploy") await this.deploy(spec, slot, parseSlotKey(slot), action.indexes);
    else if (action.kind === "start") await this.start(slot, podContainers(slotView!.kept!).map((observed) => observed.container), action);
  }

  private async start(slot: string, pod: CachedContainer[], action: { restart: boolean; started: SlotMemory }): Promise<void> {
    try {
      await startContainers(this.ops, pod);
      this.setSlotMemory(slot, action.started);
      if (action.restart) this.log.info({ slot, restarts: action.started.restarts }, "dependency pod restarted");
    } catch (error) {
      if (this.signal.aborted) throw error;
      this.fail(slot, `cannot start: ${(error as Error).message}`, "start");
    }
  }

  /** Create (or adopt, D2) containers `indexes` of the slot's pod, then start the pod. */
  private async deploy(spec: StoredDependency, key: string, slot: Slot, indexes: number[]): Promise<void> {
    try {
      checkPlacement(spec, slot, await this.reconciler.nodes.get(this.signal));
      // D7: the images first.
      const images = await this.options.images.ensureImages(slot.node, indexes.map((index) => spec.containers[index]!.image), `dependency/${this.name}/${key}`, this.signal);
      if (images.kind === "pulling") {
        this.pulling.set(key, images.message);
        this.wakeAt(this.now + pullRecheckMs);
        return;
      }
      if (images.kind === "failed") {
        this.fail(key, images.message, "deploy");
        return;
      }
      for (const index of indexes) {
        const plan = planContainer(spec, slot, index);
        await createOrAdopt(this.ops, slot.node, plan, this.adoptRule(spec, slot, index, plan.name));
      }
      this.observe();
      const kept = this.view.slots.get(key)?.kept;
      if (kept) await startContainers(this.ops, podContainers(kept).map((observed) => observed.container));
      const memory = this.slotMemory(key);
      this.setSlotMemory(key, { restarts: memory.restarts, failures: 0 });
      this.log.info({ slot: key, version: spec.version }, "dependency pod deployed");
    } catch (error) {
      if (this.signal.aborted) throw error;
      this.fail(key, `cannot deploy on ${slot.node}: ${(error as Error).message}`, "deploy");
    }
  }

  /** D2: a container found under the name of container `index` is ours when it is exactly that container, in the current format. */
  private adoptRule(spec: StoredDependency, slot: Slot, index: number, name: string): AdoptRule {
    return {
      ours: (found) => {
        const identity = identify(found, this.name);
        return identity !== undefined && identity.scope === slot.scope && identity.version === spec.version && identity.index === index && identity.format === currentFormat;
      },
      foreign: (found) => `container name ${name} on ${slot.node} is taken by another container (id ${found.id.slice(0, 12)}); rename or remove it`,
    };
  }

  private fail(slot: string, error: string, kind: "deploy" | "start"): void {
    this.log.warn({ slot, error }, kind === "deploy" ? "dependency pod not deployed" : "dependency pod not started");
    const memory = countFailure(this.slotMemory(slot), error, kind, this.now, this.options.backoff);
    this.setSlotMemory(slot, memory);
    this.wakeAt((kind === "deploy" ? memory.nextDeployAt : memory.nextAttemptAt)!);
  }

  /** Remove every container of the slot, then list its node (not the cache) and remove any leftover. */
  private async removeSlot(spec: StoredDependency | undefined, slot: string, force: boolean): Promise<void> {
    const { node, scope } = parseSlotKey(slot);
    const containers = slotContainers(this.view.slots.get(slot)).map((observed) => observed.container);
    await this.removeContainers(containers, spec ? killTimeoutOf(spec) : defaultKillTimeout, force);
    await this.sweep(node, (identity) => identity?.scope === scope);
  }

  /** Stop (kill timeout; skipped when forced) and remove, with force so nothing is left behind. */
  private removeContainers(containers: CachedContainer[], killTimeout: number, force: boolean): Promise<void> {
    return stopAndRemove(this.ops, containers, killTimeout, force);
  }

  /** List `node` for the dependency's containers (same label as the cache's) and force-remove those `match` selects. */
  private sweep(node: string, match: (identity: ReturnType<typeof identify>) => boolean): Promise<number> {
    return sweepNode(this.ops, node, `${labelKeys.dependency}=${this.name}`, (container) => match(identify(container, this.name)));
  }

  // ---- removal of the whole dependency (RemoveSpec) --------------------------------------------

  private async remove(force: boolean): Promise<Result | void> {
    const spec = this.spec;
    const killTimeout = spec ? killTimeoutOf(spec) : defaultKillTimeout;
    const removable = removableNow(this.containers(), (node) => this.reachable(node));
    if (removable.length > 0) {
      await this.writeStatus(false); // "removing" is visible while the stops take their time
      await this.removeContainers(removable, killTimeout, force);
      this.observe();
    }
    const nodes = await this.reconciler.nodes.get(this.signal);
    // D5: wait for a down node only if it holds cached containers or was never heard from.
    const down = nodesToWaitFor({
      holding: this.containers().map((container) => container.node),
      nodes: nodes.map((node) => node.name),
      reachable: (node) => this.reachable(node),
      heardFrom: (node) => this.reconciler.nodes.heardFrom(node),
    });
    if (down.length > 0) {
      this.notes.push(`waiting for node ${down.join(", ")} to confirm the removal`);
      this.wakeAt(this.now + unreachableRecheckMs);
      await this.writeStatus(false);
      return this.result();
    }
    // Nothing cached on a node that could hold some: the reachable engines' own lists have the last word.
    let leftovers = 0;
    for (const node of nodes) if (this.reachable(node.name)) leftovers += await this.sweep(node.name, () => true);
    if (leftovers > 0) return { requeueAfterMs: asap };
    await this.reconciler.deleteKeys(this.name, this.memory, this.specEntry, this.statusEntry);
    this.reconciler.forget(this.name);
    this.log.info({ force }, "dependency removed");
    return;
  }

  // ---- status ---------------------------------------------------------------------------------

  /** Build the status from what is observed now and write it if it changed. `intent`: before a step (D3). */
  private async writeStatus(intent: boolean): Promise<void> {
    const status = buildStatus({
      spec: this.spec,
      view: this.view,
      records: this.records,
      internal: this.internal,
      notes: this.notes,
      pulling: this.pulling,
      reachable: (node) => this.reachable(node),
      address: (node) => this.reconciler.nodes.address(node),
      now: this.now,
      writtenAt: this.options.now(),
      gcMs: this.options.gcMs,
    });
    this.statusEntry = await this.reconciler.writeStatus(this.name, this.memory, this.statusEntry, status);
    if (intent) this.log.info({ rollout: this.internal.rollout }, "upgrade step recorded");
  }

  private result(): Result {
    return this.wakeups.result(this.options.now());
  }
}
