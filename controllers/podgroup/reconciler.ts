// Reconcile(name): desired (the podgroups informer) vs actual (the container cache, corrected by
// inspects) -> the next safe steps -> status. Level-triggered: every decision is taken from what
// is observed now plus the few facts only the controller knows (status.internal: the rollout step,
// restart back-off, a stateful pod's node), so a pass is correct whenever it runs, however often,
// and after a crash at any point. See docs/podgroup-controller.md for the operations table.
//
// Invariants, with where they are kept:
// - R1 never two pods for one instance: containers have deterministic names (a second create on
//   the same node fails with ConflictError and is adopted, never duplicated), and any duplicate
//   that a crash or a lost race left on another node is an extra of classify() and removed.
// - R2 a step whose interruption would be unsafe is persisted BEFORE it is taken: the rollout
//   records {instance, phase: "removing"} before removing the old pod and {phase: "removed", at}
//   after, so a restart neither skips the update wait nor replaces two instances at once.
// - R3 a spec update replaces one instance at a time and starts on the next only when every other
//   instance runs (at most one unavailable because of the update), or when the next one is down
//   anyway.
// - R4 read-your-own-writes: every create/start/remove/rename/inspect is recorded in the cache at
//   once, and a pass waits for the status informer to reflect the controller's last status write
//   before it reads the status again.
// - R5 a container whose node is unreachable is unknown, not missing: it is never counted as
//   removed, and never replaced elsewhere on the controller's own initiative. Only a drift task
//   (drift.ts) moves it: the instance is deployed elsewhere with a higher drift count, which
//   classify() keeps, so the unreachable copy becomes an extra, removed once its node answers.
// - R10 a drift move is recorded in status.internal (instances[i].move) BEFORE the pod on `from`
//   is removed, and placement of a moving instance always excludes `from`, so a restart at any
//   point finishes the move elsewhere: never back onto `from`, never two pods.
// - R6 a container named like ours but without our labels is not ours: it is reported, not touched.
// - R7 status is written only when it changed (compare-and-swap on its modRevision), so refreshes
//   do not write.
// - R8 every restart or redeploy after a failure waits out the instance's back-off.
// - R9 a created container whose spec lists secretFiles is not started before Secret-sync's marker
//   says they are installed (secret-marker.ts); a restart of an exited one does not wait, since
//   the files are already in it and Secret-sync keeps them current.
// - R11 a pod is created on a node only once its images are there: a missing one is pulled first
//   (controllers/shared/image-pull.ts, in the background; the pod is pending, its lastError the pull's
//   progress, until it is done; a failed pull is a failed deploy). A drift move pulls on the new
//   node BEFORE it removes the pod on `from`.
import PQueue from "p-queue";
import type { ContainerCache, CachedContainer } from "../../adapters/cluster/container-cache.ts";
import {
  ConflictError,
  EngineUnavailableError,
  NotFoundError,
  freeCapacity,
  parsePlacementFilters,
  pickNode,
  type Cluster,
  type PlacementFilter,
} from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { PodGroupEvents } from "./events.ts";
import { isStateful, type PodGroupStatus } from "../../api/resources/podgroup.ts";
import type { DriftTask } from "../../api/resources/task.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { Logger } from "../../runtime/log.ts";
import type { ReconcileContext, Result } from "../../runtime/result.ts";
import { killTimeoutOf, planContainer, podRequest } from "./container-spec.ts";
import type { DependencyReservations } from "./dependency-reservations.ts";
import { cordoned, driftTasks, newMoves, tasksForGroup } from "./drift.ts";
import { currentFormat } from "../shared/format.ts";
import { containerName, identify, labelKeys } from "./naming.ts";
import { previousContainerName, previousSlot } from "../shared/previous.ts";
import { reservationsOf, type NodeView } from "./nodes.ts";
import {
  classify,
  instanceContainers,
  podComplete,
  podContainers,
  podRunning,
  type GroupView,
  type InstanceView,
  type PodCandidate,
} from "./observe.ts";
import type { PassesInFlight } from "./passes.ts";
import type { RestartBackoff } from "../shared/backoff.ts";
import { inspectAll, stopAndRemove, sweepNode, type ContainerOpsContext } from "../shared/container-ops.ts";
import { needsDetails, pausedError, stoppedPod } from "../shared/containers.ts";
import { ForeignContainerError, StatusConflictError } from "../shared/errors.ts";
import { settleAll } from "../shared/settle.ts";
import { pullRecheckMs, type ImagePuller } from "../shared/image-pull.ts";
import { countExit, countFailure } from "../shared/restart.ts";
import { secretsNotReady, type SecretMarkerEntry } from "./secret-marker.ts";
import { readOwnStatus, writeStatusIfChanged } from "../shared/status-records.ts";
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

export interface ReconcilerOptions {
  store: Store;
  cluster: Cluster;
  cache: ContainerCache;
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
  /** Pulls missing images before a pod is created (R11). */
  images: Pick<ImagePuller, "ensureImages">;
  layout: Layout;
  updateWaitMs: number;
  refreshIntervalMs: number;
  backoff: RestartBackoff;
  /** Wall clock (ms since the epoch): persisted times must mean the same after a restart. */
  now: () => number;
  random: () => number;
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

const asap = 1;
/** Shortest run that counts as "started" in a spec update's runtime check. */
const runtimeCheckMinMs = 1_000;
/**
 * A pod waiting for its secret files is looked at again after this long even without a marker
 * event: a safety net only, since the markers informer enqueues the group the moment one is written.
 */
const secretsRecheckMs = 5_000;

export class PodGroupReconciler {
  private readonly memory = new Map<string, GroupMemory>();

  constructor(private readonly o: ReconcilerOptions) {}

  /** Revision of our last status write for `name` (the status source skips its own echo). */
  lastStatusRevision(name: string): number | undefined {
    return this.memory.get(name)?.statusRevision;
  }

