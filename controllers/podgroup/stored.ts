// What the controller reads from and writes to the store: the key layout under a root prefix, the
// decoding of stored specs, statuses and tasks, and the controller's own bookkeeping kept in
// status.internal so that it survives a restart.
//
// Decoding never throws: a value the controller cannot read is kept as "invalid" with its
// modRevision. That matters for safety: a spec that fails to decode must not look like a deleted
// spec (which would remove the group's containers), and a garbage status must still be
// overwritable by compare-and-swap.
import { z } from "zod";
import { firstInstanceNo, Name, PodGroupSpec, PodSpec, podsNumberedFromOne, type PodGroupStatus } from "../../api/resources/podgroup.ts";
import { orchestratorPrefix } from "../../api/resources/keys.ts";
import type { DriftTask, RefreshTask, Task } from "../../api/resources/task.ts";
import type { RestartRecord } from "../shared/backoff.ts";
import { decodeSpecRecord, lastSegment, type KeyValueRecord, type SpecRecord } from "../shared/spec-records.ts";
import { decodeStatusRecord, type StatusRecord } from "../shared/status-records.ts";

/** The key layout of api/resources/keys.ts under any root (tests use a unique one per run). */
export function layout(root: string = orchestratorPrefix) {
  const r = root.endsWith("/") ? root : `${root}/`;
  return {
    root: r,
    podGroups: `${r}podgroups/`,
    status: `${r}podgroup-status/`,
    tasks: `${r}tasks/`,
    podGroup: (name: string) => `${r}podgroups/${name}`,
    statusOf: (name: string) => `${r}podgroup-status/${name}`,
    /** The group's stored pod versions (the API writes them; docs/orchestrator.md, "Spec history"). */
    historyOf: (name: string) => `${r}podgroup-history/${name}/`,
  };
}
export type Layout = ReturnType<typeof layout>;

/** The stored form (StoredPodGroup of api/resources/podgroup.ts); unknown top-level keys are ignored. */
export const StoredPodGroupSchema = z.object({
  ...PodGroupSpec.shape,
  pod: PodSpec.extend({ name: Name, version: z.number().int().min(1) }),
  createdAt: z.string(),
  updatedAt: z.string(),
  deleting: z.boolean().optional(),
  refreshRequestedAt: z.string().optional(),
  /** Set by POST /api/podgroups/restart: pods created under another value are rolled (absent in older records). */
  restartedAt: z.string().optional(),
});
export type StoredPodGroup = z.infer<typeof StoredPodGroupSchema>;

export type SpecEntry = SpecRecord<StoredPodGroup>;

export type StatusEntry = StatusRecord<PodGroupStatus>;

export interface TaskEntry {
  key: string;
  task: Task | undefined;
  modRevision: number;
}

export function decodeSpec(kv: KeyValueRecord): SpecEntry {
  return decodeSpecRecord(kv, StoredPodGroupSchema);
}

/**
 * What a value, as parsed once for several readers (cli/orchestrator.ts), says to JSON.parse: the
 * parsed value, or the message of the error it threw.
 */
export type ParsedValue = { json: unknown } | { error: string };

/** decodeSpec of a value already parsed: the same entry (decodeSpecRecord's rules). */
export function specOf(kv: { key: string; modRevision: number }, parsed: ParsedValue): SpecEntry {
  const name = lastSegment(kv.key);
  const invalid = (reason: string): SpecEntry => ({ name, spec: undefined, invalid: reason, modRevision: kv.modRevision });
  if ("error" in parsed) return invalid(`not JSON: ${parsed.error}`);
  const result = StoredPodGroupSchema.safeParse(parsed.json);
  if (!result.success) {
    const issue = result.error.issues[0];
    return invalid(`${issue?.path.join(".") || "value"}: ${issue?.message}`);
  }
  if (result.data.name !== name) return invalid(`stored name ${result.data.name} differs from its key`);
  return { name, spec: result.data, modRevision: kv.modRevision };
}

export function decodeStatus(kv: KeyValueRecord): StatusEntry {
  const entry = decodeStatusRecord<PodGroupStatus>(kv);
  return entry.status ? { ...entry, status: numberedFromOne(entry.status) } : entry;
}

/**
 * A status record with instances numbered from 1 (api/resources/podgroup.ts, firstInstanceNo).
 * Invariant: a record without `instanceBase: 1` was written by a release that numbered from 0, and
 * every instance number in it (pods' instanceNo, the keys of internal.instances, the rollout
 * step's instance) gets one added, once, here where every reader decodes it; the next write
 * carries `instanceBase: 1`.
 */
export function numberedFromOne(status: PodGroupStatus): PodGroupStatus {
  if (status.instanceBase === firstInstanceNo) return status;
  const raw = status.internal as { instances?: unknown; rollout?: { instance?: unknown } } | undefined;
  let internal = status.internal;
  if (raw && typeof raw === "object") {
    const instances =
      raw.instances && typeof raw.instances === "object"
        ? Object.fromEntries(Object.entries(raw.instances).map(([k, v]) => [/^\d+$/.test(k) ? String(Number(k) + 1) : k, v]))
        : raw.instances;
    const rollout =
      raw.rollout && typeof raw.rollout === "object" && Number.isInteger(raw.rollout.instance)
        ? { ...raw.rollout, instance: (raw.rollout.instance as number) + 1 }
        : raw.rollout;
    internal = { ...raw, ...(instances !== undefined && { instances }), ...(rollout !== undefined && { rollout }) };
  }
  return podsNumberedFromOne({ ...status, ...(internal !== undefined && { internal }) });
}

