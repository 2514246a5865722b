// Reconcile(name): desired (the podgroups informer) vs actual (the container cache, corrected by
// inspects) -> the next safe steps -> status. Level-triggered: every decision is taken from what
// is observed now plus the few facts only the controller knows (status.internal: the rollout step,
// restart back-off, a stateful pod's node, drift moves), so a pass is correct whenever it runs,
// however often, and after a crash at any point. See docs/podgroup-controller.md for the
// operations table.
//
// A pass reads as observe -> decide -> act -> write status. It observes (the status and spec from
// the informers, the group's containers from the cache, inspected where needed), decides with the
// pure plan-*.ts functions (plan-drift.ts, plan-rollout.ts over controllers/shared/rollout.ts,
// plan-instances.ts, plan-placement.ts, plan-removal.ts), persists the intent of a step whose
// interruption would be unsafe, acts on the plans, and writes the status. Older-format containers
// are renamed to the current name form right after the observation, before anything is decided
// (planRenames; docs/podgroup-controller.md, "Instance numbers").
//
// Invariants, with where they are kept:
// - R1 never two pods for one instance: containers have deterministic names (a second create on
//   the same node fails with ConflictError and is adopted, never duplicated), and any duplicate
//   that a crash or a lost race left on another node is an extra of classify() and removed
//   (plan-instances.ts).
// - R2 a step whose interruption would be unsafe is persisted BEFORE it is taken: the rollout
//   records {instance, phase: "removing"} before removing the old pod and {phase: "removed", at}
//   after, so a restart neither skips the update wait nor replaces two instances at once
//   (plan-rollout.ts, controllers/shared/rollout.ts; runRollout() persists).
// - R3 a spec update replaces one instance at a time and starts on the next only when every other
//   instance runs (at most one unavailable because of the update), or when the next one is down
//   anyway (plan-rollout.ts).
// - R4 read-your-own-writes: every create/start/remove/rename/inspect is recorded in the cache at
//   once, and a pass waits for the status informer to reflect the controller's last status write
//   before it reads the status again.
// - R5 a container whose node is unreachable is unknown, not missing: it is never counted as
//   removed, and never replaced elsewhere on the controller's own initiative. Only a drift task
//   (drift.ts) moves it: the instance is deployed elsewhere with a higher drift count, which
//   classify() keeps, so the unreachable copy becomes an extra, removed once its node answers.
// - R6 a drift move is recorded in status.internal (instances[i].move) BEFORE the pod on `from`
//   is removed, and placement of a moving instance always excludes `from`, so a restart at any
//   point finishes the move elsewhere: never back onto `from`, never two pods (plan-drift.ts,
//   plan-placement.ts; runDrift() persists).
// - R7 a container named like ours but without our labels is not ours: it is reported, not touched.
// - R8 status is written only when it changed (compare-and-swap on its modRevision), so refreshes
//   do not write.
// - R9 every restart or redeploy after a failure waits out the instance's back-off
//   (plan-instances.ts, plan-drift.ts).
// - R10 a created container whose spec lists secretFiles is not started before Secret-sync's marker
//   says they are installed (secret-marker.ts, plan-instances.ts secretsWait()); a restart of an
//   exited one does not wait, since the files are already in it and Secret-sync keeps them current.
// - R11 a pod is created on a node only once its images are there: a missing one is pulled first
//   (controllers/shared/image-pull.ts, in the background; the pod is pending, its lastError the pull's
//   progress, until it is done; a failed pull is a failed deploy). A drift move pulls on the new
//   node BEFORE it removes the pod on `from`.
// - R12 a kept previous container is never an instance: at most one per instance and container
//   index, stopped, removed with its instance (observe.ts, keepAsPrevious(),
//   controllers/shared/previous.ts).
import PQueue from "p-queue";
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import { EngineUnavailableError, NotFoundError } from "../../adapters/cluster/index.ts";
import type { PodGroupEvents } from "./events.ts";
import { isStateful, type PodGroupStatus } from "../../api/resources/podgroup.ts";
import type { DriftTask } from "../../api/resources/task.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { Logger } from "../../runtime/log.ts";
import type { ReconcileContext, Result } from "../../runtime/result.ts";
import { killTimeoutOf, planContainer } from "./container-spec.ts";
import type { DependencyReservations } from "./dependency-reservations.ts";
import { driftTasks } from "./drift.ts";
import { identify, labelKeys, numberedFromZero } from "./naming.ts";
import { previousContainerName, previousSlot } from "../shared/previous.ts";
import { reservationsOf, type NodeView } from "./nodes.ts";
import { classify, instanceContainers, podContainers, type GroupView, type InstanceView, type PodCandidate } from "./observe.ts";
import type { PassesInFlight } from "./passes.ts";
import { dueMoves, planDriftStarts, planMoves } from "./plan-drift.ts";
import { planInstances, planRenames, recordOf, secretsRecheckMs, secretsWait, statefulNodes, unidentifiedNotes, type InstancesPlan, type Rename } from "./plan-instances.ts";
import { invalidFilters, planPlacement } from "./plan-placement.ts";
import { planRemovalBatch, planRemovalFinish, removalNodeRecheckMs } from "./plan-removal.ts";
import { planPodGroupRollout, rolloutStepRemoved } from "./plan-rollout.ts";
import { inspectAll, startContainers, stopAndRemove, sweepNode, type ContainerOpsContext } from "../shared/container-ops.ts";
import type { PodReconcilerBase } from "../shared/controller-wiring.ts";
import { createOrAdopt } from "../shared/create-or-adopt.ts";
import { needsDetails } from "../shared/containers.ts";
import { deleteUnchanged } from "../shared/delete-unchanged.ts";
import { ForeignContainerError } from "../shared/errors.ts";
import { unreadableSpecStatus } from "../shared/unreadable-spec.ts";
import { settleAll } from "../shared/settle.ts";
import { pullRecheckMs } from "../shared/image-pull.ts";
import { countFailure } from "../shared/restart.ts";
import type { SecretMarkerEntry } from "./secret-marker.ts";
import { readOwnStatus, writeStatusIfChanged } from "../shared/status-records.ts";
import { StatusWritesInFlight } from "../shared/status-writes-in-flight.ts";
import { asap, Wakeups } from "../shared/wakeups.ts";
import { buildStatus, unseenPods } from "./status.ts";
import {
  decodeStatus,
  readInternal,
  type DriftMove,
  type InstanceRecord,
  type Internal,
  type Layout,
  type SpecEntry,
  type StatusEntry,
  type StoredPodGroup,
  type TaskEntry,
} from "./stored.ts";

