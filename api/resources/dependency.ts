// Dependencies (docs/dependencies.md): a pod that must run on the
// same node as the PodGroup instances that list it in pod.dependencies. The API stores the
// definition only; the Dependency controller deploys one pod per (node, scope) on demand, where
// scope is the group's namespace for policy "namespace" and "" (shared by every namespace on the
// node) for policy "node", counts references and reclaims unreferenced pods after the GC time.
//
// Stored forms (layout below; the same keys as api/resources/keys.ts under any root):
//   depends/<name>        StoredDependency    written by the API
//   depend-status/<name>  DependencyStatus    written by the Dependency controller only
import type { z } from "zod";
import { orchestratorPrefix } from "./keys.ts";
import { caseInsensitive } from "./input.ts";
import { Name, PodSpec, type ContainerStatus } from "./podgroup.ts";

/**
 * A dependency's definition: a PodSpec whose name is required (it is the dependency's name, the
 * one PodGroups list as podName). A dependency has no dependencies of its own: the field is
 * refused as unknown, since nothing would deploy them.
 */
export const DependencySpec = PodSpec.omit({ dependencies: true }).extend({ name: Name });
export type DependencySpec = z.infer<typeof DependencySpec>;

/** Request bodies of POST and PUT: case-insensitive keys, unknown fields refused by name. */
export const DependencySpecInput = caseInsensitive(DependencySpec);

/**
 * What the store holds at depends/<name>. `version` starts at 1 and is bumped by every PUT that
 * changes the pod (dependency containers are labelled with it, and a new version is rolled out
 * one pod at a time). `deleting` is set by DELETE: the controller removes every pod (killing them
 * at once when `force`), then deletes both keys.
 */
export interface StoredDependency extends DependencySpec {
  version: number;
  createdAt: string;
  updatedAt: string;
  deleting?: { force: boolean };
}

export const dependencyPodStates = ["pending", "running", "exited", "failed", "missing", "upgrading", "unknown"] as const;
export type DependencyPodState = (typeof dependencyPodStates)[number];

export const dependencyStates = ["idle", "pending", "running", "updating", "degraded", "removing"] as const;
export type DependencyState = (typeof dependencyStates)[number];

/** One dependency pod: the one that serves `namespace` ("" = every namespace) on `node`. */
export interface DependencyPodStatus {
  node: string;
  /** The PodGroup namespace this pod serves; "" for a node-level pod shared by every namespace. */
  namespace: string;
  /** Running PodGroup instances on this node (and namespace) that list the dependency. */
  refCount: number;
  /** RFC 3339: the last add, remove or verify (a refresh while referenced). */
  verifyTime: string;
  /** RFC 3339: when this pod was first deployed (or adopted). */
  deployStartedAt: string;
  /** RFC 3339, only while refCount is 0: when the pod is reclaimed unless referenced again. */
  reclaimAt?: string;
  state: DependencyPodState;
  /** The dependency version the pod's containers run (the spec's while it has none). */
  version: number;
  /** Restarts since the pod got its current version. */
  restartCount: number;
  lastError: string;
  containers: ContainerStatus[];
}

/**
 * What the store holds at depend-status/<name>, written by the Dependency controller only (with
 * compare-and-swap on its modRevision, and only when it changed). refCount, verifyTime and
 * deployStartedAt are the controller's memory across restarts: the garbage collection decides
 * from them, so a restarted orchestrator reclaims nothing early.
 */
export interface DependencyStatus {
  state: DependencyState;
  lastError: string;
  updatedAt: string;
  /** One entry per (node, namespace), sorted by node, then namespace. */
  pods: DependencyPodStatus[];
  /** Controller bookkeeping that must survive a restart (rollout step, restart back-off). */
  internal?: Record<string, unknown>;
}

/** GET /api/depends?name= : the definition ("PodSpec") and the runtime data of every pod. */
export interface DependencyWithStatus extends Omit<DependencyStatus, "internal"> {
  spec: StoredDependency;
}

/** The dependency keys under any root (the API and the controller share it; tests use a unique root). */
export function dependencyLayout(root: string = orchestratorPrefix) {
  const r = root.endsWith("/") ? root : `${root}/`;
  return {
    root: r,
    depends: `${r}depends/`,
    status: `${r}depend-status/`,
    podGroups: `${r}podgroups/`,
    podGroupStatus: `${r}podgroup-status/`,
    dependency: (name: string) => `${r}depends/${name}`,
    statusOf: (name: string) => `${r}depend-status/${name}`,
  };
}
export type DependencyLayout = ReturnType<typeof dependencyLayout>;