/** decodeStatus of a value already parsed (undefined when it did not parse): the same entry (decodeStatusRecord's rule). */
export function statusOf(kv: { key: string; modRevision: number }, json: unknown): StatusEntry {
  const v = json as Partial<PodGroupStatus> | null | undefined;
  const status = v && typeof v === "object" && typeof v.state === "string" && Array.isArray(v.pods) ? numberedFromOne(v as PodGroupStatus) : undefined;
  return { name: lastSegment(kv.key), status, modRevision: kv.modRevision };
}

/** A task this controller can carry out; anything else (malformed, another kind) decodes as undefined. */
export function decodeTask(kv: { key: string; value: string; modRevision: number }): TaskEntry {
  let task: Task | undefined;
  try {
    const v = JSON.parse(kv.value) as Partial<RefreshTask> | Partial<DriftTask> | null;
    if (v?.kind === "refresh" && typeof v.podGroup === "string") task = v as RefreshTask;
    if (v?.kind === "drift") task = decodeDrift(v, lastSegment(kv.key));
  } catch {
    task = undefined;
  }
  return { key: kv.key, task, modRevision: kv.modRevision };
}

function decodeDrift(v: Partial<DriftTask>, id: string): DriftTask | undefined {
  if (typeof v.from !== "string" || v.from === "") return undefined;
  if (v.to !== undefined && typeof v.to !== "string") return undefined;
  if (v.podGroup !== undefined && typeof v.podGroup !== "string") return undefined;
  // Numbered from 1 (instanceBase 1) an instance is at least 1; numbered from 0, at least 0.
  const lowest = v.instanceBase === firstInstanceNo ? firstInstanceNo : 0;
  if (v.instance !== undefined && !(Number.isInteger(v.instance) && v.instance >= lowest && v.podGroup !== undefined)) return undefined;
  const task: DriftTask = {
    id,
    kind: "drift",
    from: v.from,
    force: v.force === true,
    reason: v.reason === "node-timeout" ? "node-timeout" : "request",
    createdAt: typeof v.createdAt === "string" ? v.createdAt : "",
  };
  if (v.to) task.to = v.to;
  if (v.podGroup) task.podGroup = v.podGroup;
  // A task written before instances were numbered from 1 has no instanceBase: its instance + 1.
  if (v.instance !== undefined) task.instance = v.instanceBase === firstInstanceNo ? v.instance : v.instance + 1;
  return task;
}

// ---- status.internal ----------------------------------------------------------------------------

/** The one instance a spec update is replacing right now (one at a time). */
export interface RolloutStep {
  instance: number;
  toVersion: number;
  /** "removing": the old pod is being removed; "removed": it is gone since `at` (wait, then deploy). */
  phase: "removing" | "removed";
  /** Wall-clock ms of the phase change. */
  at: number;
  /** The step replaces a pod of the current version for a rolling restart (its halt says so). */
  restart?: boolean;
}

/** Per-instance memory: restart counting and back-off (RestartRecord), a stateful pod's node, drift. */
export interface InstanceRecord extends RestartRecord {
  /** Stateful pods: the node the instance lives on. */
  node?: string;
  /** The instance's drift count: a pod deployed for it carries this (the highest drift wins in classify). */
  drift?: number;
  /** A drift in progress (R6: recorded before the pod on `from` is removed); cleared once the new pod exists. */
  move?: DriftMove;
}

/** One instance's move off a node, for a drift task. */
export interface DriftMove {
  /** The drift task's id. */
  task: string;
  from: string;
  /** Absent: any node but `from`. */
  to?: string;
  /** The drift count of the new pod (the old pod's + 1). */
  drift: number;
}

export interface Internal {
  rollout?: RolloutStep;
  instances: Record<string, InstanceRecord>;
}

export function readInternal(status: PodGroupStatus | undefined): Internal {
  const raw = status?.internal as Partial<Internal> | undefined;
  const instances: Record<string, InstanceRecord> = {};
  if (raw?.instances && typeof raw.instances === "object") {
    for (const [k, v] of Object.entries(raw.instances)) {
      if (!/^\d+$/.test(k) || !v || typeof v !== "object") continue;
      const r = v as Partial<InstanceRecord>;
      const rec: InstanceRecord = {
        restarts: Number.isInteger(r.restarts) ? r.restarts! : 0,
        failures: Number.isInteger(r.failures) ? r.failures! : 0,
      };
      if (typeof r.nextAttemptAt === "number") rec.nextAttemptAt = r.nextAttemptAt;
      if (typeof r.nextDeployAt === "number") rec.nextDeployAt = r.nextDeployAt;
      if (typeof r.lastExit === "string") rec.lastExit = r.lastExit;
      if (r.lastExitPolicy === "never" || r.lastExitPolicy === "onfail" || r.lastExitPolicy === "always") rec.lastExitPolicy = r.lastExitPolicy;
      if (typeof r.lastError === "string") rec.lastError = r.lastError;
      if (typeof r.node === "string") rec.node = r.node;
      if (Number.isInteger(r.drift) && r.drift! >= 0) rec.drift = r.drift!;
      const m = r.move;
      if (m && typeof m.task === "string" && typeof m.from === "string" && Number.isInteger(m.drift) && (m.to === undefined || typeof m.to === "string")) {
        rec.move = { task: m.task, from: m.from, drift: m.drift, ...(m.to !== undefined && { to: m.to }) };
      }
      instances[k] = rec;
    }
  }
  const internal: Internal = { instances };
  const ro = raw?.rollout;
  if (
    ro &&
    Number.isInteger(ro.instance) &&
    Number.isInteger(ro.toVersion) &&
    (ro.phase === "removing" || ro.phase === "removed") &&
    typeof ro.at === "number"
  ) {
    internal.rollout = { instance: ro.instance, toVersion: ro.toVersion, phase: ro.phase, at: ro.at, ...(ro.restart === true && { restart: true }) };
  }
  return internal;
}