export interface ReconcilerOptions extends PodReconcilerBase {
  nodes: NodeView;
  specs: Informer<SpecEntry>;
  statuses: Informer<StatusEntry>;
  tasks: Informer<TaskEntry>;
  /** Memory and CPU held by dependency pods, for placement. */
  dependencyReservations: Pick<DependencyReservations, "list">;
  /** Passes in flight, for the drift-task reconciler (passes.ts). */
  passes: PassesInFlight;
  /** Secret-sync's marker of a container, by container id (from the markers informer). */
  secretMarker: (containerId: string) => SecretMarkerEntry | undefined;
  layout: Layout;
  /** Creates/starts in flight per pass (the cluster bounds writes per node on top). */
  deployConcurrency: number;
  /** Instances removed at once when a whole group is deleted. */
  removeConcurrency: number;
  /** Instances deployed per pass at most; the rest follow in the next pass at once. */
  maxDeploysPerPass: number;
  /** Events read from each status write (events.ts; docs/events.md). */
  events?: PodGroupEvents;
}

/** In-memory facts per group; losing them costs at most one extra refresh. */
interface GroupMemory {
  /** Revisions of our last writes per prefix, for read-your-own-writes (R4). */
  statusRevision: number;
  specRevision: number;
  nextFullRefreshAt: number;
  refreshRequestedAt: string | undefined;
}

export class PodGroupReconciler {
  private readonly memory = new Map<string, GroupMemory>();
  /** Finished passes per group (passesFinished()). */
  private readonly finished = new Map<string, number>();

  constructor(readonly options: ReconcilerOptions) {}

  /** Status writes in flight, for the status source (their echo may come before their revision). */
  readonly statusWrites = new StatusWritesInFlight();

  /** Revision of our last status write for `name` (the status source skips its own echo). */
  lastStatusRevision(name: string): number | undefined {
    return this.memory.get(name)?.statusRevision;
  }

  readonly reconcile = async (name: string, ctx: ReconcileContext): Promise<Result | void> => {
    const mem = this.memory.get(name) ?? { statusRevision: 0, specRevision: 0, nextFullRefreshAt: 0, refreshRequestedAt: undefined };
    this.memory.set(name, mem);
    // Registered before the task list is read (passes.ts): the drift-task reconciler waits for it.
    const end = this.options.passes.begin(this.options.tasks.cacheRevision());
    try {
      return await this.pass(name, mem, ctx);
    } finally {
      end();
      // Counted for groups that still exist (a removed group's count goes with its memory).
      if (this.memory.has(name)) this.finished.set(name, (this.finished.get(name) ?? 0) + 1);
      else this.finished.delete(name);
    }
  };

  /**
   * Passes of group `name` finished since this reconciler started (whatever their outcome): an
   * observable for tests that must see the controller look at a group again ("nothing changed").
   */
  passesFinished(name: string): number {
    return this.finished.get(name) ?? 0;
  }

  private async pass(name: string, mem: GroupMemory, ctx: ReconcileContext): Promise<Result | void> {
    // R4: the caches must reflect our own last writes before we read them.
    const status = await this.readStatus(name, mem, ctx.signal);
    const specEntry = await this.readSpec(name, mem, ctx.signal);
    const allTasks = this.options.tasks.list();
    // Refresh tasks naming the group are its own (deleted by its pass); drift tasks span groups and
    // are completed by the drift-task reconciler (drift-tasks.ts).
    const tasks = allTasks.filter((entry) => entry.task?.kind === "refresh" && entry.task.podGroup === name);
    if (!specEntry && !status) {
      // Not a group of ours (a container of another orchestrator's group), or fully removed.
      this.memory.delete(name);
      await this.deleteTasks(tasks);
      return;
    }
    if (specEntry && !specEntry.spec) {
      // A spec we cannot read must not look deleted: touch nothing, say why.
      const empty: PodGroupStatus = { pods: [], observedVersion: 0, state: "failed", lastError: "", updatedAt: "" };
      await this.writeStatus(name, mem, status, unreadableSpecStatus(status?.status, empty, "failed", specEntry.invalid, this.options.now()));
      return;
    }
    const pass = new Pass(this, name, specEntry?.spec, specEntry, status, mem, tasks, driftTasks(allTasks), ctx);
    return pass.run();
  }

