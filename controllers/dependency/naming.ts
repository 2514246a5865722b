// How dependency containers are named and labelled, and how a container found on an engine is
// traced back to (dependency, scope, version, container index) without the store. Pure functions.
//
//   name    <dep>.v<version>-<node> (node-level) or <dep>.v<version>-<node>-N<scope>
//           (namespace-level), plus -C<index> for the 2nd+ container
//
// The markers -N and -C are upper case on purpose: dependency and namespace names are lower case
// ([a-z0-9._-]), so no dependency name, scope or index can spell a marker, and two different pods
// on one node never get the same name. With lower-case markers they did: container 1 of the
// node-level pod (dep.v1-n1-c1) was also container 0 of the pod for namespace "c1".
//   labels  io.capstan.dependency, .namespace (the scope; "" for node-level), .node, .version,
//           .container-index, .format
//
// The dependency label is NOT io.capstan.podgroup, so the PodGroup controller (which watches by
// that label) never takes a dependency pod for one of its instances. The ONE constant
// `labelKeys.dependency` is used to label containers, to filter the container cache's
// subscription and relists, to index it, and to sweep the engines: the original system labelled
// its dependency containers differently from what its refresh looked them up by, found none, and
// redeployed them forever (docs/dependencies.md, "What runs where").
//
// A container that carries io.capstan.dependency but not io.capstan.format=2 is of an older data
// format: its version comes from its label or name, its scope from its namespace label; the
// controller upgrades it (replaces it with a current one, in the manner of a spec update).

import { currentFormat, formatLabel } from "../shared/format.ts";

export const labelKeys = {
  dependency: "io.capstan.dependency",
  namespace: "io.capstan.namespace",
  node: "io.capstan.node",
  version: "io.capstan.version",
  containerIndex: "io.capstan.container-index",
  format: formatLabel,
} as const;

/** One dependency pod's place: the node it runs on and the namespace it serves ("" = all). */
export interface Slot {
  node: string;
  scope: string;
}

/** Map key of a slot; "|" appears in neither node nor namespace names. */
export function slotKey(slot: Slot): string {
  return `${slot.node}|${slot.scope}`;
}

export function parseSlotKey(key: string): Slot {
  const bar = key.indexOf("|");
  return { node: key.slice(0, bar), scope: key.slice(bar + 1) };
}

export interface DependencyContainerRef extends Slot {
  dependency: string;
  version: number;
  /** 0 for the pod's first container. */
  index: number;
}

export function containerName(ref: DependencyContainerRef): string {
  const scope = ref.scope === "" ? "" : `-N${ref.scope}`;
  return `${ref.dependency}.v${ref.version}-${ref.node}${scope}${ref.index > 0 ? `-C${ref.index}` : ""}`;
}

/**
 * The owner part of the Docker volume names of container `index` of the pod serving `scope`:
 * `<dep>[.N<scope>][.C<index>]`, unambiguous for the same reason as containerName (volumes are
 * per engine, so per node, like names).
 */
export function volumeOwner(dependency: string, scope: string, index: number): string {
  return `${dependency}${scope ? `.N${scope}` : ""}${index > 0 ? `.C${index}` : ""}`;
}

export function containerLabels(ref: DependencyContainerRef): Record<string, string> {
  return {
    [labelKeys.dependency]: ref.dependency,
    [labelKeys.namespace]: ref.scope,
    [labelKeys.node]: ref.node,
    [labelKeys.version]: String(ref.version),
    [labelKeys.containerIndex]: String(ref.index),
    [labelKeys.format]: currentFormat,
  };
}

export interface DependencyIdentity extends DependencyContainerRef {
  /** io.capstan.format, or "1" when it is missing (older data format). */
  format: string;
}

const versionInName = /\.v(\d{1,9})-/;
// Names of the older data format ended in -c<index> (a current one's are read from labels only).
const indexInName = /-c(\d{1,2})$/;

function count(text: string | undefined): number | undefined {
  return text !== undefined && /^\d{1,9}$/.test(text) ? Number(text) : undefined;
}

/**
 * Whose pod a container is, or undefined when it is not one of `dependency`'s containers or its
 * version cannot be read. The node is where the engine reports it, never a label (a label can
 * only be wrong).
 */
export function identify(
  container: { node: string; name: string; labels: Readonly<Record<string, string>> },
  dependency: string,
): DependencyIdentity | undefined {
  const labels = container.labels;
  if (labels[labelKeys.dependency] !== dependency) return undefined;
  const format = labels[labelKeys.format] ?? "1";
  const version = count(labels[labelKeys.version]) ?? (format === currentFormat ? undefined : count(versionInName.exec(container.name)?.[1]));
  const index = count(labels[labelKeys.containerIndex]) ?? (format === currentFormat ? undefined : (count(indexInName.exec(container.name)?.[1]) ?? 0));
  if (version === undefined || index === undefined) return undefined;
  return { dependency, node: container.node, scope: labels[labelKeys.namespace] ?? "", version, index, format };
}
