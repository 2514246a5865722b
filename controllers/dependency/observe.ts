// Actual state of one dependency, from the container cache: its containers sorted into slots
// (node, scope) and, per slot, the one pod that stands for it ("kept") and the containers that
// must go ("extras": duplicates, an older copy next to a current one, surplus container indexes).
// Pure; the choice of the kept pod is deterministic, so two passes never fight over it.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import { currentFormat } from "../shared/format.ts";
import { identify, slotKey, type DependencyIdentity } from "./naming.ts";

export interface ObservedContainer {
  c: CachedContainer;
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

export function podContainers(p: Pod): ObservedContainer[] {
  return [...p.containers.entries()].sort((a, b) => a[0] - b[0]).map(([, o]) => o);
}

export function podRunning(p: Pod): boolean {
  return podContainers(p).every((o) => o.c.state === "running");
}

export function podComplete(p: Pod, podSize: number): boolean {
  for (let k = 0; k < podSize; k++) if (!p.containers.has(k)) return false;
  return true;
}

/** The pod must be replaced: another version than the spec's, or an older data format. */
export function podStale(p: Pod, version: number): boolean {
  return p.version !== version || podContainers(p).some((o) => o.id.format !== currentFormat);
}

export function slotContainers(v: SlotView | undefined): ObservedContainer[] {
  if (!v) return [];
  return [...(v.kept ? podContainers(v.kept) : []), ...v.extras];
}

export function classify(containers: readonly CachedContainer[], dependency: string, version: number, podSize: number): DependencyView {
  const unidentified: CachedContainer[] = [];
  const pods = new Map<string, Map<number, Pod>>();
  const extras = new Map<string, ObservedContainer[]>();
  const sorted = [...containers].sort((a, b) => a.created - b.created || cmp(a.node, b.node) || cmp(a.id, b.id));
  for (const c of sorted) {
    const id = identify(c, dependency);
    if (!id) {
      unidentified.push(c);
      continue;
    }
    const key = slotKey(id);
    let byVersion = pods.get(key);
    if (!byVersion) pods.set(key, (byVersion = new Map()));
    let pod = byVersion.get(id.version);
    if (!pod) byVersion.set(id.version, (pod = { version: id.version, containers: new Map() }));
    const taken = pod.containers.get(id.index);
    const o = { c, id };
    if (!taken) {
      pod.containers.set(id.index, o);
      continue;
    }
    const [keep, drop] = better(o, taken) ? [o, taken] : [taken, o];
    pod.containers.set(id.index, keep);
    push(extras, key, drop);
  }
  const slots = new Map<string, SlotView>();
  for (const [key, byVersion] of pods) {
    const ranked = [...byVersion.values()].sort((a, b) => rank(b, version, podSize) - rank(a, version, podSize) || b.version - a.version);
    const kept = ranked[0];
    const out = [...(extras.get(key) ?? [])];
    for (const p of ranked.slice(1)) out.push(...p.containers.values());
    if (kept && kept.version === version) {
      for (const [k, o] of [...kept.containers]) {
        if (k >= podSize) {
          kept.containers.delete(k);
          out.push(o);
        }
      }
    }
    slots.set(key, { kept, extras: out });
  }
  return { slots, unidentified };
}

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const list = m.get(k) ?? [];
  list.push(v);
  m.set(k, list);
}

function better(a: ObservedContainer, b: ObservedContainer): boolean {
  if ((a.c.state === "running") !== (b.c.state === "running")) return a.c.state === "running";
  if ((a.id.format === currentFormat) !== (b.id.format === currentFormat)) return a.id.format === currentFormat;
  return false; // the earlier created stays
}

/** Higher is better: at the spec's version, then more running, then complete, then current format. */
function rank(p: Pod, version: number, podSize: number): number {
  const cs = [...p.containers.values()];
  const running = cs.filter((o) => o.c.state === "running").length;
  const current = cs.every((o) => o.id.format === currentFormat);
  return (p.version === version ? 100_000 : 0) + running * 1_000 + (podComplete(p, podSize) ? 100 : 0) + (current ? 10 : 0);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