  // ---- store access -------------------------------------------------------------------------

  private async readStatus(name: string, mem: GroupMemory, signal: AbortSignal): Promise<StatusEntry | undefined> {
    const { statuses, layout, store } = this.options;
    return readOwnStatus({ statuses, store, key: layout.statusOf(name), ownRevision: mem.statusRevision, decode: decodeStatus, signal });
  }

  private async readSpec(name: string, mem: GroupMemory, signal: AbortSignal): Promise<SpecEntry | undefined> {
    const { specs, layout } = this.options;
    if (mem.specRevision > specs.cacheRevision()) await specs.waitForRevision(mem.specRevision, signal, 5_000);
    return specs.get(layout.podGroup(name));
  }

  /** R8: compare-and-swap, only when changed. Returns the entry now stored. */
  async writeStatus(name: string, mem: GroupMemory, previous: StatusEntry | undefined, next: PodGroupStatus): Promise<StatusEntry> {
    const own = { writes: this.statusWrites, recorded: (revision: number) => (mem.statusRevision = revision) };
    const { record, written } = await writeStatusIfChanged(this.options.store, this.options.layout.statusOf(name), previous, next, own);
    if (written) this.options.events?.statusWritten(name, this.options.specs.get(this.options.layout.podGroup(name))?.spec, previous?.status, next);
    return record;
  }

  async deleteTasks(tasks: TaskEntry[]): Promise<void> {
    for (const entry of tasks) {
      await this.options.store.delete(entry.key, { expect: [{ key: entry.key, target: "modRevision", equals: entry.modRevision }] });
    }
  }

  /** Delete spec, history and status (and the group's tasks) in one transaction, each only if unchanged. */
  async deleteKeys(name: string, mem: GroupMemory, spec: SpecEntry | undefined, status: StatusEntry | undefined, tasks: TaskEntry[]): Promise<void> {
    const { layout, store } = this.options;
    const response = await deleteUnchanged(
      store,
      [
        status && { key: layout.statusOf(name), modRevision: status.modRevision },
        spec && { key: layout.podGroup(name), modRevision: spec.modRevision, alsoDelete: [{ type: "deletePrefix", prefix: layout.historyOf(name) }] },
      ],
      tasks.map((entry) => ({ type: "delete", key: entry.key })),
      `${name} changed while its removal finished; retrying`,
    );
    if (!response) return;
    mem.statusRevision = response.revision;
    mem.specRevision = spec ? response.revision : mem.specRevision;
  }

  forget(name: string): void {
    this.memory.delete(name);
  }
}

/** One reconcile of one group: observe -> decide -> act -> write status. */
class Pass {
  private readonly options: ReconcilerOptions;
  private readonly log: Logger;
  private readonly signal: AbortSignal;
  /** Engine calls on the group's containers, with the cache kept in step. */
  private readonly ops: ContainerOpsContext;
  private readonly now: number;
  private internal: Internal;
  private view!: GroupView;
  private readonly wakeups = new Wakeups();
  private readonly notes: string[] = [];
  private halted: string | undefined;
  /** Instances whose created pod waits for its secret files (R10), with the reason shown as lastError. */
  private readonly waitingForSecrets = new Map<number, string>();
  /** Instances whose pod waits for an image pull (R11), with its progress shown as lastError. */
  private readonly pulling = new Map<number, string>();
  private statusEntry: StatusEntry | undefined;

  constructor(
    private readonly reconciler: PodGroupReconciler,
    private readonly name: string,
    private readonly spec: StoredPodGroup | undefined,
    private readonly specEntry: SpecEntry | undefined,
    status: StatusEntry | undefined,
    private readonly mem: GroupMemory,
    private readonly tasks: TaskEntry[],
    private readonly drifts: DriftTask[],
    ctx: ReconcileContext,
  ) {
    this.options = reconciler.options;
    this.log = ctx.log;
    this.signal = ctx.signal;
    this.ops = { cache: this.options.cache, cluster: this.options.cluster, signal: ctx.signal, log: ctx.log };
    this.now = this.options.now();
    this.statusEntry = status;
    this.internal = readInternal(status?.status);
  }