  readonly reconcile = async (name: string, ctx: ReconcileContext): Promise<Result | void> => {
    const o = this.o;
    const mem = this.memory.get(name) ?? { statusRevision: 0, specRevision: 0, nextFullRefreshAt: 0, refreshRequestedAt: undefined };
    this.memory.set(name, mem);
    // Registered before the task list is read (passes.ts): the drift-task reconciler waits for it.
    const end = o.passes.begin(o.tasks.cacheRevision());
    try {
      return await this.pass(name, mem, ctx);
    } finally {
      end();
    }
  };

  private async pass(name: string, mem: GroupMemory, ctx: ReconcileContext): Promise<Result | void> {
    const o = this.o;
    // R4: the caches must reflect our own last writes before we read them.
    const status = await this.readStatus(name, mem, ctx.signal);
    const specEntry = await this.readSpec(name, mem, ctx.signal);
    const all = o.tasks.list();
    // Refresh tasks naming the group are its own (deleted by its pass); drift tasks span groups and
    // are completed by the drift-task reconciler (drift-tasks.ts).
    const tasks = all.filter((t) => t.task?.kind === "refresh" && t.task.podGroup === name);
    if (!specEntry && !status) {
      // Not a group of ours (a container of another orchestrator's group), or fully removed.
      this.memory.delete(name);
      await this.deleteTasks(tasks);
      return;
    }
    if (specEntry && !specEntry.spec) {
      // A spec we cannot read must not look deleted: touch nothing, say why.
      const prev = status?.status;
      const next: PodGroupStatus = {
        ...(prev ?? { pods: [], observedVersion: 0, state: "failed", lastError: "", updatedAt: "" }),
        state: "failed",
        lastError: `the stored spec cannot be read (${specEntry.invalid}); nothing is changed until it is fixed`,
        updatedAt: new Date(o.now()).toISOString(),
      };
      await this.writeStatus(name, mem, status, next);
      return;
    }
    const pass = new Pass(this, name, specEntry?.spec, specEntry, status, mem, tasks, driftTasks(all), ctx);
    return pass.run();
  }

  // ---- store access -------------------------------------------------------------------------

  private async readStatus(name: string, mem: GroupMemory, signal: AbortSignal): Promise<StatusEntry | undefined> {
    const { statuses, layout, store } = this.o;
    return readOwnStatus({ statuses, store, key: layout.statusOf(name), ownRevision: mem.statusRevision, decode: decodeStatus, signal });
  }

  private async readSpec(name: string, mem: GroupMemory, signal: AbortSignal): Promise<SpecEntry | undefined> {
    const { specs, layout } = this.o;
    if (mem.specRevision > specs.cacheRevision()) await specs.waitForRevision(mem.specRevision, signal, 5_000);
    return specs.get(layout.podGroup(name));
  }

  /** R7: compare-and-swap, only when changed. Returns the entry now stored. */
  async writeStatus(name: string, mem: GroupMemory, prev: StatusEntry | undefined, next: PodGroupStatus): Promise<StatusEntry> {
    const { record, written } = await writeStatusIfChanged(this.o.store, this.o.layout.statusOf(name), prev, next);
    if (written) mem.statusRevision = record.modRevision;
    if (written) this.o.events?.statusWritten(name, this.o.specs.get(this.o.layout.podGroup(name))?.spec, prev?.status, next);
    return record;
  }

  async deleteTasks(tasks: TaskEntry[]): Promise<void> {
    for (const t of tasks) {
      await this.o.store.delete(t.key, { expect: [{ key: t.key, target: "modRevision", equals: t.modRevision }] });
    }
  }

  /** Delete spec, history and status (and the group's tasks) in one transaction, each only if unchanged. */
  async deleteKeys(name: string, mem: GroupMemory, spec: SpecEntry | undefined, status: StatusEntry | undefined, tasks: TaskEntry[]): Promise<void> {
    const { layout, store } = this.o;
    const compares = [];
    const ops = [];
    if (status) {
      compares.push({ key: layout.statusOf(name), target: "modRevision" as const, equals: status.modRevision });
      ops.push({ type: "delete" as const, key: layout.statusOf(name) });
    }
    if (spec) {
      compares.push({ key: layout.podGroup(name), target: "modRevision" as const, equals: spec.modRevision });
      ops.push({ type: "delete" as const, key: layout.podGroup(name) });
      ops.push({ type: "deletePrefix" as const, prefix: layout.historyOf(name) });
    }
    for (const t of tasks) ops.push({ type: "delete" as const, key: t.key });
    const res = await store.txn(compares, ops);
    if (!res.succeeded) throw new StatusConflictError(`${name} changed while its removal finished; retrying`);
    mem.statusRevision = res.revision;
    mem.specRevision = spec ? res.revision : mem.specRevision;
  }

  get options(): ReconcilerOptions {
    return this.o;
  }

  forget(name: string): void {
    this.memory.delete(name);
  }
}

/** One reconcile of one group. */
class Pass {
  private readonly o: ReconcilerOptions;
  private readonly log: Logger;
  private readonly signal: AbortSignal;
  /** Engine calls on the group's containers, with the cache kept in step. */
  private readonly ops: ContainerOpsContext;
  private readonly now: number;
  private internal: Internal;
  private view!: GroupView;
  private readonly wakeups: number[] = [];
  private readonly notes: string[] = [];
  private halted: string | undefined;
  /** Instances whose created pod waits for its secret files (R9), with the reason shown as lastError. */
  private readonly waitingForSecrets = new Map<number, string>();
  /** Instances whose pod waits for an image pull (R11), with its progress shown as lastError. */
  private readonly pulling = new Map<number, string>();
  private statusEntry: StatusEntry | undefined;

  constructor(
    private readonly r: PodGroupReconciler,
    private readonly name: string,
    private readonly spec: StoredPodGroup | undefined,
    private readonly specEntry: SpecEntry | undefined,
    status: StatusEntry | undefined,
    private readonly mem: GroupMemory,
    private readonly tasks: TaskEntry[],
    private readonly drifts: DriftTask[],
    ctx: ReconcileContext,
  ) {
    this.o = r.options;
    this.log = ctx.log;
    this.signal = ctx.signal;
    this.ops = { cache: this.o.cache, cluster: this.o.cluster, signal: ctx.signal, log: ctx.log };
    this.now = this.o.now();
    this.statusEntry = status;
    this.internal = readInternal(status?.status);
  }

