// How a PodGroup's containers are named and labelled (docs/podgroup-controller.md, "Containers:
// names, labels, create request"), and how a container found on an engine is traced back to
// (group, instance, version, drift, container index) without the store. Pure functions.
//
//   name    <podgroup>.v<version>-i<instance>-d<drift>, plus -c<index> for the 2nd+ container
//   labels  io.capstan.podgroup, .namespace, .instance, .version, .drift, .container-index, .format
//
// A container that carries io.capstan.podgroup but not io.capstan.format=2 is of an older data
// format: its fields come from its labels where present, else from its name. Labels cannot be
// added to an existing container, so it keeps that format for life; the controller adopts it in
// place (renames it to the current name form) and replaces it only when its version is stale.
// A container without io.capstan.podgroup is not ours, whatever its name (never touched).
//
// Instances are numbered from 1 (1..numInstances), as the original platform numbered them.
// Releases before this one numbered them from 0. Invariant: a container labelled
// io.capstan.numbering=1 holds its instanceNo in its labels (and name) as is; a container without
// that label (older format or not) was created under the 0-based numbering, and identify() adds
// one to the number its label (or name) holds. Labels are fixed for a container's life, so the
// answer is the same on every pass, before and after the rename to the current name form. The
// one exception is a container whose instance is in its name only (no instance label): renaming
// it would change what is read, so it keeps its name (instanceFromName; planRenames skips it), and
// that name is the one the instance below it needs: such a pod is never current (plan-rollout.ts
// podCurrent), the rollout replaces it, highest instance first, and a missing instance whose name
// it holds is deployed under the next drift count (reconciler.ts freeDrift).
// A kept previous container (controllers/shared/previous.ts) carries the labels of the pod it was
// but a name of its own: identify() does not take it for an instance's container.
//
// io.capstan.restarted-at holds the group's restartedAt (the last rolling restart request) the
// container was created under; absent before the first request. A pod whose value differs from the
// spec's is replaced by the rollout step, as a pod of an older version is.

import { currentFormat, formatLabel } from "../shared/format.ts";
import { isPreviousContainer } from "../shared/previous.ts";

export const labelKeys = {
  podGroup: "io.capstan.podgroup",
  namespace: "io.capstan.namespace",
  instance: "io.capstan.instance",
  version: "io.capstan.version",
  drift: "io.capstan.drift",
  containerIndex: "io.capstan.container-index",
  format: formatLabel,
  restartedAt: "io.capstan.restarted-at",
  numbering: "io.capstan.numbering",
} as const;

/** The value of io.capstan.numbering on containers whose instance numbers start at 1. */
export const numberedFromOne = "1";

/** Whether a container's instance label (or name) holds an instanceNo numbered from 0 (created before 1-based numbering). */
export function numberedFromZero(labels: Readonly<Record<string, string>>): boolean {
  return labels[labelKeys.numbering] !== numberedFromOne;
}

export interface PodContainerRef {
  group: string;
  instance: number;
  version: number;
  drift: number;
  /** 0 for the pod's first container. */
  index: number;
}

export interface ContainerIdentity extends PodContainerRef {
  /** The io.capstan.format label, or "1" when it is missing (the format before labels carried it). */
  format: string;
  /** The instance was read from the name (a 0-based one without an instance label): never renamed. */
  instanceFromName?: true;
}

export function containerName(r: PodContainerRef): string {
  return `${r.group}.v${r.version}-i${r.instance}-d${r.drift}${r.index > 0 ? `-c${r.index}` : ""}`;
}

export function containerLabels(r: PodContainerRef & { namespace: string; restartedAt?: string | undefined }): Record<string, string> {
  return {
    ...(r.restartedAt !== undefined && { [labelKeys.restartedAt]: r.restartedAt }),
    [labelKeys.podGroup]: r.group,
    [labelKeys.namespace]: r.namespace,
    [labelKeys.instance]: String(r.instance),
    [labelKeys.version]: String(r.version),
    [labelKeys.drift]: String(r.drift),
    [labelKeys.containerIndex]: String(r.index),
    [labelKeys.format]: currentFormat,
    [labelKeys.numbering]: numberedFromOne,
  };
}

const namePattern = /\.v(\d+)-i(\d+)-d(\d+)(?:-c(\d+))?$/;

function count(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,9}$/.test(text)) return undefined;
  return Number(text);
}

/**
 * Who a container belongs to, or undefined when it is not one of `group`'s containers or cannot
 * be placed (a current-format container with a broken label, a legacy one whose fields are in
 * neither its labels nor its name).
 */
export function identify(c: { name: string; labels: Readonly<Record<string, string>> }, group: string): ContainerIdentity | undefined {
  const l = c.labels;
  if (l[labelKeys.podGroup] !== group || isPreviousContainer(c)) return undefined;
  const format = l[labelKeys.format] ?? "1";
  const shift = numberedFromZero(l) ? 1 : 0;
  const fromLabels = {
    instance: count(l[labelKeys.instance]),
    version: count(l[labelKeys.version]),
    drift: count(l[labelKeys.drift]),
    index: count(l[labelKeys.containerIndex]),
  };
  if (format === currentFormat) {
    const { instance, version, drift, index } = fromLabels;
    if (instance === undefined || version === undefined || drift === undefined || index === undefined) return undefined;
    return { group, instance: instance + shift, version, drift, index, format };
  }
  const m = namePattern.exec(c.name);
  const instance = fromLabels.instance ?? count(m?.[2]);
  const version = fromLabels.version ?? count(m?.[1]);
  const drift = fromLabels.drift ?? count(m?.[3]) ?? 0;
  const index = fromLabels.index ?? (m ? (count(m[4]) ?? 0) : 0);
  if (instance === undefined || version === undefined) return undefined;
  const fromName = fromLabels.instance === undefined && shift === 1;
  return { group, instance: instance + shift, version, drift, index, format, ...(fromName && { instanceFromName: true as const }) };
}
