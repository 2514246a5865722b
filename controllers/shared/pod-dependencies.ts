// The dependency list a PodGroup pod runs with, as a container label. The PodGroup controller
// labels each container it creates with the list of the spec version it creates it from, and
// reports it per pod in its status; the Dependency controller counts references from it. A pod
// keeps counting the dependencies of the version it RUNS, not of the group's current spec: a
// spec update that drops a dependency must not let the old version's instances lose their
// dependency pod before they are replaced (review finding 3).
//
//   io.capstan.dependencies = "<podName>:<policy>[,<podName>:<policy>...]"   ("" = none)
//
// podName is a Name ([a-z0-9._-]) and policy is "node" or "namespace", so neither "," nor ":"
// appears inside an entry. Pure.
import { namePattern } from "../../api/resources/podgroup.ts";

export const podDependenciesLabel = "io.capstan.dependencies";

export type PodDependencyPolicy = "namespace" | "node";

export interface PodDependency {
  podName: string;
  policy: PodDependencyPolicy;
}

export function encodePodDependencies(deps: readonly PodDependency[]): string {
  return deps.map((d) => `${d.podName}:${d.policy}`).join(",");
}

/** The list a label value carries, or undefined when the value is malformed (then nothing can be trusted). */
export function decodePodDependencies(value: string): PodDependency[] | undefined {
  if (value === "") return [];
  const out: PodDependency[] = [];
  for (const part of value.split(",")) {
    const i = part.lastIndexOf(":");
    const podName = part.slice(0, i);
    const policy = part.slice(i + 1);
    if (i < 0 || !namePattern.test(podName) || (policy !== "node" && policy !== "namespace")) return undefined;
    out.push({ podName, policy });
  }
  return out;
}