  async run(): Promise<Result | void> {
    const spec = this.spec;
    const full = this.fullRefreshDue();
    await this.inspect(full);
    this.observe();
    if (!spec || spec.deleting) return this.remove();
    await this.converge(spec);
    this.observe();
    await this.writeStatus(false);
    await this.r.deleteTasks(this.tasks);
    return this.result();
  }

  // ---- observation ----------------------------------------------------------------------------

  private fullRefreshDue(): boolean {
    const { mem, spec } = this;
    const requested = spec?.refreshRequestedAt;
    const due = this.now >= mem.nextFullRefreshAt || this.tasks.length > 0 || requested !== mem.refreshRequestedAt;
    if (due) {
      const jitter = 0.9 + 0.2 * this.o.random();
      mem.nextFullRefreshAt = this.now + this.o.refreshIntervalMs * jitter;
      mem.refreshRequestedAt = requested;
    }
    this.wakeups.push(mem.nextFullRefreshAt);
    return due;
  }

  private containers(): CachedContainer[] {
    return this.o.cache.byLabel(labelKeys.podGroup, this.name);
  }

  /**
   * Runtime data is corrected from the engines: on a full refresh every container of the group is
   * inspected; otherwise only those whose cached data is incomplete (seen in a relist only).
   */
  private async inspect(full: boolean): Promise<void> {
    const todo = this.containers().filter((c) => this.o.nodes.reachable(c.node) && (full || needsDetails(c)));
    await inspectAll(this.ops, todo, this.o.deployConcurrency);
  }

  private observe(): void {
    const spec = this.spec;
    this.view = classify(this.containers(), {
      group: this.name,
      version: spec?.pod.version ?? Number.MAX_SAFE_INTEGER,
      podSize: spec?.pod.containers.length ?? 0,
      reachable: (n) => this.o.nodes.reachable(n),
      restartedAt: spec?.restartedAt ?? "",
    });
  }

  private reachable(node: string): boolean {
    return this.o.nodes.reachable(node);
  }

  private record(instance: number): InstanceRecord {
    return this.internal.instances[String(instance)] ?? { restarts: 0, failures: 0 };
  }

  private setRecord(instance: number, rec: InstanceRecord): void {
    this.internal.instances[String(instance)] = rec;
  }

  private wakeAt(at: number): void {
    this.wakeups.push(at);
  }

  // ---- the steps ------------------------------------------------------------------------------

  private async converge(spec: StoredPodGroup): Promise<void> {
    const n = spec.numInstances;
    const version = spec.pod.version;
    for (const c of this.view.unidentified) {
      this.notes.push(`container ${c.name} on ${c.node} is labelled ${labelKeys.podGroup}=${this.name} but its instance cannot be read; left alone`);
    }
    if (isStateful(spec.pod)) {
      for (const v of this.view.instances.values()) {
        if (v.kept && v.instance < n) this.setRecord(v.instance, { ...this.record(v.instance), node: v.kept.node });
      }
    }

    const moving = await this.drift(spec);
    const rolloutRemoval = await this.rollout(spec, moving);
    const work: Promise<void>[] = [];
    // Duplicates and stale copies next to the kept pod (R1). Instances removed whole below (a
    // rollout step, a move) are left to that removal: two removals of one container race into a
    // 409 from the engine.
    const extras = [...this.view.instances.values()]
      .filter((v) => v.instance < n && v.instance !== rolloutRemoval && !moving.has(v.instance))
      .flatMap((v) => v.extras.filter((o) => this.reachable(o.c.node)).map((o) => o.c));
    if (extras.length > 0) work.push(stopAndRemove(this.ops, extras, killTimeoutOf(spec.pod)));
    // Scale down: the highest surplus instance first, one per pass.
    const surplus = [...this.view.instances.values()]
      .filter((v) => v.instance >= n && instanceContainers(v).some((o) => this.reachable(o.c.node)))
      .sort((a, b) => b.instance - a.instance);
    if (surplus[0]) {
      work.push(this.removeInstance(surplus[0], killTimeoutOf(spec.pod)));
      if (surplus.length > 1) this.wakeAt(this.now + asap);
    }
    if (rolloutRemoval !== undefined) {
      const v = this.view.instances.get(rolloutRemoval);
      if (v) work.push(this.removeInstance(v, killTimeoutOf(spec.pod), true));
    }
    // Kept previous containers of instances scaled away (whose pod is gone already) go too.
    const orphans = [...this.view.previous]
      .filter(([i]) => i >= n && !this.view.instances.has(i))
      .flatMap(([, ps]) => ps.map((p) => p.c))
      .filter((c) => this.reachable(c.node));
    if (orphans.length > 0) work.push(stopAndRemove(this.ops, orphans, killTimeoutOf(spec.pod), true));
    if (moving.size > 0) work.push(this.moveAll(spec, moving));
    work.push(this.deployAndRestart(spec, version, moving));
    work.push(this.renameLegacy());
    await settleAll(work);
    if (rolloutRemoval !== undefined && this.internal.rollout?.phase === "removing") {
      // R2: the old pod is gone now; the update wait starts.
      this.internal.rollout = { ...this.internal.rollout, phase: "removed", at: this.o.now() };
      this.wakeAt(this.internal.rollout.at + this.o.updateWaitMs);
    }
  }

