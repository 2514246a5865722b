// What the Dependency controller reads from the store: dependency specs and statuses, and the few
// fields of PodGroup specs and statuses that references are derived from; and its own bookkeeping
// kept in the status so that it survives a restart.
//
// Decoding never throws: a dependency spec that cannot be read is kept as "invalid" (it must not
// look deleted, which would remove its pods); PodGroup records are read leniently, field by field.
import { z } from "zod";
import { DependencySpec, type DependencyPodStatus, type DependencyStatus } from "../../api/resources/dependency.ts";
import { decodePodDependencies } from "../shared/pod-dependencies.ts";
import type { RestartRecord } from "../shared/backoff.ts";
import { decodeSpecRecord, lastSegment, type KeyValueRecord, type SpecRecord } from "../shared/spec-records.ts";
import { decodeStatusRecord, type StatusRecord } from "../shared/status-records.ts";
import type { DependencyEntry, DependencyPolicy, GroupReferenceInput, ReferencingPod } from "./references.ts";

/** The stored form (StoredDependency of api/resources/dependency.ts); unknown top-level keys are ignored. */
export const StoredDependencySchema = z.object({
  ...DependencySpec.shape,
  version: z.number().int().min(1),
  createdAt: z.string(),
  updatedAt: z.string(),
  deleting: z.object({ force: z.boolean() }).optional(),
});
export type StoredDependency = z.infer<typeof StoredDependencySchema>;

export type SpecEntry = SpecRecord<StoredDependency>;

export function decodeSpec(kv: KeyValueRecord): SpecEntry {
  return decodeSpecRecord(kv, StoredDependencySchema);
}

export type StatusEntry = StatusRecord<DependencyStatus>;

export function decodeStatus(kv: KeyValueRecord): StatusEntry {
  return decodeStatusRecord<DependencyStatus>(kv);
}

// ---- PodGroup records, as far as references need them ------------------------------------------

export interface GroupSpecEntry {
  name: string;
  namespace: string;
  /** pod.version (0 when unreadable). */
  version: number;
  dependencies: DependencyEntry[];
}

export interface GroupStatusEntry {
  name: string;
  pods: ReferencingPod[];
}

const policyOf = (p: unknown): DependencyPolicy | undefined =>
  p === "node" || p === 1 ? "node" : p === "namespace" || p === 0 ? "namespace" : undefined;

export function decodeGroupSpec(kv: KeyValueRecord): GroupSpecEntry {
  let json: unknown;
  try {
    json = JSON.parse(kv.value);
  } catch {
    // an unreadable group references nothing (the PodGroup controller deploys nothing for it either)
  }
  return groupSpecOf(kv.key, json);
}

/** decodeGroupSpec of a value already parsed (undefined when it did not parse). */
export function groupSpecOf(key: string, json: unknown): GroupSpecEntry {
  const name = lastSegment(key);
  let dependencies: DependencyEntry[] = [];
  let namespace = "";
  let version = 0;
  try {
    const v = json as { namespace?: unknown; pod?: { dependencies?: unknown; version?: unknown } } | null | undefined;
    if (typeof v?.namespace === "string") namespace = v.namespace;
    if (Number.isInteger(v?.pod?.version)) version = v!.pod!.version as number;
    dependencies = dependencyList(v?.pod?.dependencies) ?? [];
  } catch {
    // whatever cannot be read references nothing
  }
  return { name, namespace, version, dependencies };
}

/** The readable entries of a stored dependency list; undefined when it is not a list. */
function dependencyList(deps: unknown): DependencyEntry[] | undefined {
  if (!Array.isArray(deps)) return undefined;
  const out: DependencyEntry[] = [];
  for (const d of deps as { podName?: unknown; policy?: unknown }[]) {
    const policy = policyOf(d?.policy);
    if (typeof d?.podName === "string" && policy !== undefined) out.push({ podName: d.podName, policy });
  }
  return out;
}

export function decodeGroupStatus(kv: KeyValueRecord): GroupStatusEntry {
  let json: unknown;
  try {
    json = JSON.parse(kv.value);
  } catch {
    // no readable instances: no references
  }
  return groupStatusOf(kv.key, json);
}