  async run(): Promise<Result | void> {
    const spec = this.spec;
    // Observe.
    await this.inspect(this.fullRefreshDue());
    this.observe();
    if (!spec || spec.deleting) return this.runRemoval();
    // Renames first, to completion: every other action is decided from the names they leave, and
    // none runs beside them (a rename racing the rollout's keepAsPrevious() of the same container
    // would undo it, and the sweep would remove the kept previous container).
    await this.renameLegacy(planRenames(this.view, (node) => this.reachable(node)));
    this.observe();
    // Decide and act. The drift moves and the rollout step persist their intent before anything
    // is removed (R6, R2); everything else is decided from the same view and done in parallel.
    this.notes.push(...unidentifiedNotes(this.name, this.view));
    this.setRecords(statefulNodes(spec, this.view, this.internal));
    const moving = await this.runDrift(spec);
    const rolloutRemoval = await this.runRollout(spec, moving);
    const plan = planInstances({
      spec,
      view: this.view,
      internal: this.internal,
      rolloutRemoval,
      moving,
      lastPods: this.lastPods(),
      secretMarker: this.options.secretMarker,
      reachable: (node) => this.reachable(node),
      now: this.now,
      updateWaitMs: this.options.updateWaitMs,
      backoff: this.options.backoff,
      maxDeploysPerPass: this.options.maxDeploysPerPass,
    });
    this.setRecords(plan.records);
    for (const [instance, why] of plan.waitingForSecrets) this.waitingForSecrets.set(instance, why);
    this.wakeups.add(...plan.wakeAt);
    await this.act(spec, plan, moving, rolloutRemoval);
    // Write status.
    this.observe();
    await this.writeStatus(false);
    await this.reconciler.deleteTasks(this.tasks);
    return this.result();
  }

  // ---- observation ----------------------------------------------------------------------------

  private fullRefreshDue(): boolean {
    const { mem, spec } = this;
    const requested = spec?.refreshRequestedAt;
    const due = this.now >= mem.nextFullRefreshAt || this.tasks.length > 0 || requested !== mem.refreshRequestedAt;
    if (due) {
      const jitter = 0.9 + 0.2 * this.options.random();
      mem.nextFullRefreshAt = this.now + this.options.refreshIntervalMs * jitter;
      mem.refreshRequestedAt = requested;
    }
    this.wakeups.add(mem.nextFullRefreshAt);
    return due;
  }

  private containers(): CachedContainer[] {
    return this.options.cache.byLabel(labelKeys.podGroup, this.name);
  }

  /**
   * Runtime data is corrected from the engines: on a full refresh every container of the group is
   * inspected; otherwise only those whose cached data is incomplete (seen in a relist only).
   */
  private async inspect(full: boolean): Promise<void> {
    const todo = this.containers().filter((container) => this.reachable(container.node) && (full || needsDetails(container)));
    await inspectAll(this.ops, todo, this.options.deployConcurrency);
  }

  private observe(): void {
    const spec = this.spec;
    this.view = classify(this.containers(), {
      group: this.name,
      version: spec?.pod.version ?? Number.MAX_SAFE_INTEGER,
      podSize: spec?.pod.containers.length ?? 0,
      reachable: (node) => this.reachable(node),
      restartedAt: spec?.restartedAt ?? "",
    });
  }

  private lastPods(): PodGroupStatus["pods"] {
    return this.statusEntry?.status?.pods ?? [];
  }

  private reachable(node: string): boolean {
    return this.options.nodes.reachable(node);
  }

  private record(instance: number): InstanceRecord {
    return recordOf(this.internal, instance);
  }

  private setRecord(instance: number, record: InstanceRecord): void {
    this.internal.instances[String(instance)] = record;
  }

  private setRecords(records: ReadonlyMap<number, InstanceRecord>): void {
    for (const [instance, record] of records) this.setRecord(instance, record);
  }

  private wakeAt(at: number): void {
    this.wakeups.add(at);
  }

  // ---- the steps whose intent is persisted first ----------------------------------------------

  /**
   * The drift step (plan-drift.ts, R6). Records the moves that start now and writes them (intent
   * first), then returns every move in progress: those just recorded and those recorded by an
   * earlier pass (before a restart, or retried after a failure).
   */
  private async runDrift(spec: StoredPodGroup): Promise<Map<number, DriftMove>> {
    const unseen = unseenPods(this.view, this.lastPods(), (node) => this.reachable(node));
    const starts = planDriftStarts(spec, this.view, this.internal, this.drifts, unseen);
    for (const [instance, move] of starts) this.setRecord(instance, { ...this.record(instance), move });
    if (starts.size > 0) {
      await this.writeStatus(false); // R6: the moves are recorded before anything is removed
      this.log.info({ instances: [...starts.keys()], from: [...new Set([...starts.values()].map((move) => move.from))] }, "drift: moves recorded");
    }
    const moves = planMoves(spec, this.view, this.internal, this.drifts);
    this.setRecords(moves.records);
    for (const { instance, move } of moves.cancelled) {
      this.log.info({ instance, task: move.task, from: move.from }, "drift: move cancelled (its task was deleted)");
    }
    return moves.moving;
  }