  /**
   * The spec-update step (R2, R3). Returns the instance whose old pod must be removed in this
   * pass, if any (its intent is already persisted).
   */
  private async rollout(spec: StoredPodGroup, moving: ReadonlyMap<number, DriftMove>): Promise<number | undefined> {
    const n = spec.numInstances;
    const version = spec.pod.version;
    const restartedAt = spec.restartedAt ?? "";
    // A pod needs the step when it runs an older version, or was created before the last rolling
    // restart request (its io.capstan.restarted-at label differs): same protocol for both.
    const current = (p: PodCandidate) => p.version === version && p.restartedAt === restartedAt;
    let ro = this.internal.rollout;
    if (ro && ro.instance >= n) ro = undefined;
    if (ro && ro.toVersion !== version) {
      const { restart: _restart, ...step } = ro;
      ro = { ...step, toVersion: version };
    }
    this.internal.rollout = ro;

    if (ro) {
      const kept = this.view.instances.get(ro.instance)?.kept;
      if (kept && !this.reachable(kept.node)) return undefined; // R5: wait for the node
      if (kept && !current(kept)) {
        if (ro.phase === "removing") return ro.instance; // intent persisted by an earlier pass
        // The old pod is back (re-created behind our back): remove it again, persisting first.
        this.internal.rollout = { ...ro, phase: "removing", at: this.now };
        await this.writeStatus(true);
        return ro.instance;
      }
      if (!kept) {
        if (ro.phase === "removing") {
          // Removed before a crash, or behind our back: the wait starts now (never shorter).
          this.internal.rollout = { ...ro, phase: "removed", at: this.now };
        }
        const until = this.internal.rollout!.at + this.o.updateWaitMs;
        if (this.now < until) this.wakeAt(until);
        return undefined; // deployAndRestart deploys it once the wait is over
      }
      // The new pod exists: the runtime check decides whether the step is done.
      const check = this.runtimeCheck(kept, spec);
      if (check.done) {
        this.internal.rollout = undefined;
      } else {
        if (check.wakeAt !== undefined) this.wakeAt(check.wakeAt);
        if (check.failure) {
          this.halted = ro.restart
            ? `restart requested at ${restartedAt} halted at instance ${ro.instance}: ${check.failure}`
            : `update to version ${version} halted at instance ${ro.instance}: ${check.failure}`;
        }
        return undefined;
      }
    }

    // Pick the next instance to update (R3).
    const stale = [...this.view.instances.values()]
      .filter((v) => v.instance < n && v.kept && !current(v.kept) && this.reachable(v.kept.node) && !moving.has(v.instance))
      .map((v) => v.instance)
      .sort((a, b) => a - b);
    if (stale.length === 0) return undefined;
    const available = (i: number) => {
      const k = this.view.instances.get(i)?.kept;
      return k !== undefined && podRunning(k) && podComplete(k, k.version === version ? spec.pod.containers.length : k.containers.size);
    };
    const down = stale.find((i) => !available(i));
    let next = down;
    if (next === undefined) {
      const othersUp = Array.from({ length: n }, (_, i) => i).every((i) => i === stale[0] || available(i));
      if (!othersUp) return undefined; // an event wakes us when they are
      next = stale[0]!;
    }
    const restart = this.view.instances.get(next)?.kept?.version === version;
    this.internal.rollout = { instance: next, toVersion: version, phase: "removing", at: this.now, ...(restart && { restart: true }) };
    // The new version starts with a clean slate (restart count and back-off are per version).
    const rec = this.record(next);
    this.setRecord(next, { restarts: 0, failures: 0, ...(rec.node !== undefined && { node: rec.node }), ...(rec.drift !== undefined && { drift: rec.drift }) });
    await this.writeStatus(true); // R2: intent first
    return next;
  }

  /**
   * Whether the instance's new pod passed the runtime check: every container running for the
   * pod's setupTime, and at least runtimeCheckMinMs, so that a version that dies right after its
   * start is not taken for a good one and does not get rolled out to the next instance.
   */
  private runtimeCheck(kept: PodCandidate, spec: StoredPodGroup): { done: boolean; wakeAt?: number; failure?: string } {
    const setupMs = Math.max((spec.pod.setupTime ?? 0) * 1000, runtimeCheckMinMs);
    const cs = podContainers(kept).map((o) => o.c);
    if (!podComplete(kept, spec.pod.containers.length)) return { done: false };
    if (cs.every((c) => c.state === "running")) {
      const since = Math.max(...cs.map((c) => c.startedAt ?? this.now));
      if (this.now - since >= setupMs) return { done: true };
      return { done: false, wakeAt: since + setupMs };
    }
    if (spec.restartPolicy === "never" && cs.every((c) => c.state === "exited" && c.exitCode === 0)) return { done: true };
    const bad = cs.find((c) => c.state !== "running" && c.state !== "created");
    // Created (being started, or waiting for its secret files, R9): not a failure, and the setup
    // time is counted from the start, so the wait for secrets does not eat into it.
    if (!bad) return { done: false };
    return { done: false, failure: `${bad.name} ${bad.state}${bad.exitCode !== undefined ? ` with code ${bad.exitCode}` : ""}` };
  }

  /**
   * The drift step (drift.ts, R10). Records the moves that start now (intent first), then returns
   * every move in progress: those just recorded and those recorded by an earlier pass (before a
   * restart, or retried after a failure). A move whose new pod exists is done and cleared.
   */
  private async drift(spec: StoredPodGroup): Promise<Map<number, DriftMove>> {
    const n = spec.numInstances;
    const ro = this.internal.rollout;
    const unseen = unseenPods(this.view, this.statusEntry?.status?.pods ?? [], (node) => this.reachable(node));
    const starts = newMoves(spec, this.view, this.internal, tasksForGroup(spec, this.drifts), (i) => ro?.instance === i, unseen);
    for (const [i, m] of starts) {
      const move: DriftMove = { task: m.task.id, from: m.task.from, drift: m.drift, ...(m.task.to !== undefined && { to: m.task.to }) };
      this.setRecord(i, { ...this.record(i), move });
    }
    if (starts.size > 0) {
      await this.writeStatus(false); // R10: the moves are recorded before anything is removed
      this.log.info({ instances: [...starts.keys()], from: [...new Set([...starts.values()].map((m) => m.task.from))] }, "drift: moves recorded");
    }
    const moving = new Map<number, DriftMove>();
    for (const [k, rec] of Object.entries(this.internal.instances)) {
      const i = Number(k);
      const move = rec.move;
      if (!move) continue;
      const kept = this.view.instances.get(i)?.kept;
      const { move: _done, ...rest } = rec;
      if (i >= n) {
        this.setRecord(i, rest); // scaled away: nothing to move
      } else if (!this.drifts.some((t) => t.id === move.task) && (!kept || kept.node === move.from)) {
        // The task was deleted before the move was made: cancelled. The instance stays where it
        // is; one whose pod on `from` is already gone is redeployed by deployAndRestart with the
        // move's drift count, so it still outranks any copy left on an unreachable `from`.
        // The drift's own failures ("no node fits") go with it.
        const { lastError: _e, nextDeployAt: _at, ...clean } = rest;
        this.setRecord(i, kept ? clean : { ...rest, drift: Math.max(rest.drift ?? 0, move.drift) });
        this.log.info({ instance: i, task: move.task, from: move.from }, "drift: move cancelled (its task was deleted)");
      } else if (kept && kept.drift >= move.drift) {
        this.setRecord(i, { ...rest, drift: kept.drift }); // the new pod exists
      } else if (kept && kept.node !== move.from) {
        this.setRecord(i, rest); // already off `from` (e.g. replaced by a spec update's step)
      } else {
        moving.set(i, move);
      }
    }
    return moving;
  }