/** decodeGroupStatus of a value already parsed (undefined when it did not parse). */
export function groupStatusOf(key: string, json: unknown): GroupStatusEntry {
  const name = lastSegment(key);
  const pods: GroupStatusEntry["pods"] = [];
  try {
    const v = json as { pods?: unknown } | null | undefined;
    if (Array.isArray(v?.pods)) {
      for (const p of v.pods as { node?: unknown; containers?: unknown; version?: unknown; dependencies?: unknown }[]) {
        if (typeof p?.node !== "string" || !Array.isArray(p.containers)) continue;
        const pod: ReferencingPod = { node: p.node, containers: p.containers.length };
        if (Number.isInteger(p.version)) pod.version = p.version as number;
        // The list the pod runs with: reported as the list, or as the label value it was read from.
        const deps = typeof p.dependencies === "string" ? decodePodDependencies(p.dependencies) : dependencyList(p.dependencies);
        if (deps) pod.dependencies = deps;
        pods.push(pod);
      }
    }
  } catch {
    // no readable instances: no references
  }
  return { name, pods };
}

export function referenceInput(
  spec: GroupSpecEntry,
  status: GroupStatusEntry | undefined,
  history?: ReadonlyMap<number, readonly DependencyEntry[]>,
): GroupReferenceInput {
  return { namespace: spec.namespace, dependencies: spec.dependencies, pods: status?.pods ?? [], ...(history && { history }) };
}

// ---- the controller's memory, in the status ------------------------------------------------------

/** What the garbage collection decides from, per pod; kept in the status's pod entries. */
export interface SlotRecord {
  refCount: number;
  /** Wall-clock ms. */
  verifyTime: number;
  deployStartedAt: number;
}

/** Restart and redeploy back-off per pod (status.internal.slots). */
export type SlotMemory = RestartRecord;

/** The one pod a spec update (or a format upgrade) is replacing right now. */
export interface RolloutStep {
  slot: string;
  toVersion: number;
  /** "removing": the old pod is being removed; "removed": it is gone since `at` (wait, then deploy). */
  phase: "removing" | "removed";
  at: number;
}

export interface Internal {
  rollout?: RolloutStep;
  slots: Record<string, SlotMemory>;
}

export function readSlotRecord(p: DependencyPodStatus): SlotRecord | undefined {
  const verifyTime = Date.parse(p.verifyTime);
  const deployStartedAt = Date.parse(p.deployStartedAt);
  if (!Number.isInteger(p.refCount) || Number.isNaN(verifyTime) || Number.isNaN(deployStartedAt)) return undefined;
  return { refCount: p.refCount, verifyTime, deployStartedAt };
}

export function readInternal(status: DependencyStatus | undefined): Internal {
  const raw = status?.internal as Partial<Internal> | undefined;
  const slots: Record<string, SlotMemory> = {};
  if (raw?.slots && typeof raw.slots === "object") {
    for (const [k, v] of Object.entries(raw.slots)) {
      if (!k.includes("|") || !v || typeof v !== "object") continue;
      const m: SlotMemory = { restarts: Number.isInteger(v.restarts) ? v.restarts : 0, failures: Number.isInteger(v.failures) ? v.failures : 0 };
      if (typeof v.nextAttemptAt === "number") m.nextAttemptAt = v.nextAttemptAt;
      if (typeof v.nextDeployAt === "number") m.nextDeployAt = v.nextDeployAt;
      if (typeof v.lastExit === "string") m.lastExit = v.lastExit;
      if (v.lastExitPolicy === "never" || v.lastExitPolicy === "onfail" || v.lastExitPolicy === "always") m.lastExitPolicy = v.lastExitPolicy;
      if (typeof v.lastError === "string") m.lastError = v.lastError;
      slots[k] = m;
    }
  }
  const internal: Internal = { slots };
  const ro = raw?.rollout;
  if (ro && typeof ro.slot === "string" && Number.isInteger(ro.toVersion) && (ro.phase === "removing" || ro.phase === "removed") && typeof ro.at === "number") {
    internal.rollout = { slot: ro.slot, toVersion: ro.toVersion, phase: ro.phase, at: ro.at };
  }
  return internal;
}
