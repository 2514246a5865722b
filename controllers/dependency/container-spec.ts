// From a stored dependency to the engine's create request of one container of the pod that serves
// one (node, scope). Pure.
//
// - The pod always goes to the node of the instances that need it: the node is the slot's, and
//   any node== filter of the spec means nothing here (the API ignores it for the fit check too).
//   The other filters (node!=, label:) still have to hold for that node (filtersFor).
// - volumes are Docker named volumes scoped to the dependency, scope and container, so a pod
//   finds its data again after an upgrade or a restart (volumes are per engine, so per node):
//     "/data"          -> <dep>[.N<scope>][.C<k>].data-<hash6>:/data
//     "cache:/var/c"   -> <dep>[.N<scope>][.C<k>].cache:/var/c
// - restart policy "no": the controller restarts the containers itself, with back-off.
// - env gets CAPSTAN_DEPENDENCY, CAPSTAN_POD_NAME, CAPSTAN_POD_NAMESPACE (the scope, or the
//   spec's namespace for a node-level pod) and CAPSTAN_NODE.
import { createHash } from "node:crypto";
import { patchEnv, type CreateSpec, type PlacementFilter } from "../../adapters/cluster/index.ts";
import { containerLabels, containerName, volumeOwner, type Slot } from "./naming.ts";
import type { StoredDependency } from "./stored.ts";

export const defaultKillTimeoutSeconds = 10;

export function killTimeoutOf(spec: Pick<StoredDependency, "killTimeout">): number {
  return spec.killTimeout ?? defaultKillTimeoutSeconds;
}

/** The spec's filters that apply to a dependency pod: every one but node==. */
export function filtersFor(filters: readonly PlacementFilter[]): PlacementFilter[] {
  return filters.filter((f) => !(f.kind === "node" && f.op === "=="));
}

const namedVolume = /^([a-zA-Z0-9][a-zA-Z0-9_.-]*):(\/[^:]*)(?::(ro|rw))?$/;
const pathVolume = /^(\/[^:]*)(?::(ro|rw))?$/;

export function volumeBind(dependency: string, scope: string, index: number, volume: string): string {
  const owner = volumeOwner(dependency, scope, index);
  const named = namedVolume.exec(volume);
  if (named) return `${owner}.${named[1]}:${named[2]}${named[3] ? `:${named[3]}` : ""}`;
  const path = pathVolume.exec(volume);
  if (!path) throw new TypeError(`volume ${JSON.stringify(volume)} is neither /path nor name:/path`);
  const p = path[1]!;
  const slug = p.replace(/^\/+/, "").replace(/[^a-zA-Z0-9_.-]+/g, "_").slice(0, 40) || "root";
  const hash = createHash("sha256").update(p).digest("hex").slice(0, 6);
  return `${owner}.${slug}-${hash}:${p}${path[2] ? `:${path[2]}` : ""}`;
}

export interface ContainerPlan {
  name: string;
  spec: CreateSpec;
  limits: { memoryBytes: number; nanoCpus: number };
}

/** Name and create request of container `index` of the pod serving `slot`, at the spec's version. */
export function planContainer(dep: StoredDependency, slot: Slot, index: number): ContainerPlan {
  const c = dep.containers[index];
  if (!c) throw new RangeError(`dependency ${dep.name} has no container ${index}`);
  const ref = { dependency: dep.name, node: slot.node, scope: slot.scope, version: dep.version, index };
  let env = [...(c.env ?? [])];
  for (const [k, v] of [
    ["CAPSTAN_DEPENDENCY", dep.name],
    ["CAPSTAN_POD_NAME", dep.name],
    ["CAPSTAN_POD_NAMESPACE", slot.scope || dep.namespace],
    ["CAPSTAN_NODE", slot.node],
  ] as const) {
    env = patchEnv(env, k, v);
  }
  const binds = [...(c.volumes ?? []).map((v) => volumeBind(dep.name, slot.scope, index, v)), ...(c.systemVolumes ?? [])];
  const limits = { memoryBytes: c.memoryLimit ?? 0, nanoCpus: Math.round((c.cpuLimit ?? 0) * 1e9) };
  const spec: CreateSpec = {
    image: c.image,
    env,
    labels: containerLabels(ref),
    restartPolicy: { name: "no" },
    stopTimeoutSeconds: killTimeoutOf(dep),
  };
  if (c.command) spec.cmd = [...c.command];
  if (c.entrypoint) spec.entrypoint = [...c.entrypoint];
  if (c.user !== undefined) spec.user = c.user;
  if (c.workingDir !== undefined) spec.workingDir = c.workingDir;
  if (limits.memoryBytes > 0) spec.memoryBytes = limits.memoryBytes;
  if (limits.nanoCpus > 0) spec.nanoCpus = limits.nanoCpus;
  if (binds.length > 0) spec.binds = binds;
  if (dep.network !== undefined && dep.network !== "") spec.networkMode = dep.network;
  if (c.expose !== undefined) spec.expose = [{ containerPort: c.expose }];
  if (c.logConfig) spec.logConfig = { type: c.logConfig.type, ...(c.logConfig.config && { config: { ...c.logConfig.config } }) };
  return { name: containerName(ref), spec, limits };
}

/** Delay before restart attempt number `failures` (1-based): `initialMs` doubling up to `maxMs`. */
export function restartDelayMs(failures: number, b: { initialMs: number; maxMs: number }): number {
  return Math.min(b.maxMs, b.initialMs * 2 ** Math.min(Math.max(1, failures) - 1, 60));
}