  /** Carry out the moves in parallel (bounded): remove the pod on `from` (when reachable), deploy elsewhere. */
  private async moveAll(spec: StoredPodGroup, moving: ReadonlyMap<number, DriftMove>): Promise<void> {
    const due: number[] = [];
    for (const i of [...moving.keys()].sort((a, b) => a - b)) {
      const at = this.record(i).nextDeployAt;
      if (at !== undefined && this.now < at) this.wakeAt(at); // R8
      else due.push(i);
    }
    if (due.length === 0) return;
    // Placed before anything is removed: an instance that fits nowhere keeps running where it is.
    const placed = await this.place(spec, due, moving);
    const q = new PQueue({ concurrency: this.o.deployConcurrency });
    await settleAll([...placed].map(([i, node]) => q.add(() => this.move(spec, i, moving.get(i)!, node))));
  }

  private async move(spec: StoredPodGroup, instance: number, move: DriftMove, node: string): Promise<void> {
    const v = this.view.instances.get(instance);
    // Every copy of the instance is older than the move (drift() checked): all go. One on an
    // unreachable node stays until it answers (R5), an extra by then.
    const old = v ? instanceContainers(v).map((o) => o.c).filter((c) => this.reachable(c.node)) : [];
    const all = Array.from({ length: spec.pod.containers.length }, (_, k) => k);
    try {
      // R11: the images are pulled on the new node while the old pod still runs.
      if (!(await this.imagesReady(spec, instance, node, all))) return;
    } catch (e) {
      if (this.signal.aborted) throw e;
      this.fail(instance, `drift: ${deployError(e, node)}`, "deploy");
      return;
    }
    try {
      await stopAndRemove(this.ops, old, killTimeoutOf(spec.pod));
    } catch (e) {
      if (this.signal.aborted) throw e;
      this.fail(instance, `drift: cannot remove the pod on ${move.from}: ${(e as Error).message}`, "deploy");
      return;
    }
    await this.deployPod(spec, instance, node, all, move.drift);
    const kept = this.view.instances.get(instance)?.kept;
    if (kept && kept.drift >= move.drift) {
      const { move: _done, ...rest } = this.record(instance);
      this.setRecord(instance, { ...rest, drift: move.drift, ...(isStateful(spec.pod) && { node }) });
      this.log.info({ instance, from: move.from, to: node, drift: move.drift }, "drift: instance moved");
    }
  }

  /** Deploy missing instances, complete partial pods, start created ones, restart per policy (R8). */
  private async deployAndRestart(spec: StoredPodGroup, version: number, moving: ReadonlyMap<number, DriftMove>): Promise<void> {
    const n = spec.numInstances;
    const podSize = spec.pod.containers.length;
    const toPlace: number[] = [];
    const onNode: { instance: number; pod: PodCandidate; indexes: number[] }[] = [];
    const starts: { instance: number; pod: PodCandidate; restart: boolean }[] = [];
    const ro = this.internal.rollout;
    const previous = new Map((this.statusEntry?.status?.pods ?? []).map((p) => [p.instanceNo, p]));

    for (let i = 0; i < n; i++) {
      const v = this.view.instances.get(i);
      const kept = v?.kept;
      let rec = this.record(i);
      if (moving.has(i)) continue; // moveAll deploys it
      if (ro?.instance === i && (ro.phase === "removing" || (!kept && this.now < ro.at + this.o.updateWaitMs))) continue;
      if (kept && !this.reachable(kept.node)) continue; // R5
      if (!kept) {
        const last = previous.get(i);
        if (last && last.containers.length > 0 && last.node && !this.reachable(last.node)) continue; // R5
        if (rec.nextDeployAt !== undefined && this.now < rec.nextDeployAt) {
          this.wakeAt(rec.nextDeployAt); // R8
          continue;
        }
        toPlace.push(i);
        continue;
      }
      if (kept.version === version && !podComplete(kept, podSize)) {
        const missing = Array.from({ length: podSize }, (_, k) => k).filter((k) => !kept.containers.has(k));
        onNode.push({ instance: i, pod: kept, indexes: missing });
        continue;
      }
      if (podRunning(kept)) continue;
      const { blocked, lastStopped: last } = stoppedPod(podContainers(kept).map((o) => o.c));
      if (blocked === "busy") {
        this.wakeAt(this.now + 1_000); // the engine is busy with it
        continue;
      }
      if (blocked === "paused") {
        this.setRecord(i, { ...rec, lastError: pausedError });
        continue;
      }
      if (last) {
        const exit = {
          // One exit per container and restart: times differ between an event and an inspect.
          key: `${last.id}#${rec.restarts}`,
          exitCode: last.exitCode,
          oomKilled: last.oomKilled,
          startedAt: last.startedAt,
          finishedAt: last.finishedAt,
        };
        rec = countExit(rec, exit, spec.restartPolicy, this.now, this.o.backoff);
        this.setRecord(i, rec);
        if (rec.nextAttemptAt === undefined) continue; // the policy says no
      }
      if (rec.nextAttemptAt !== undefined && this.now < rec.nextAttemptAt) {
        this.wakeAt(rec.nextAttemptAt);
        continue;
      }
      if (this.holdForSecrets(spec, kept)) continue;
      starts.push({ instance: i, pod: kept, restart: last !== undefined });
    }

    const q = new PQueue({ concurrency: this.o.deployConcurrency });
    const jobs: Promise<void>[] = [];
    for (const s of starts) jobs.push(q.add(() => this.startPod(s.instance, s.pod, s.restart)));
    // A pod completed in place keeps the restart label it was made under: were it made under the
    // current one, the instance would split into two pods and the older be removed at once, a
    // restart outside the rollout's one-at-a-time step (docs/podgroup-controller.md, "Rolling restart").
    for (const p of onNode) jobs.push(q.add(() => this.deployPod({ ...spec, restartedAt: p.pod.restartedAt === "" ? undefined : p.pod.restartedAt }, p.instance, p.pod.node, p.indexes, p.pod.drift)));
    if (toPlace.length > 0) {
      const placed = await this.place(spec, toPlace.slice(0, this.o.maxDeploysPerPass));
      if (toPlace.length > this.o.maxDeploysPerPass) this.wakeAt(this.now + asap);
      for (const [instance, node] of placed) {
        jobs.push(q.add(() => this.deployPod(spec, instance, node, Array.from({ length: podSize }, (_, k) => k), this.record(instance).drift ?? 0)));
      }
    }
    await settleAll(jobs);
  }

