// The orchestrator's resources (docs/orchestrator.md, "The PodGroup body"): ContainerSpec, PodSpec, PodGroupSpec as the
// API accepts them, and PodGroupStatus as the PodGroup controller records it. The API and the
// controller both import from here; the schemas are the single definition (the OpenAPI document
// is generated from them).
//
// Stored forms (adapters/store keys in ./keys.ts):
//   podgroups/<name>        StoredPodGroup  = the validated spec + server-managed fields
//   podgroup-status/<name>  PodGroupStatus  written by the controller only
import { z } from "zod";
import { caseInsensitive, enumWithCodes } from "./input.ts";

/** Names of groups, pods, namespaces: DNS-label-like, up to 128 characters. */
export const namePattern = /^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$/;
export const Name = z.string().regex(namePattern, "must match [a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?");

export const restartPolicies = ["never", "always", "onfail"] as const;
export const RestartPolicy = enumWithCodes(restartPolicies, { 0: "never", 1: "always", 2: "onfail" });
export type RestartPolicy = (typeof restartPolicies)[number];

export const dependencyPolicies = ["namespace", "node"] as const;
export const DependencyPolicy = enumWithCodes(dependencyPolicies, { 0: "namespace", 1: "node" });

const EnvEntry = z.string().regex(/^[^=\0]+=[^\0]*$/, "must be KEY=VALUE");
const SystemVolume = z.string().regex(/^\/[^:\0]*:\/[^:\0]*(:(ro|rw))?$/, "must be /host/path:/container/path[:ro|:rw]");
const Volume = z.string().regex(/^(\/[^:\0]*|[a-zA-Z0-9][a-zA-Z0-9_.-]*:\/[^:\0]*)(:(ro|rw))?$/, "must be /container/path or name:/container/path[:ro|:rw]");
const SecretFile = z
  .string()
  .min(1)
  .refine((p) => !p.includes("\0") && !p.split("/").includes(".."), "must not contain '..' segments or NUL bytes");

export const ContainerSpec = z.strictObject({
  image: z.string().min(1),
  command: z.array(z.string()).optional(),
  entrypoint: z.array(z.string()).optional(),
  env: z.array(EnvEntry).optional(),
  user: z.string().optional(),
  workingDir: z.string().optional(),
  /** Cores, e.g. 0.5. Reserved on the node. */
  cpuLimit: z.number().positive().max(1024).optional(),
  /** Bytes. Reserved on the node. */
  memoryLimit: z.number().int().positive().optional(),
  /** Container port, published on a free host port. */
  expose: z.number().int().min(1).max(65535).optional(),
  /** Makes the pod stateful: it keeps its node. */
  volumes: z.array(Volume).optional(),
  systemVolumes: z.array(SystemVolume).optional(),
  logConfig: z.strictObject({ type: z.string().min(1), config: z.record(z.string(), z.string()).optional() }).optional(),
  /** Installed by Secret-sync; relative paths are under /platform/app. */
  secretFiles: z.array(SecretFile).optional(),
});
export type ContainerSpec = z.infer<typeof ContainerSpec>;

export const DependencyRef = z.strictObject({ podName: Name, policy: DependencyPolicy });

export const PodSpec = z.strictObject({
  /** Defaults to the group's name. */
  name: Name.optional(),
  namespace: Name,
  /** Server-managed: ignored on input, bumped on every spec change. */
  version: z.number().int().nonnegative().optional(),
  containers: z.array(ContainerSpec).min(1, "a pod needs at least one container").max(16),
  filters: z.array(z.string().min(1)).optional(),
  dependencies: z.array(DependencyRef).optional(),
  annotation: z.string().max(4096).optional(),
  stateful: z.boolean().optional(),
  /** Seconds a fresh container must stay running before it counts as started (0..300). */
  setupTime: z.number().int().min(0).max(300).optional(),
  /** Seconds between SIGTERM and SIGKILL on stop (10..120). */
  killTimeout: z.number().int().min(10).max(120).optional(),
  network: z.string().optional(),
});
export type PodSpec = z.infer<typeof PodSpec>;

export const PodGroupSpec = z.strictObject({
  name: Name,
  namespace: Name,
  numInstances: z.number().int().min(0).max(1000),
  /** Omitted: never, the original's zero value (docs/orchestrator.md, "The PodGroup body"). */
  restartPolicy: RestartPolicy.default("never"),
  pod: PodSpec,
  /** Server-managed: ignored on input. */
  version: z.number().int().nonnegative().optional(),
});
export type PodGroupSpec = z.infer<typeof PodGroupSpec>;

/** Parsers for request bodies: case-insensitive keys, integer enum codes, unknown keys rejected. */
export const PodGroupSpecInput = caseInsensitive(PodGroupSpec);
export const PodSpecInput = caseInsensitive(PodSpec);