  /**
   * The spec-update step (plan-rollout.ts, R2, R3). Returns the instance whose old pod must be
   * removed in this pass, if any, once its intent is persisted.
   */
  private async runRollout(spec: StoredPodGroup, moving: ReadonlyMap<number, DriftMove>): Promise<number | undefined> {
    const plan = planPodGroupRollout({
      spec,
      view: this.view,
      step: this.internal.rollout,
      moving,
      reachable: (node) => this.reachable(node),
      now: this.now,
      updateWaitMs: this.options.updateWaitMs,
    });
    this.internal.rollout = plan.step;
    if (plan.wakeAt !== undefined) this.wakeAt(plan.wakeAt);
    if (plan.halted !== undefined) this.halted = plan.halted;
    if (plan.started && plan.remove !== undefined) {
      // The new version starts with a clean slate (restart count and back-off are per version).
      const record = this.record(plan.remove);
      this.setRecord(plan.remove, {
        restarts: 0,
        failures: 0,
        ...(record.node !== undefined && { node: record.node }),
        ...(record.drift !== undefined && { drift: record.drift }),
      });
    }
    if (plan.persistFirst) await this.writeStatus(true); // R2: intent first
    return plan.remove;
  }

  // ---- acting on the plans --------------------------------------------------------------------

  private async act(spec: StoredPodGroup, plan: InstancesPlan, moving: ReadonlyMap<number, DriftMove>, rolloutRemoval: number | undefined): Promise<void> {
    const killTimeout = killTimeoutOf(spec.pod);
    const work: Promise<void>[] = [];
    if (plan.extras.length > 0) work.push(stopAndRemove(this.ops, plan.extras, killTimeout));
    if (plan.surplus) work.push(this.removeInstance(plan.surplus, killTimeout));
    if (rolloutRemoval !== undefined) {
      const instanceView = this.view.instances.get(rolloutRemoval);
      if (instanceView) work.push(this.removeInstance(instanceView, killTimeout, true));
    }
    if (plan.orphans.length > 0) work.push(stopAndRemove(this.ops, plan.orphans, killTimeout, true));
    if (moving.size > 0) work.push(this.moveAll(spec, moving));
    work.push(this.deployAndStart(spec, plan));
    await settleAll(work);
    const step = this.internal.rollout;
    if (rolloutRemoval !== undefined && step?.phase === "removing") {
      // R2: the old pod is gone now; the update wait starts.
      const removed = rolloutStepRemoved(step, this.options.now(), this.options.updateWaitMs);
      this.internal.rollout = removed.step;
      this.wakeAt(removed.wakeAt);
    }
  }

  /** Carry out the moves in parallel (bounded): remove the pod on `from` (when reachable), deploy elsewhere. */
  private async moveAll(spec: StoredPodGroup, moving: ReadonlyMap<number, DriftMove>): Promise<void> {
    const { due, wakeAt } = dueMoves(moving, this.internal, this.now);
    this.wakeups.add(...wakeAt); // R9
    if (due.length === 0) return;
    // Placed before anything is removed: an instance that fits nowhere keeps running where it is.
    const placed = await this.place(spec, due, moving);
    const queue = new PQueue({ concurrency: this.options.deployConcurrency });
    await settleAll([...placed].map(([instance, node]) => queue.add(() => this.move(spec, instance, moving.get(instance)!, node))));
  }

  private async move(spec: StoredPodGroup, instance: number, move: DriftMove, node: string): Promise<void> {
    const instanceView = this.view.instances.get(instance);
    // Every copy of the instance is older than the move (planMoves() checked): all go. One on an
    // unreachable node stays until it answers (R5), an extra by then.
    const old = instanceView ? instanceContainers(instanceView).map((observed) => observed.c).filter((container) => this.reachable(container.node)) : [];
    const all = Array.from({ length: spec.pod.containers.length }, (_, k) => k);
    try {
      // R11: the images are pulled on the new node while the old pod still runs.
      if (!(await this.imagesReady(spec, instance, node, all))) return;
    } catch (error) {
      if (this.signal.aborted) throw error;
      this.fail(instance, `drift: ${deployError(error, node)}`, "deploy");
      return;
    }
    try {
      await stopAndRemove(this.ops, old, killTimeoutOf(spec.pod));
    } catch (error) {
      if (this.signal.aborted) throw error;
      this.fail(instance, `drift: cannot remove the pod on ${move.from}: ${(error as Error).message}`, "deploy");
      return;
    }
    // The move's drift count, or the next one whose names no other container of the group holds
    // on `node` (freeDrift: one of the 0-based numbering named from the instance below).
    await this.deployPod(spec, instance, node, all, this.freeDrift(spec, instance, node, move.drift));
    const kept = this.view.instances.get(instance)?.kept;
    if (kept && kept.drift >= move.drift) {
      const { move: _done, ...rest } = this.record(instance);
      this.setRecord(instance, { ...rest, drift: kept.drift, ...(isStateful(spec.pod) && { node }) });
      this.log.info({ instance, from: move.from, to: node, drift: kept.drift }, "drift: instance moved");
    }
  }