  /**
   * Placement of new pods: filters, the spread hint, free memory and CPU. Stateful pods keep their
   * node; a moving instance (`moves`) goes to its move's `to`, or anywhere but its `from`; no pod
   * goes to a node a pending drift task of this group drains (the cordon), which also overrides a
   * stateful pod's node (only a forced drift applies to a stateful group).
   */
  private async place(spec: StoredPodGroup, instances: number[], moves?: ReadonlyMap<number, DriftMove>): Promise<Map<number, string>> {
    const placed = new Map<number, string>();
    let filters: PlacementFilter[];
    try {
      filters = parsePlacementFilters(spec.pod.filters ?? []);
    } catch (e) {
      for (const i of instances) this.fail(i, `placement filters: ${(e as Error).message}`, "deploy");
      return placed;
    }
    const cordon = cordoned(tasksForGroup(spec, this.drifts));
    const nodes = await this.o.nodes.get(this.signal);
    // Dependency pods hold memory and CPU on the nodes too (the API's feasibility counts them).
    const capacity = freeCapacity(nodes, [...reservationsOf(this.o.cache.list()), ...(await this.o.dependencyReservations.list(this.signal))]);
    const request = podRequest(spec.pod);
    const groupCounts: Record<string, number> = {};
    for (const v of this.view.instances.values()) {
      // Pods on their way off a node do not count for the spread.
      if (v.kept && v.instance < spec.numInstances && !this.record(v.instance).move) {
        groupCounts[v.kept.node] = (groupCounts[v.kept.node] ?? 0) + 1;
      }
    }
    const stateful = isStateful(spec.pod);
    for (const i of instances) {
      const move = moves?.get(i);
      const known = stateful && !move ? this.record(i).node : undefined;
      const sticky = known !== undefined && !cordon.includes(known) ? known : undefined;
      if (sticky !== undefined && !this.reachable(sticky)) {
        this.setRecord(i, { ...this.record(i), lastError: `stateful: waiting for its node ${sticky}, which is unreachable` });
        continue;
      }
      const f: PlacementFilter[] = [...filters, ...cordon.map((n) => ({ kind: "node" as const, op: "!=" as const, value: n }))];
      if (sticky !== undefined) f.push({ kind: "node", op: "==", value: sticky });
      if (move?.to !== undefined) f.push({ kind: "node", op: "==", value: move.to });
      else if (move) f.push({ kind: "node", op: "!=", value: move.from });
      const node = pickNode(capacity, { request, filters: f, groupCounts });
      if (!node) {
        const need = `${request.memoryBytes} bytes of memory and ${request.nanoCpus / 1e9} CPUs`;
        const where = f.length ? ` on a node matching ${[...new Set(f.map(filterText))].join(", ")}` : "";
        this.fail(i, `${move ? "drift: " : ""}no node fits: needs ${need}${where}`, "deploy");
        continue;
      }
      placed.set(i, node);
      groupCounts[node] = (groupCounts[node] ?? 0) + 1;
      const cap = capacity.find((c) => c.name === node)!;
      cap.freeMemoryBytes -= request.memoryBytes;
      cap.freeNanoCpus -= request.nanoCpus;
    }
    return placed;
  }

  /** Create (or adopt, R1) containers `indexes` of instance `instance` on `node`, then start the pod. */
  private async deployPod(spec: StoredPodGroup, instance: number, node: string, indexes: number[], drift: number): Promise<void> {
    const { cluster, cache } = this.o;
    let stage: "deploy" | "start" = "deploy";
    try {
      if (!(await this.imagesReady(spec, instance, node, indexes))) return; // R11
      for (const k of indexes) {
        const plan = planContainer(spec, instance, k, drift);
        try {
          const ref = await cluster.create(node, plan.name, plan.spec, { signal: this.signal });
          cache.recordCreated({ node, id: ref.id, name: plan.name, image: plan.spec.image, labels: plan.spec.labels ?? {}, limits: plan.limits });
        } catch (e) {
          if (!(e instanceof ConflictError)) throw e;
          // The name is taken on this node: ours from an earlier attempt (adopt), or not ours (R6).
          const d = await cluster.inspect({ node, id: plan.name }, { signal: this.signal });
          const id = identify(d, this.name);
          if (!id || id.instance !== instance || id.version !== spec.pod.version || id.index !== k) {
            throw new ForeignContainerError(
              `container name ${plan.name} on ${node} is taken by a container Capstan did not create (id ${d.id.slice(0, 12)}); rename or remove it`,
            );
          }
          cache.recordDetails(d, undefined);
        }
      }
      this.observe();
      const kept = this.view.instances.get(instance)?.kept;
      stage = "start";
      if (kept && !this.holdForSecrets(spec, kept)) await this.startContainers(kept);
      const rec = this.record(instance);
      this.setRecord(instance, {
        restarts: rec.restarts,
        failures: 0,
        ...(rec.node !== undefined && { node: rec.node }),
        ...(rec.move !== undefined && { move: rec.move }),
        drift,
      });
    } catch (e) {
      if (this.signal.aborted) throw e;
      this.fail(instance, deployError(e, node), stage);
    }
  }

