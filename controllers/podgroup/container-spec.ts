// From a stored PodGroup to the engine's create request of one container of one instance. Pure.
//
// Decisions (docs/podgroup-controller.md):
// - volumes are Docker NAMED volumes scoped to the group and instance, so an instance finds its
//   data again after a spec update or a restart on the same node (stateful pods keep their node):
//     "/data"          -> <group>.i<n>[.c<k>].data-<hash6>:/data
//     "cache:/var/c"   -> <group>.i<n>[.c<k>].cache:/var/c
//   The controller never removes named volumes (removal passes `volumes: true`, which only drops
//   anonymous ones, e.g. those an image declares): data outlives the group, as a
//   StatefulSet's claims do. `docker volume rm` frees it.
// - systemVolumes are host binds, passed verbatim.
// - restart policy "no": the controller restarts containers itself, with back-off and counting.
// - every container is labelled io.capstan.dependencies with its version's pod.dependencies
//   (controllers/shared/pod-dependencies.ts).
// - env gets CAPSTAN_PODGROUP, CAPSTAN_POD_NAME, CAPSTAN_POD_NAMESPACE, CAPSTAN_INSTANCE_NO.
import { createHash } from "node:crypto";
import { patchEnv, type CreateSpec, type ResourceRequest } from "../../adapters/cluster/index.ts";
import type { ContainerSpec, PodSpec } from "../../api/resources/podgroup.ts";
import { encodePodDependencies, podDependenciesLabel } from "../shared/pod-dependencies.ts";
import { containerLabels, containerName } from "./naming.ts";
import type { StoredPodGroup } from "./stored.ts";

/** Docker's default stop grace, and the spec's lower bound for killTimeout. */
export const defaultKillTimeoutSeconds = 10;

export function killTimeoutOf(pod: PodSpec): number {
  return pod.killTimeout ?? defaultKillTimeoutSeconds;
}

/** What the pod reserves on its node: the sum over its containers (placement counts the whole pod). */
export function podRequest(pod: PodSpec): ResourceRequest {
  let memoryBytes = 0;
  let nanoCpus = 0;
  for (const c of pod.containers) {
    memoryBytes += c.memoryLimit ?? 0;
    nanoCpus += Math.round((c.cpuLimit ?? 0) * 1e9);
  }
  return { memoryBytes, nanoCpus };
}

export function containerLimits(c: ContainerSpec): { memoryBytes: number; nanoCpus: number } {
  return { memoryBytes: c.memoryLimit ?? 0, nanoCpus: Math.round((c.cpuLimit ?? 0) * 1e9) };
}

const namedVolume = /^([a-zA-Z0-9][a-zA-Z0-9_.-]*):(\/[^:]*)(?::(ro|rw))?$/;
const pathVolume = /^(\/[^:]*)(?::(ro|rw))?$/;

/** The bind entry for one declared volume of container `index` of `instance`. */
export function volumeBind(group: string, instance: number, index: number, volume: string): string {
  const scope = `${group}.i${instance}${index > 0 ? `.c${index}` : ""}`;
  const named = namedVolume.exec(volume);
  if (named) return `${scope}.${named[1]}:${named[2]}${named[3] ? `:${named[3]}` : ""}`;
  const path = pathVolume.exec(volume);
  if (!path) throw new TypeError(`volume ${JSON.stringify(volume)} is neither /path nor name:/path`);
  const p = path[1]!;
  const slug = p.replace(/^\/+/, "").replace(/[^a-zA-Z0-9_.-]+/g, "_").slice(0, 40) || "root";
  const hash = createHash("sha256").update(p).digest("hex").slice(0, 6);
  return `${scope}.${slug}-${hash}:${p}${path[2] ? `:${path[2]}` : ""}`;
}

export interface ContainerPlan {
  name: string;
  spec: CreateSpec;
  limits: { memoryBytes: number; nanoCpus: number };
}

/** Name and create request of container `index` of instance `instance` at the group's current version. */
export function planContainer(group: StoredPodGroup, instance: number, index: number, drift: number): ContainerPlan {
  const pod = group.pod;
  const c = pod.containers[index];
  if (!c) throw new RangeError(`pod ${pod.name} has no container ${index}`);
  const ref = { group: group.name, instance, version: pod.version, drift, index };
  let env = [...(c.env ?? [])];
  for (const [k, v] of [
    ["CAPSTAN_PODGROUP", group.name],
    ["CAPSTAN_POD_NAME", pod.name],
    ["CAPSTAN_POD_NAMESPACE", pod.namespace],
    ["CAPSTAN_INSTANCE_NO", String(instance)],
  ] as const) {
    env = patchEnv(env, k, v);
  }
  const binds = [...(c.volumes ?? []).map((v) => volumeBind(group.name, instance, index, v)), ...(c.systemVolumes ?? [])];
  const limits = containerLimits(c);
  const spec: CreateSpec = {
    image: c.image,
    env,
    // The dependency list of the version this container runs: the Dependency controller counts
    // references from it (through the status), not from the group's current spec.
    labels: { ...containerLabels({ ...ref, namespace: group.namespace }), [podDependenciesLabel]: encodePodDependencies(pod.dependencies ?? []) },
    restartPolicy: { name: "no" },
    stopTimeoutSeconds: killTimeoutOf(pod),
  };
  if (c.command) spec.cmd = [...c.command];
  if (c.entrypoint) spec.entrypoint = [...c.entrypoint];
  if (c.user !== undefined) spec.user = c.user;
  if (c.workingDir !== undefined) spec.workingDir = c.workingDir;
  if (limits.memoryBytes > 0) spec.memoryBytes = limits.memoryBytes;
  if (limits.nanoCpus > 0) spec.nanoCpus = limits.nanoCpus;
  if (binds.length > 0) spec.binds = binds;
  if (pod.network !== undefined && pod.network !== "") spec.networkMode = pod.network;
  if (c.expose !== undefined) spec.expose = [{ containerPort: c.expose }];
  if (c.logConfig) spec.logConfig = { type: c.logConfig.type, ...(c.logConfig.config && { config: { ...c.logConfig.config } }) };
  return { name: containerName(ref), spec, limits };
}