  /** Start and restart pods, complete partial pods, place and deploy missing instances (plan-instances.ts). */
  private async deployAndStart(spec: StoredPodGroup, plan: InstancesPlan): Promise<void> {
    const podSize = spec.pod.containers.length;
    const queue = new PQueue({ concurrency: this.options.deployConcurrency });
    const jobs: Promise<void>[] = [];
    for (const start of plan.starts) jobs.push(queue.add(() => this.startPod(start.instance, start.pod, start.restart)));
    // A pod completed in place keeps the restart label it was made under: were it made under the
    // current one, the instance would split into two pods and the older be removed at once, a
    // restart outside the rollout's one-at-a-time step (docs/podgroup-controller.md, "Rolling restart").
    for (const partial of plan.complete) {
      const madeUnder = { ...spec, restartedAt: partial.pod.restartedAt === "" ? undefined : partial.pod.restartedAt };
      jobs.push(queue.add(() => this.deployPod(madeUnder, partial.instance, partial.pod.node, partial.indexes, partial.pod.drift)));
    }
    if (plan.deploy.length > 0) {
      const placed = await this.place(spec, plan.deploy);
      for (const [instance, node] of placed) {
        const all = Array.from({ length: podSize }, (_, k) => k);
        jobs.push(queue.add(() => this.deployPod(spec, instance, node, all, this.freeDrift(spec, instance, node, this.record(instance).drift ?? 0))));
      }
    }
    await settleAll(jobs);
  }

  /**
   * The drift count from `drift` up whose container names for `instance` no other container of the
   * group holds on `node`. Only a container of the 0-based numbering whose instance is read from
   * its name (naming.ts) holds another instance's name (the one below its own). Waiting for the
   * rollout to replace it would not end when `instance` has no pod: R3 holds that step back until
   * every other instance runs. A fresh pod under a higher drift count is a pod like any other.
   */
  private freeDrift(spec: StoredPodGroup, instance: number, node: string, drift: number): number {
    const held = new Set(
      this.containers()
        .filter((container) => container.node === node && identify(container, this.name)?.instance !== instance)
        .map((container) => container.name),
    );
    const indexes = Array.from({ length: spec.pod.containers.length }, (_, k) => k);
    let free = drift;
    while (indexes.some((k) => held.has(planContainer(spec, instance, k, free).name))) free++;
    return free;
  }

  /** Read the nodes and what holds their memory and CPU, then place (plan-placement.ts). */
  private async place(spec: StoredPodGroup, instances: number[], moves?: ReadonlyMap<number, DriftMove>): Promise<Map<number, string>> {
    const invalid = invalidFilters(spec);
    if (invalid !== undefined) {
      for (const instance of instances) this.fail(instance, invalid, "deploy");
      return new Map();
    }
    const nodes = await this.options.nodes.get(this.signal);
    // Dependency pods hold memory and CPU on the nodes too (the API's feasibility counts them).
    const reservations = [...reservationsOf(this.options.cache.list()), ...(await this.options.dependencyReservations.list(this.signal))];
    const plan = planPlacement({
      spec,
      instances,
      ...(moves && { moves }),
      view: this.view,
      internal: this.internal,
      drifts: this.drifts,
      nodes,
      reservations,
      reachable: (node) => this.reachable(node),
    });
    for (const [instance, why] of plan.waiting) this.setRecord(instance, { ...this.record(instance), lastError: why });
    for (const [instance, why] of plan.failed) this.fail(instance, why, "deploy");
    return plan.placed;
  }

  /** Create (or adopt, R1) containers `indexes` of instance `instance` on `node`, then start the pod. */
  private async deployPod(spec: StoredPodGroup, instance: number, node: string, indexes: number[], drift: number): Promise<void> {
    let stage: "deploy" | "start" = "deploy";
    try {
      if (!(await this.imagesReady(spec, instance, node, indexes))) return; // R11
      for (const k of indexes) {
        const plan = planContainer(spec, instance, k, drift);
        // A name taken on this node is ours from an earlier attempt (adopted, R1), or not ours (R7).
        await createOrAdopt(this.ops, node, plan, {
          ours: (found) => {
            const identity = identify(found, this.name);
            return identity !== undefined && identity.instance === instance && identity.version === spec.pod.version && identity.index === k;
          },
          foreign: (found) => this.nameTakenMessage(plan.name, node, found),
        });
      }
      this.observe();
      const kept = this.view.instances.get(instance)?.kept;
      stage = "start";
      if (kept && !this.holdForSecrets(spec, kept)) await startContainers(this.ops, podContainers(kept).map((observed) => observed.c));
      const record = this.record(instance);
      this.setRecord(instance, {
        restarts: record.restarts,
        failures: 0,
        ...(record.node !== undefined && { node: record.node }),
        ...(record.move !== undefined && { move: record.move }),
        drift,
      });
    } catch (error) {
      if (this.signal.aborted) throw error;
      this.fail(instance, deployError(error, node), stage);
    }
  }

  /**
   * Why a create met a container of that name that it may not adopt. One of this group's own
   * containers is not foreign (R7 is about containers Capstan did not create): a container of the
   * 0-based numbering whose instance is read from its name (naming.ts) holds the name of the
   * instance one below its own until the rollout replaces it (highest first, plan-rollout.ts);
   * the deploy waits and retries under its back-off.
   */
  private nameTakenMessage(name: string, node: string, found: { id: string; name: string; labels: Readonly<Record<string, string>> }): string {
    const id = found.id.slice(0, 12);
    if (found.labels[labelKeys.podGroup] !== this.name) {
      return `container name ${name} on ${node} is taken by a container Capstan did not create (id ${id}); rename or remove it`;
    }
    const holder = identify(found, this.name);
    const which = holder ? `instance ${holder.instance}` : "another container";
    const why = numberedFromZero(found.labels) ? ", created under the 0-based numbering" : "";
    return `container name ${name} on ${node} is held by ${which} of this group (id ${id}${why}); waiting for it to be replaced or renamed`;
  }

