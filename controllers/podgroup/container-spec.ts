// From a stored PodGroup to the engine's create request of one container of one instance. Pure.
//
// Decisions (docs/podgroup-controller.md):
// - volumes are Docker NAMED volumes scoped to the group and instance, so an instance finds its
//   data again after a spec update or a restart on the same node (stateful pods keep their node):
//     "/data"          -> <group>.i<n>[.c<k>].data-<hash6>:/data
//     "cache:/var/c"   -> <group>.i<n>[.c<k>].cache:/var/c
//   where n is the instance's volume slot, instanceNo - 1: volumes were named when instances
//   were numbered from 0, and instance k (1-based) must find the data instance k-1 wrote then.
//   The controller never removes named volumes (removal passes `volumes: true`, which only drops
//   anonymous ones, e.g. those an image declares): data outlives the group, as a
//   StatefulSet's claims do. `docker volume rm` frees it.
// - systemVolumes are host binds, passed verbatim.
// - restart policy "no": the controller restarts containers itself, with back-off and counting.
// - every container is labelled io.capstan.dependencies with its version's pod.dependencies
//   (controllers/shared/pod-dependencies.ts).
// - env gets CAPSTAN_PODGROUP, CAPSTAN_POD_NAME, CAPSTAN_POD_NAMESPACE, CAPSTAN_INSTANCE_NO.
import { patchEnv, type CreateSpec, type ResourceRequest } from "../../adapters/cluster/index.ts";
import { firstInstanceNo, type PodSpec } from "../../api/resources/podgroup.ts";
import { containerCreateSpec, containerLimits, type ContainerLimits } from "../shared/create-spec.ts";
import { volumeBind } from "../shared/volumes.ts";
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
    const l = containerLimits(c);
    memoryBytes += l.memoryBytes;
    nanoCpus += l.nanoCpus;
  }
  return { memoryBytes, nanoCpus };
}

export interface ContainerPlan {
  name: string;
  spec: CreateSpec;
  limits: ContainerLimits;
}

/** Name and create request of container `index` of instance `instance` at the group's current version. */
export function planContainer(group: StoredPodGroup, instance: number, index: number, drift: number): ContainerPlan {
  const pod = group.pod;
  const c = pod.containers[index];
  if (!c) throw new RangeError(`pod ${pod.name} has no container ${index}`);
  if (!Number.isInteger(instance) || instance < firstInstanceNo) throw new RangeError(`instance ${instance}: instances are numbered from ${firstInstanceNo}`);
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
  // Volume names scoped to <group>.i<n>[.c<k>], n = instanceNo - 1 (see the top of this file).
  const owner = `${group.name}.i${instance - firstInstanceNo}${index > 0 ? `.c${index}` : ""}`;
  const binds = [...(c.volumes ?? []).map((v) => volumeBind(owner, v)), ...(c.systemVolumes ?? [])];
  const { spec, limits } = containerCreateSpec(c, {
    env,
    // The dependency list of the version this container runs: the Dependency controller counts
    // references from it (through the status), not from the group's current spec.
    labels: { ...containerLabels({ ...ref, namespace: group.namespace, restartedAt: group.restartedAt }), [podDependenciesLabel]: encodePodDependencies(pod.dependencies ?? []) },
    binds,
    stopTimeoutSeconds: killTimeoutOf(pod),
    network: pod.network,
  });
  return { name: containerName(ref), spec, limits };
}
