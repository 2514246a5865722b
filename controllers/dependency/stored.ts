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

const policyOf = (policy: unknown): DependencyPolicy | undefined =>
  policy === "node" || policy === 1 ? "node" : policy === "namespace" || policy === 0 ? "namespace" : undefined;

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
    const stored = json as { namespace?: unknown; pod?: { dependencies?: unknown; version?: unknown } } | null | undefined;
    if (typeof stored?.namespace === "string") namespace = stored.namespace;
    if (Number.isInteger(stored?.pod?.version)) version = stored!.pod!.version as number;
    dependencies = dependencyList(stored?.pod?.dependencies) ?? [];
  } catch {
    // whatever cannot be read references nothing
  }
  return { name, namespace, version, dependencies };
}

/** The readable entries of a stored dependency list; undefined when it is not a list. */
function dependencyList(deps: unknown): DependencyEntry[] | undefined {
  if (!Array.isArray(deps)) return undefined;
  const out: DependencyEntry[] = [];
  for (const entry of deps as { podName?: unknown; policy?: unknown }[]) {
    const policy = policyOf(entry?.policy);
    if (typeof entry?.podName === "string" && policy !== undefined) out.push({ podName: entry.podName, policy });
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
    const stored = json as { pods?: unknown } | null | undefined;
    if (Array.isArray(stored?.pods)) {
      for (const entry of stored.pods as { node?: unknown; containers?: unknown; version?: unknown; dependencies?: unknown }[]) {
        if (typeof entry?.node !== "string" || !Array.isArray(entry.containers)) continue;
        const pod: ReferencingPod = { node: entry.node, containers: entry.containers.length };
        if (Number.isInteger(entry.version)) pod.version = entry.version as number;
        // The list the pod runs with: reported as the list, or as the label value it was read from.
        const deps = typeof entry.dependencies === "string" ? decodePodDependencies(entry.dependencies) : dependencyList(entry.dependencies);
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

export function readSlotRecord(pod: DependencyPodStatus): SlotRecord | undefined {
  const verifyTime = Date.parse(pod.verifyTime);
  const deployStartedAt = Date.parse(pod.deployStartedAt);
  if (!Number.isInteger(pod.refCount) || Number.isNaN(verifyTime) || Number.isNaN(deployStartedAt)) return undefined;
  return { refCount: pod.refCount, verifyTime, deployStartedAt };
}

export function readInternal(status: DependencyStatus | undefined): Internal {
  const raw = status?.internal as Partial<Internal> | undefined;
  const slots: Record<string, SlotMemory> = {};
  if (raw?.slots && typeof raw.slots === "object") {
    for (const [slot, stored] of Object.entries(raw.slots)) {
      if (!slot.includes("|") || !stored || typeof stored !== "object") continue;
      const memory: SlotMemory = { restarts: Number.isInteger(stored.restarts) ? stored.restarts : 0, failures: Number.isInteger(stored.failures) ? stored.failures : 0 };
      if (typeof stored.nextAttemptAt === "number") memory.nextAttemptAt = stored.nextAttemptAt;
      if (typeof stored.nextDeployAt === "number") memory.nextDeployAt = stored.nextDeployAt;
      if (typeof stored.lastExit === "string") memory.lastExit = stored.lastExit;
      if (stored.lastExitPolicy === "never" || stored.lastExitPolicy === "onfail" || stored.lastExitPolicy === "always") memory.lastExitPolicy = stored.lastExitPolicy;
      if (typeof stored.lastError === "string") memory.lastError = stored.lastError;
      slots[slot] = memory;
    }
  }
  const internal: Internal = { slots };
  const step = raw?.rollout;
  if (step && typeof step.slot === "string" && Number.isInteger(step.toVersion) && (step.phase === "removing" || step.phase === "removed") && typeof step.at === "number") {
    internal.rollout = { slot: step.slot, toVersion: step.toVersion, phase: step.phase, at: step.at };
  }
  return internal;
}