/** A pod is stateful when it says so or has volumes; it then keeps its node. */
export function isStateful(pod: PodSpec): boolean {
  return pod.stateful === true || pod.containers.some((c) => (c.volumes?.length ?? 0) > 0);
}

/**
 * What the store holds at podgroups/<name>: the spec with server-managed fields filled in.
 * `pod.version` is bumped by every cmd=spec change (it is what containers are labelled with);
 * `deleting` is set by DELETE: the controller removes every instance, then deletes both keys.
 */
export interface StoredPodGroup extends PodGroupSpec {
  pod: PodSpec & { name: string; version: number };
  createdAt: string;
  updatedAt: string;
  deleting?: boolean;
  /** Bumped by GET ?force_update=true: any change makes the controller refresh at once. */
  refreshRequestedAt?: string;
  /**
   * When the last rolling restart was asked for (POST /api/podgroups/restart; RFC 3339). Containers
   * are labelled with the value they were created under; the controller replaces, one instance at
   * a time, every pod whose label differs. Not a spec change: pod.version stays.
   */
  restartedAt?: string;
}

export const podStates = ["pending", "running", "exited", "failed", "missing", "upgrading", "drifting", "removed"] as const;
export type PodState = (typeof podStates)[number];

export const groupStates = ["pending", "running", "updating", "scaling", "removing", "failed", "degraded"] as const;
export type GroupState = (typeof groupStates)[number];

export interface ContainerStatus {
  id: string;
  name: string;
  node: string;
  nodeIp: string;
  ip: string;
  hostPort?: number;
  containerPort?: number;
  status: string;
  exitCode?: number;
  startedAt?: string;
  /**
   * The container's data format (io.capstan.format), present only when it is older than the
   * current one: such a container was adopted in place and is replaced only on a version change.
   */
  format?: string;
}

/**
 * Instances are numbered from 1: a group of n runs instances 1..n (as the original platform
 * numbered them; docs/api-reference.md, PodStatus). Records and containers of releases that
 * numbered from 0 are read with one added (docs/podgroup-controller.md, "Instance numbers").
 */
export const firstInstanceNo = 1;

/** The message for an instance number below firstInstanceNo, wherever one is given. */
export const instanceNumbersFrom = "instances are numbered from 1";

/** Whether `instanceNo` is one of a group of `numInstances` instances' current ones (1..numInstances). */
export function isCurrentInstance(instanceNo: number, numInstances: number): boolean {
  return instanceNo >= firstInstanceNo && instanceNo <= numInstances;
}

/** The current instance numbers of a group of `numInstances`: 1..numInstances. */
export function instanceNumbers(numInstances: number): number[] {
  return Array.from({ length: Math.max(0, numInstances) }, (_, k) => k + firstInstanceNo);
}

/**
 * A status record as written since instances are numbered from 1 (`instanceBase: 1`): one of an
 * older release (no instanceBase, numbered from 0) has one added to every pod's instanceNo. The
 * controller rewrites the record on its next pass; readers (the API, the controller) call this.
 */
export function podsNumberedFromOne<T extends { pods: PodStatus[]; instanceBase?: number }>(status: T): T {
  if (status.instanceBase === firstInstanceNo || !Array.isArray(status.pods)) return status;
  return { ...status, instanceBase: firstInstanceNo, pods: status.pods.map((p) => ({ ...p, instanceNo: p.instanceNo + 1 })) };
}

export interface PodStatus {
  /** 1..numInstances (firstInstanceNo). */
  instanceNo: number;
  state: PodState;
  lastError: string;
  restartCount: number;
  driftCount: number;
  version: number;
  node: string;
  containers: ContainerStatus[];
  /**
   * The pod.dependencies of the version this pod runs (its containers' io.capstan.dependencies
   * label); absent when unknown (a container of an older format). The Dependency controller
   * counts references from it.
   */
  dependencies?: { podName: string; policy: "namespace" | "node" }[];
  /**
   * The instance's kept previous containers (stopped; one per container index at most): the pod a
   * rollout step or a rolling restart replaced last. Absent when there is none.
   */
  previous?: ContainerStatus[];
}

/**
 * What the store holds at podgroup-status/<name>, written by the PodGroup controller only (with
 * compare-and-swap on its modRevision). GET /api/podgroups answers {spec, ...this}.
 */
export interface PodGroupStatus {
  state: GroupState;
  lastError: string;
  updatedAt: string;
  /** Spec pod.version the controller last fully converged to. */
  observedVersion: number;
  pods: PodStatus[];
  /** 1: instanceNo counts from 1. Absent in records of releases that counted from 0 (podsNumberedFromOne). */
  instanceBase?: number;
  /** Controller bookkeeping that must survive a restart (rollout step, restart back-off, ...). */
  internal?: Record<string, unknown>;
}

/** GET /api/podgroups?name= */
export interface PodGroupWithSpec extends Omit<PodGroupStatus, "internal" | "instanceBase"> {
  spec: StoredPodGroup;
}
