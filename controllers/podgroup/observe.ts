// Actual state of one group, from the container cache: its containers sorted into instances, and
// per instance the one pod that stands for it ("kept") and the containers that must go ("extras":
// duplicates from a crash or a lost race, a stale copy next to a current one, surplus container
// indexes). Pure: the reconciler decides what to do with the result.
//
// Invariant kept here: at most one pod per instance is ever kept; every other container of the
// instance is an extra, so "no duplicates" holds as soon as the extras are removed. Which pod is
// kept is deterministic (the same containers always give the same answer), so two passes never
// fight over it.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import { currentFormat } from "../shared/format.ts";
import { isPreviousContainer, previousSlot } from "../shared/previous.ts";
import { identify, labelKeys, numberedFromZero, type ContainerIdentity } from "./naming.ts";

export interface ObservedContainer {
  c: CachedContainer;
  id: ContainerIdentity;
}

/** One instance's containers on one node at one version and drift: a pod. */
export interface PodCandidate {
  instance: number;
  node: string;
  version: number;
  drift: number;
  /** The io.capstan.restarted-at label its containers were created under ("" without one). */
  restartedAt: string;
  /** By container index. */
  containers: Map<number, ObservedContainer>;
}

export interface InstanceView {
  instance: number;
  kept: PodCandidate | undefined;
  extras: ObservedContainer[];
}

export interface GroupView {
  /** Every instance that has at least one container, by instance number. */
  instances: Map<number, InstanceView>;
  /** Labelled with the group but impossible to place (broken labels); reported, never touched. */
  unidentified: CachedContainer[];
  /**
   * Kept previous containers (controllers/shared/previous.ts) by instance, sorted by container
   * index: never an instance's pod, never counted, removed with their instance.
   */
  previous: Map<number, { c: CachedContainer; index: number }[]>;
}

export interface ClassifyOptions {
  group: string;
  /** The spec's pod.version: pods at it are preferred. */
  version: number;
  /** Containers per pod in the spec: indexes beyond it are extras on a current-version pod. */
  podSize: number;
  reachable: (node: string) => boolean;
  /** The spec's restartedAt ("" or absent: none): pods created under it are preferred. */
  restartedAt?: string;
}

export function isRunning(c: CachedContainer): boolean {
  return c.state === "running";
}

export function podRunning(p: PodCandidate): boolean {
  for (const o of p.containers.values()) if (!isRunning(o.c)) return false;
  return true;
}

export function podComplete(p: PodCandidate, podSize: number): boolean {
  for (let k = 0; k < podSize; k++) if (!p.containers.has(k)) return false;
  return true;
}

export function podContainers(p: PodCandidate): ObservedContainer[] {
  return [...p.containers.entries()].sort((a, b) => a[0] - b[0]).map(([, o]) => o);
}

/** All containers of an instance, kept pod first. */
export function instanceContainers(v: InstanceView): ObservedContainer[] {
  return [...(v.kept ? podContainers(v.kept) : []), ...v.extras];
}