  /**
   * R11: true when the images of containers `indexes` are on `node`. Otherwise the missing ones
   * are being pulled (the instance is reported pending with the pull's progress, and looked at
   * again shortly), or their pull failed (a failed deploy: back-off, then a fresh pull).
   */
  private async imagesReady(spec: StoredPodGroup, instance: number, node: string, indexes: number[]): Promise<boolean> {
    const images = indexes.map((k) => spec.pod.containers[k]!.image);
    const s = await this.o.images.ensureImages(node, images, `podgroup/${this.name}/${instance}`, this.signal);
    if (s.kind === "ready") return true;
    if (s.kind === "pulling") {
      this.pulling.set(instance, s.message);
      this.wakeAt(this.now + pullRecheckMs);
    } else {
      this.fail(instance, s.message, "deploy");
    }
    return false;
  }

  /**
   * R9: true (and the pod is reported as waiting) when a created container of `pod` lists secret
   * files that Secret-sync's marker does not yet cover. The pod starts as a whole, so nothing of
   * it is started then. Only "created" containers wait: an exited one has its files already.
   */
  private holdForSecrets(spec: StoredPodGroup, pod: PodCandidate): boolean {
    for (const o of podContainers(pod)) {
      if (o.c.state !== "created") continue;
      const files = spec.pod.containers[o.id.index]?.secretFiles ?? [];
      const why = secretsNotReady(this.o.secretMarker(o.c.id), this.name, files);
      if (why === undefined) continue;
      this.waitingForSecrets.set(pod.instance, why);
      this.wakeAt(this.now + secretsRecheckMs);
      return true;
    }
    return false;
  }

  private async startPod(instance: number, pod: PodCandidate, restart: boolean): Promise<void> {
    try {
      await this.startContainers(pod);
      const rec = this.record(instance);
      this.setRecord(instance, { ...rec, restarts: rec.restarts + (restart ? 1 : 0) });
      if (restart) this.log.info({ instance, restarts: rec.restarts + 1 }, "restarted per restart policy");
    } catch (e) {
      if (this.signal.aborted) throw e;
      this.fail(instance, `cannot start: ${(e as Error).message}`, "start");
    }
  }

  private async startContainers(pod: PodCandidate): Promise<void> {
    for (const o of podContainers(pod)) {
      if (o.c.state === "running") continue;
      const generation = this.o.cache.get(o.c.node, o.c.id)?.generation;
      await this.o.cluster.start(o.c, { signal: this.signal });
      this.o.cache.recordStarted(o.c.node, o.c.id, generation);
    }
  }

  private fail(instance: number, error: string, kind: "deploy" | "start"): void {
    this.log.warn({ instance, error }, kind === "deploy" ? "instance not deployed" : "instance not started");
    const rec = countFailure(this.record(instance), error, kind, this.now, this.o.backoff);
    this.setRecord(instance, rec);
    const at = kind === "deploy" ? rec.nextDeployAt : rec.nextAttemptAt;
    if (at !== undefined) this.wakeAt(at);
  }

  /** Older-format containers kept for their instance are renamed to the current name form in place. */
  private async renameLegacy(): Promise<void> {
    for (const v of this.view.instances.values()) {
      if (!v.kept || !this.reachable(v.kept.node)) continue;
      for (const o of v.kept.containers.values()) {
        if (o.id.format === currentFormat) continue;
        const want = containerName(o.id);
        if (o.c.name === want) continue;
        try {
          await this.o.cluster.rename(o.c, want, { signal: this.signal });
          this.o.cache.recordRenamed(o.c.node, o.c.id, want);
          this.log.info({ from: o.c.name, to: want }, "older-format container adopted in place");
        } catch (e) {
          if (this.signal.aborted) throw e;
          const rec = this.record(v.instance);
          this.setRecord(v.instance, { ...rec, lastError: `cannot rename older-format container ${o.c.name} to ${want}: ${(e as Error).message}` });
        }
      }
    }
  }

  /**
   * Remove one instance: stop (kill timeout) and remove its containers, then list the nodes (not
   * the cache) and force-remove any leftover of that instance. `keepPrevious` (a rollout step):
   * the kept pod is stopped and kept as the instance's previous containers instead, replacing
   * those kept before; otherwise the previous containers go with the instance.
   */
  private async removeInstance(v: InstanceView, killTimeout: number, keepPrevious = false): Promise<void> {
    const all = instanceContainers(v).map((o) => o.c).filter((c) => this.reachable(c.node));
    if (keepPrevious && v.kept && this.reachable(v.kept.node)) {
      const kept = podContainers(v.kept).map((o) => o.c);
      await stopAndRemove(this.ops, all.filter((c) => !kept.includes(c)), killTimeout);
      await this.keepAsPrevious(v.instance, kept, killTimeout);
    } else {
      const previous = (this.view.previous.get(v.instance) ?? []).map((p) => p.c).filter((c) => this.reachable(c.node));
      await stopAndRemove(this.ops, [...all, ...previous], killTimeout);
    }
    await this.sweep((c) => identify(c, this.name)?.instance === v.instance || (!keepPrevious && previousSlot(c.name, this.name)?.instance === v.instance));
  }