  /**
   * R11: true when the images of containers `indexes` are on `node`. Otherwise the missing ones
   * are being pulled (the instance is reported pending with the pull's progress, and looked at
   * again shortly), or their pull failed (a failed deploy: back-off, then a fresh pull).
   */
  private async imagesReady(spec: StoredPodGroup, instance: number, node: string, indexes: number[]): Promise<boolean> {
    const images = indexes.map((k) => spec.pod.containers[k]!.image);
    const state = await this.options.images.ensureImages(node, images, `podgroup/${this.name}/${instance}`, this.signal);
    if (state.kind === "ready") return true;
    if (state.kind === "pulling") {
      this.pulling.set(instance, state.message);
      this.wakeAt(this.now + pullRecheckMs);
    } else {
      this.fail(instance, state.message, "deploy");
    }
    return false;
  }

  /** R10: true (and the pod is reported as waiting) when the pod may not start yet for its secret files (secretsWait()). */
  private holdForSecrets(spec: StoredPodGroup, pod: PodCandidate): boolean {
    const why = secretsWait(spec, this.name, pod, this.options.secretMarker);
    if (why === undefined) return false;
    this.waitingForSecrets.set(pod.instance, why);
    this.wakeAt(this.now + secretsRecheckMs);
    return true;
  }

  private async startPod(instance: number, pod: PodCandidate, restart: boolean): Promise<void> {
    try {
      await startContainers(this.ops, podContainers(pod).map((observed) => observed.c));
      const record = this.record(instance);
      this.setRecord(instance, { ...record, restarts: record.restarts + (restart ? 1 : 0) });
      if (restart) this.log.info({ instance, restarts: record.restarts + 1 }, "restarted per restart policy");
    } catch (error) {
      if (this.signal.aborted) throw error;
      this.fail(instance, `cannot start: ${(error as Error).message}`, "start");
    }
  }

  private fail(instance: number, error: string, kind: "deploy" | "start"): void {
    this.log.warn({ instance, error }, kind === "deploy" ? "instance not deployed" : "instance not started");
    const record = countFailure(this.record(instance), error, kind, this.now, this.options.backoff);
    this.setRecord(instance, record);
    const at = kind === "deploy" ? record.nextDeployAt : record.nextAttemptAt;
    if (at !== undefined) this.wakeAt(at);
  }

  /** Older-format containers kept for their instance are renamed to the current name form in place, one at a time, in order. */
  private async renameLegacy(renames: readonly Rename[]): Promise<void> {
    for (const { instance, container, to } of renames) {
      try {
        await this.options.cluster.rename(container, to, { signal: this.signal });
        this.options.cache.recordRenamed(container.node, container.id, to);
        this.log.info({ from: container.name, to }, "older-format container adopted in place");
      } catch (error) {
        if (this.signal.aborted) throw error;
        this.setRecord(instance, { ...this.record(instance), lastError: `cannot rename older-format container ${container.name} to ${to}: ${(error as Error).message}` });
      }
    }
  }

  /**
   * Remove one instance: stop (kill timeout) and remove its containers, then list the nodes (not
   * the cache) and force-remove any leftover of that instance. `keepPrevious` (a rollout step):
   * the kept pod is stopped and kept as the instance's previous containers instead, replacing
   * those kept before; otherwise the previous containers go with the instance.
   */
  private async removeInstance(instanceView: InstanceView, killTimeout: number, keepPrevious = false): Promise<void> {
    const instance = instanceView.instance;
    const all = instanceContainers(instanceView).map((observed) => observed.c).filter((container) => this.reachable(container.node));
    if (keepPrevious && instanceView.kept && this.reachable(instanceView.kept.node)) {
      const kept = podContainers(instanceView.kept).map((observed) => observed.c);
      await stopAndRemove(this.ops, all.filter((container) => !kept.includes(container)), killTimeout);
      await this.keepAsPrevious(instance, kept, killTimeout);
    } else {
      const previous = (this.view.previous.get(instance) ?? []).map((previousContainer) => previousContainer.c).filter((container) => this.reachable(container.node));
      await stopAndRemove(this.ops, [...all, ...previous], killTimeout);
    }
    await this.sweep(
      (container) => identify(container, this.name)?.instance === instance || (!keepPrevious && previousSlot(container.name, this.name)?.instance === instance),
    );
  }

