// Actual state of one dependency, from the container cache: its containers sorted into slots
// (node, scope) and, per slot, the one pod that stands for it ("kept") and the containers that
// must go ("extras": duplicates, an older copy next to a current one, surplus container indexes).
// Pure; the choice of the kept pod is deterministic, so two passes never fight over it.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import { currentFormat } from "../shared/format.ts";
import { identify, slotKey, type DependencyIdentity } from "./naming.ts";

export interface ObservedContainer {
  container: CachedContainer;
  id: DependencyIdentity;
}

export interface Pod {
  version: number;
  /** By container index. */
  containers: Map<number, ObservedContainer>;
}

export interface SlotView {
  kept: Pod | undefined;
  extras: ObservedContainer[];
}

export interface DependencyView {
  slots: Map<string, SlotView>;
  /** Labelled with the dependency but unreadable (no version): reported, never touched. */
  unidentified: CachedContainer[];
}

export function podContainers(pod: Pod): ObservedContainer[] {
  return [...pod.containers.entries()].sort((left, right) => left[0] - right[0]).map(([, observed]) => observed);
}

export function podRunning(pod: Pod): boolean {
  return podContainers(pod).every((observed) => observed.container.state === "running");
}

export function podComplete(pod: Pod, podSize: number): boolean {
  for (let k = 0; k < podSize; k++) if (!pod.containers.has(k)) return false;
  return true;
}

/** The pod must be replaced: another version than the spec's, or an older data format. */
export function podStale(pod: Pod, version: number): boolean {
  return pod.version !== version || podContainers(pod).some((observed) => observed.id.format !== currentFormat);
}

export function slotContainers(slot: SlotView | undefined): ObservedContainer[] {
  if (!slot) return [];
  return [...(slot.kept ? podContainers(slot.kept) : []), ...slot.extras];
}

export function classify(containers: readonly CachedContainer[], dependency: string, version: number, podSize: number): DependencyView {
  const unidentified: CachedContainer[] = [];
  const pods = new Map<string, Map<number, Pod>>();
  const extras = new Map<string, ObservedContainer[]>();
  const sorted = [...containers].sort((left, right) => left.created - right.created || cmp(left.node, right.node) || cmp(left.id, right.id));
  for (const container of sorted) {
    const id = identify(container, dependency);
    if (!id) {
      unidentified.push(container);
      continue;
    }
    const key = slotKey(id);
    let byVersion = pods.get(key);
    if (!byVersion) pods.set(key, (byVersion = new Map()));
    let pod = byVersion.get(id.version);
    if (!pod) byVersion.set(id.version, (pod = { version: id.version, containers: new Map() }));
    const taken = pod.containers.get(id.index);
    const observed = { container, id };
    if (!taken) {
      pod.containers.set(id.index, observed);
      continue;
    }
    const [keep, drop] = better(observed, taken) ? [observed, taken] : [taken, observed];
    pod.containers.set(id.index, keep);
    push(extras, key, drop);
  }
  const slots = new Map<string, SlotView>();
  for (const [key, byVersion] of pods) {
    const ranked = [...byVersion.values()].sort((left, right) => rank(right, version, podSize) - rank(left, version, podSize) || right.version - left.version);
    const kept = ranked[0];
    const out = [...(extras.get(key) ?? [])];
    for (const older of ranked.slice(1)) out.push(...older.containers.values());
    if (kept && kept.version === version) {
      for (const [k, surplus] of [...kept.containers]) {
        if (k >= podSize) {
          kept.containers.delete(k);
          out.push(surplus);
        }
      }
    }
    slots.set(key, { kept, extras: out });
  }
  return { slots, unidentified };
}

function push<T>(lists: Map<string, T[]>, key: string, item: T): void {
  const list = lists.get(key) ?? [];
  list.push(item);
  lists.set(key, list);
}

function better(candidate: ObservedContainer, taken: ObservedContainer): boolean {
  if ((candidate.container.state === "running") !== (taken.container.state === "running")) return candidate.container.state === "running";
  if ((candidate.id.format === currentFormat) !== (taken.id.format === currentFormat)) return candidate.id.format === currentFormat;
  return false; // the earlier created stays
}

/** Higher is better: at the spec's version, then more running, then complete, then current format. */
function rank(pod: Pod, version: number, podSize: number): number {
  const members = [...pod.containers.values()];
  const running = members.filter((observed) => observed.container.state === "running").length;
  const current = members.every((observed) => observed.id.format === currentFormat);
  return (pod.version === version ? 100_000 : 0) + running * 1_000 + (podComplete(pod, podSize) ? 100 : 0) + (current ? 10 : 0);
}

function cmp(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}