export function classify(containers: readonly CachedContainer[], o: ClassifyOptions): GroupView {
  const unidentified: CachedContainer[] = [];
  const byInstance = new Map<number, Map<string, PodCandidate>>();
  const dupes = new Map<number, ObservedContainer[]>();
  const previous = new Map<number, { c: CachedContainer; index: number }[]>();
  // Stable input order, so that ties below always break the same way.
  const sorted = [...containers].sort((a, b) => a.created - b.created || cmp(a.node, b.node) || cmp(a.id, b.id));
  for (const c of sorted) {
    if (isPreviousContainer(c)) {
      // A 0-based one (numberedFromZero, docs/podgroup-controller.md "Instance numbers") by its
      // labels, which keep the pod's number for life, plus one; its name changes when renamed.
      const slot = numberedFromZero(c.labels) ? previousFromZero(c, o.group) : (previousSlot(c.name, o.group) ?? previousByLabels(c, o.group));
      if (slot) previous.set(slot.instance, [...(previous.get(slot.instance) ?? []), { c, index: slot.index }].sort((a, b) => a.index - b.index));
      else unidentified.push(c);
      continue;
    }
    const id = identify(c, o.group);
    if (!id) {
      unidentified.push(c);
      continue;
    }
    let pods = byInstance.get(id.instance);
    if (!pods) byInstance.set(id.instance, (pods = new Map()));
    const restartedAt = c.labels[labelKeys.restartedAt] ?? "";
    const key = `${c.node}|${id.version}|${id.drift}|${restartedAt}`;
    let pod = pods.get(key);
    if (!pod) pods.set(key, (pod = { instance: id.instance, node: c.node, version: id.version, drift: id.drift, restartedAt, containers: new Map() }));
    const taken = pod.containers.get(id.index);
    if (!taken) {
      pod.containers.set(id.index, { c, id });
      continue;
    }
    // Two containers in one slot (e.g. an older-format one and a current one): keep the better one.
    const [keep, drop] = better({ c, id }, taken) ? [{ c, id }, taken] : [taken, { c, id }];
    pod.containers.set(id.index, keep);
    const list = dupes.get(id.instance) ?? [];
    list.push(drop);
    dupes.set(id.instance, list);
  }

  const instances = new Map<number, InstanceView>();
  for (const [instance, pods] of byInstance) {
    const ranked = [...pods.values()].sort((a, b) => compareRank(rank(b, o), rank(a, o)) || tieBreak(a, b));
    const kept = ranked[0];
    const extras = [...(dupes.get(instance) ?? [])];
    for (const p of ranked.slice(1)) extras.push(...p.containers.values());
    if (kept && kept.version === o.version) {
      for (const [k, oc] of [...kept.containers]) {
        if (k >= o.podSize) {
          kept.containers.delete(k);
          extras.push(oc);
        }
      }
    }
    instances.set(instance, { instance, kept, extras });
  }
  return { instances, unidentified, previous };
}

/** A previous container renamed by someone else: its instance and index from its labels. */
function previousByLabels(c: CachedContainer, group: string): { instance: number; index: number } | undefined {
  if (c.labels[labelKeys.podGroup] !== group) return undefined;
  const instance = Number(c.labels[labelKeys.instance]);
  const index = Number(c.labels[labelKeys.containerIndex] ?? "0");
  return Number.isInteger(instance) && instance >= 0 && Number.isInteger(index) && index >= 0 ? { instance, index } : undefined;
}

/** A previous container of a pod created under the 0-based numbering: its 1-based instance. */
function previousFromZero(c: CachedContainer, group: string): { instance: number; index: number } | undefined {
  const slot = previousByLabels(c, group) ?? previousSlot(c.name, group);
  return slot && { instance: slot.instance + 1, index: slot.index };
}

function better(a: ObservedContainer, b: ObservedContainer): boolean {
  if (isRunning(a.c) !== isRunning(b.c)) return isRunning(a.c);
  if ((a.id.format === currentFormat) !== (b.id.format === currentFormat)) return a.id.format === currentFormat;
  return false; // equal: the earlier created (first seen) stays
}

/**
 * Higher is better, compared in order: reachable, at the spec's version, created under the spec's
 * restartedAt (a restarted pod replaces the one it was started for), higher drift count (a
 * drifted pod replaces the copy on the node it left, even before it runs: that copy is on its way
 * out), more containers running, complete, current format.
 */
function rank(p: PodCandidate, o: ClassifyOptions): number[] {
  let running = 0;
  let current = 0;
  for (const oc of p.containers.values()) {
    if (isRunning(oc.c)) running++;
    if (oc.id.format === currentFormat) current++;
  }
  return [
    o.reachable(p.node) ? 1 : 0,
    p.version === o.version ? 1 : 0,
    p.restartedAt === (o.restartedAt ?? "") ? 1 : 0,
    p.drift,
    running,
    podComplete(p, o.podSize) ? 1 : 0,
    current === p.containers.size ? 1 : 0,
  ];
}

function compareRank(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

function tieBreak(a: PodCandidate, b: PodCandidate): number {
  const ca = Math.min(...[...a.containers.values()].map((x) => x.c.created));
  const cb = Math.min(...[...b.containers.values()].map((x) => x.c.created));
  return ca - cb || cmp(a.node, b.node) || b.version - a.version || a.drift - b.drift || cmp(a.restartedAt, b.restartedAt);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