  /**
   * The previous container (docs/podgroup-controller.md, "The previous container"; R12): the
   * replaced pod's containers are stopped and renamed to the instance's previous names, after the
   * ones kept before were removed (at most one per instance and container index). A container
   * that cannot be kept so is removed, as before.
   */
  private async keepAsPrevious(instance: number, pod: CachedContainer[], killTimeout: number): Promise<void> {
    const older = (this.view.previous.get(instance) ?? []).map((previousContainer) => previousContainer.c);
    await stopAndRemove(this.ops, older.filter((container) => this.reachable(container.node)), killTimeout, true);
    await settleAll(
      pod.map(async (container) => {
        const identity = identify(container, this.name);
        const index = identity?.index ?? 0;
        // A container of the 0-based numbering with no instance label is read back from its name,
        // plus one (observe.ts, previousFromZero): its previous name holds its 0-based number.
        const name = previousContainerName(this.name, identity?.instanceFromName ? instance - 1 : instance, index);
        try {
          await this.options.cluster.stop(container, { timeoutSeconds: killTimeout, signal: this.signal });
          await this.options.cluster.rename(container, name, { signal: this.signal });
          this.options.cache.recordRenamed(container.node, container.id, name);
          this.options.cache.recordDetails(await this.options.cluster.inspect(container, { signal: this.signal }), undefined);
          this.log.info({ container: container.name, node: container.node, as: name }, "replaced container kept as the previous one");
        } catch (error) {
          if (this.signal.aborted) throw error;
          if (error instanceof NotFoundError && error.resource === "container") {
            this.options.cache.recordRemoved(container.node, container.id);
            return;
          }
          this.log.warn({ err: error, container: container.name }, "cannot keep the replaced container; removing it");
          await stopAndRemove(this.ops, [container], killTimeout, true);
        }
      }),
    );
  }

  /** Relist every reachable node for the group's containers and force-remove those `match` selects. */
  private async sweep(match: (container: { name: string; labels: Readonly<Record<string, string>> }) => boolean): Promise<number> {
    let removed = 0;
    const nodes = await this.options.nodes.get(this.signal);
    await settleAll(
      nodes
        .filter((node) => this.reachable(node.name))
        .map(async (node) => {
          removed += await sweepNode(this.ops, node.name, `${labelKeys.podGroup}=${this.name}`, match);
        }),
    );
    return removed;
  }

  // ---- removal of the whole group (plan-removal.ts) --------------------------------------------

  private async runRemoval(): Promise<Result | void> {
    const killTimeout = this.spec ? killTimeoutOf(this.spec.pod) : 10;
    const batch = planRemovalBatch(this.view, (node) => this.reachable(node), this.options.removeConcurrency);
    // Kept previous containers are stopped already: removed at once, whatever the batch.
    if (batch.previous.length > 0) await stopAndRemove(this.ops, batch.previous, killTimeout, true);
    if (batch.instances.length > 0) {
      await this.writeStatus(false); // "removing" is visible while the stops take their time
      await settleAll(batch.instances.map((containers) => stopAndRemove(this.ops, containers, killTimeout)));
      this.observe();
    }
    const left = this.containers();
    const nodes = await this.options.nodes.get(this.signal);
    const next = planRemovalFinish({
      left,
      view: this.view,
      lastPods: this.lastPods(),
      nodes: nodes.map((node) => node.name),
      reachable: (node) => this.reachable(node),
      listedSinceStart: (node) => this.options.cache.listedSinceStart(node),
    });
    if (next.kind === "wait") {
      if (next.waitingFor.length > 0) {
        this.notes.push(`waiting for node ${next.waitingFor.join(", ")} to confirm the removal`);
        this.wakeAt(this.now + removalNodeRecheckMs);
      } else {
        this.wakeAt(this.now + asap);
      }
      await this.writeStatus(false);
      await this.reconciler.deleteTasks(this.tasks);
      return this.result();
    }
    // Every node reachable and nothing cached: the relist from the engines has the last word.
    if ((await this.sweep(() => true)) > 0) {
      await this.writeStatus(false);
      return { requeueAfterMs: asap };
    }
    await this.reconciler.deleteKeys(this.name, this.mem, this.specEntry, this.statusEntry, this.tasks);
    this.log.info("podgroup removed");
    return;
  }

  // ---- status ---------------------------------------------------------------------------------

  /** Build the status from what is observed now and write it if it changed (R8). `intent`: before a step (R2). */
  private async writeStatus(intent: boolean): Promise<void> {
    const removing = !this.spec || this.spec.deleting === true;
    if (this.view.instances.size > 0) await this.options.nodes.get(this.signal).catch(() => undefined); // node addresses
    const status = buildStatus({
      spec: this.spec,
      removing,
      view: this.view,
      internal: this.internal,
      previous: this.statusEntry?.status,
      reachable: (node) => this.reachable(node),
      nodeAddress: (node) => this.options.nodes.address(node),
      ...(this.halted !== undefined && { halted: this.halted }),
      waitingForSecrets: this.waitingForSecrets,
      pulling: this.pulling,
      notes: this.notes,
      now: this.options.now(),
    });
    this.statusEntry = await this.reconciler.writeStatus(this.name, this.mem, this.statusEntry, status);
    if (intent) this.log.info({ rollout: this.internal.rollout }, "rollout step recorded");
  }

  private result(): Result {
    return this.wakeups.result(this.options.now());
  }
}

function deployError(error: unknown, node: string): string {
  if (error instanceof ForeignContainerError) return error.message;
  if (error instanceof NotFoundError && error.resource === "image") return `image not found on ${node}: ${error.message}`;
  if (error instanceof EngineUnavailableError) return `node ${node} did not answer: ${error.message}`;
  return `cannot deploy on ${node}: ${(error as Error).message}`;
}