  /**
   * The previous container (docs/podgroup-controller.md, "The previous container"): the replaced
   * pod's containers are stopped and renamed to the instance's previous names, after the ones kept
   * before were removed (at most one per instance and container index). A container that cannot
   * be kept so is removed, as before.
   */
  private async keepAsPrevious(instance: number, pod: CachedContainer[], killTimeout: number): Promise<void> {
    const older = (this.view.previous.get(instance) ?? []).map((p) => p.c);
    await stopAndRemove(this.ops, older.filter((c) => this.reachable(c.node)), killTimeout, true);
    await settleAll(
      pod.map(async (c) => {
        const index = identify(c, this.name)?.index ?? 0;
        const name = previousContainerName(this.name, instance, index);
        try {
          await this.o.cluster.stop(c, { timeoutSeconds: killTimeout, signal: this.signal });
          await this.o.cluster.rename(c, name, { signal: this.signal });
          this.o.cache.recordRenamed(c.node, c.id, name);
          this.o.cache.recordDetails(await this.o.cluster.inspect(c, { signal: this.signal }), undefined);
          this.log.info({ container: c.name, node: c.node, as: name }, "replaced container kept as the previous one");
        } catch (e) {
          if (this.signal.aborted) throw e;
          if (e instanceof NotFoundError && e.resource === "container") {
            this.o.cache.recordRemoved(c.node, c.id);
            return;
          }
          this.log.warn({ err: e, container: c.name }, "cannot keep the replaced container; removing it");
          await stopAndRemove(this.ops, [c], killTimeout, true);
        }
      }),
    );
  }

  /** Relist every reachable node for the group's containers and force-remove those `match` selects. */
  private async sweep(match: (c: { name: string; labels: Readonly<Record<string, string>> }) => boolean): Promise<number> {
    let removed = 0;
    const all = await this.o.nodes.get(this.signal);
    await settleAll(
      all
        .filter((n) => this.reachable(n.name))
        .map(async (n) => {
          removed += await sweepNode(this.ops, n.name, `${labelKeys.podGroup}=${this.name}`, match);
        }),
    );
    return removed;
  }

  // ---- removal of the whole group -------------------------------------------------------------

  private async remove(): Promise<Result | void> {
    const killTimeout = this.spec ? killTimeoutOf(this.spec.pod) : 10;
    const withContainers = [...this.view.instances.values()].sort((a, b) => b.instance - a.instance);
    const reachableOnes = withContainers.filter((v) => instanceContainers(v).some((o) => this.reachable(o.c.node)));
    // Kept previous containers are stopped already: removed at once, whatever the batch.
    const previous = [...this.view.previous.values()].flat().map((p) => p.c).filter((c) => this.reachable(c.node));
    if (previous.length > 0) await stopAndRemove(this.ops, previous, killTimeout, true);
    if (reachableOnes.length > 0) {
      await this.writeStatus(false); // "removing" is visible while the stops take their time
      // Highest InstanceNo first, a bounded batch per pass.
      const batch = reachableOnes.slice(0, this.o.removeConcurrency);
      await settleAll(
        batch.map((v) =>
          stopAndRemove(
            this.ops,
            instanceContainers(v).map((o) => o.c).filter((c) => this.reachable(c.node)),
            killTimeout,
          ),
        ),
      );
      this.observe();
    }
    const left = this.containers();
    const unreachable = [...new Set(left.map((c) => c.node).filter((n) => !this.reachable(n)))];
    // A down node is waited for only if it may hold something of the group: a pod the last status
    // places there (unseenPods), or anything at all when it has not been listed since start. A
    // node that was listed and holds none of the group's containers has nothing to confirm.
    const unseen = [...unseenPods(this.view, this.statusEntry?.status?.pods ?? [], (n) => this.reachable(n)).values()].map((p) => p.node);
    const allNodes = await this.o.nodes.get(this.signal);
    const down = allNodes
      .filter((n) => !this.reachable(n.name) && (unseen.includes(n.name) || !this.o.cache.listedSinceStart(n.name)))
      .map((n) => n.name);
    if (left.some((c) => this.reachable(c.node)) || unreachable.length > 0 || down.length > 0) {
      if (unreachable.length > 0 || down.length > 0) {
        this.notes.push(`waiting for node ${[...new Set([...unreachable, ...down])].join(", ")} to confirm the removal`);
        this.wakeAt(this.now + 5_000);
      } else {
        this.wakeAt(this.now + asap);
      }
      await this.writeStatus(false);
      await this.r.deleteTasks(this.tasks);
      return this.result();
    }
    // Every node reachable and nothing cached: the relist from the engines has the last word.
    if ((await this.sweep(() => true)) > 0) {
      await this.writeStatus(false);
      return { requeueAfterMs: asap };
    }
    await this.r.deleteKeys(this.name, this.mem, this.specEntry, this.statusEntry, this.tasks);
    this.log.info("podgroup removed");
    return;
  }

  // ---- status ---------------------------------------------------------------------------------

  /** Build the status from what is observed now and write it if it changed. `intent`: before a step (R2). */
  private async writeStatus(intent: boolean): Promise<void> {
    const removing = !this.spec || this.spec.deleting === true;
    if (this.view.instances.size > 0) await this.o.nodes.get(this.signal).catch(() => undefined); // node addresses
    const status = buildStatus({
      spec: this.spec,
      removing,
      view: this.view,
      internal: this.internal,
      previous: this.statusEntry?.status,
      reachable: (n) => this.reachable(n),
      nodeAddress: (n) => this.o.nodes.address(n),
      ...(this.halted !== undefined && { halted: this.halted }),
      waitingForSecrets: this.waitingForSecrets,
      pulling: this.pulling,
      notes: this.notes,
      now: this.o.now(),
    });
    this.statusEntry = await this.r.writeStatus(this.name, this.mem, this.statusEntry, status);
    if (intent) this.log.info({ rollout: this.internal.rollout }, "rollout step recorded");
  }

  private result(): Result {
    const at = Math.min(...this.wakeups);
    return { requeueAfterMs: Math.max(asap, Math.ceil(at - this.o.now())) };
  }
}

function filterText(f: PlacementFilter): string {
  return `${f.kind === "node" ? "node" : `label:${f.key}`}${f.op}${f.value}`;
}

function deployError(e: unknown, node: string): string {
  if (e instanceof ForeignContainerError) return e.message;
  if (e instanceof NotFoundError && e.resource === "image") return `image not found on ${node}: ${e.message}`;
  if (e instanceof EngineUnavailableError) return `node ${node} did not answer: ${e.message}`;
  return `cannot deploy on ${node}: ${(e as Error).message}`;
}
