// Placement: which node a new container should go to. Pure functions over node resources and the
// reservations of Capstan's running containers, so the orchestrator can decide, explain and test a
// placement without touching an engine.
//
//   filters   `node==x`, `node!=x`, `label:k==v`, `label:k!=v` (engine labels), all must hold;
//   capacity  free = node total - what running Capstan containers reserve (memory limit, nanoCpus);
//             a container without a limit reserves nothing of that resource;
//   order     fewer instances of the same group first (the spread hint), then more free memory and
//             CPU left after placing (mean of both fractions), then node name: the same inputs
//             always give the same node.
import type { ContainerDetails, NodeResources } from "./cluster.ts";

export class PlacementFilterError extends Error {
  override readonly name = "PlacementFilterError";
}

export type PlacementFilter =
  | { kind: "node"; op: "==" | "!="; value: string }
  | { kind: "label"; key: string; op: "==" | "!="; value: string };

const filterSyntax = /^(node|label:([^\s=!]+))\s*(==|!=)\s*(\S.*)$/;

export function parsePlacementFilter(text: string): PlacementFilter {
  const m = filterSyntax.exec(text.trim());
  if (!m) {
    throw new PlacementFilterError(
      `placement filter ${JSON.stringify(text)} is not one of node==NAME, node!=NAME, label:KEY==VALUE, label:KEY!=VALUE`,
    );
  }
  const op = m[3] as "==" | "!=";
  const value = m[4]!.trim();
  return m[1] === "node" ? { kind: "node", op, value } : { kind: "label", key: m[2]!, op, value };
}

export function parsePlacementFilters(texts: readonly string[]): PlacementFilter[] {
  return texts.map(parsePlacementFilter);
}

export function matchesFilters(node: Pick<NodeResources, "name" | "labels">, filters: readonly PlacementFilter[]): boolean {
  return filters.every((f) => {
    const actual = f.kind === "node" ? node.name : node.labels[f.key];
    return f.op === "==" ? actual === f.value : actual !== f.value;
  });
}

export interface ResourceRequest {
  memoryBytes: number;
  nanoCpus: number;
}

export interface Reservation extends ResourceRequest {
  node: string;
}

export const capstanLabelPrefix = "io.capstan.";
const nanoCpusPerCpu = 1e9;

/** What a container holds of its node: its limits while it is up, if it is one of Capstan's. */
export function reservationOf(c: ContainerDetails): Reservation | undefined {
  const up = c.status.running || c.status.paused || c.status.restarting;
  const ours = Object.keys(c.labels).some((k) => k.startsWith(capstanLabelPrefix));
  if (!up || !ours) return undefined;
  return { node: c.node, memoryBytes: c.memoryBytes, nanoCpus: c.nanoCpus };
}

export interface NodeCapacity extends NodeResources {
  /** May go negative on an overcommitted node. */
  freeMemoryBytes: number;
  freeNanoCpus: number;
}

export function freeCapacity(nodes: readonly NodeResources[], reservations: readonly Reservation[]): NodeCapacity[] {
  const used = new Map<string, ResourceRequest>();
  for (const r of reservations) {
    const u = used.get(r.node) ?? { memoryBytes: 0, nanoCpus: 0 };
    used.set(r.node, { memoryBytes: u.memoryBytes + r.memoryBytes, nanoCpus: u.nanoCpus + r.nanoCpus });
  }
  return nodes.map((n) => {
    const u = used.get(n.name) ?? { memoryBytes: 0, nanoCpus: 0 };
    return { ...n, freeMemoryBytes: n.memoryBytes - u.memoryBytes, freeNanoCpus: n.cpus * nanoCpusPerCpu - u.nanoCpus };
  });
}

function fitsOn(n: Pick<NodeCapacity, "freeMemoryBytes" | "freeNanoCpus">, r: ResourceRequest): boolean {
  return (r.memoryBytes === 0 || r.memoryBytes <= n.freeMemoryBytes) && (r.nanoCpus === 0 || r.nanoCpus <= n.freeNanoCpus);
}

/** 0..1: the mean of the memory and CPU fractions left free on the node after placing `r`. */
export function scoreNode(n: NodeCapacity, r: ResourceRequest): number {
  const mem = n.memoryBytes > 0 ? (n.freeMemoryBytes - r.memoryBytes) / n.memoryBytes : 0;
  const cpu = n.cpus > 0 ? (n.freeNanoCpus - r.nanoCpus) / (n.cpus * nanoCpusPerCpu) : 0;
  return (Math.max(0, mem) + Math.max(0, cpu)) / 2;
}

export interface PlacementRequest {
  request: ResourceRequest;
  filters?: readonly PlacementFilter[];
  /** Instances of the same group already on each node, by node name (the spread hint). */
  groupCounts?: Readonly<Record<string, number>>;
}

/** Candidate nodes, best first: ready, matching every filter, with room for the request. */
export function rankNodes(nodes: readonly NodeCapacity[], p: PlacementRequest): string[] {
  const count = (n: NodeCapacity) => p.groupCounts?.[n.name] ?? 0;
  return nodes
    .filter((n) => n.state === "ready" && matchesFilters(n, p.filters ?? []) && fitsOn(n, p.request))
    .map((n) => ({ n, spread: count(n), score: scoreNode(n, p.request) }))
    .sort((a, b) => a.spread - b.spread || b.score - a.score || (a.n.name < b.n.name ? -1 : a.n.name > b.n.name ? 1 : 0))
    .map((c) => c.n.name);
}

/** The best node for the request, or undefined when none qualifies. */
export function pickNode(nodes: readonly NodeCapacity[], p: PlacementRequest): string | undefined {
  return rankNodes(nodes, p)[0];
}

/**
 * Whether every request can be placed on the ready nodes given at once (each request whole on one
 * node). Greedy: largest request first, each onto the node pickNode would choose, capacity taken as
 * it goes. A true answer comes with a placement that works; a false one means this greedy packing
 * found none, which for two resources can, rarely, be pessimistic. The orchestrator answers 409
 * InsufficientResources on false.
 */
export function fits(nodes: readonly NodeCapacity[], requests: readonly ResourceRequest[]): boolean {
  const pool = nodes.map((n) => ({ ...n }));
  const order = [...requests].sort((a, b) => b.memoryBytes - a.memoryBytes || b.nanoCpus - a.nanoCpus);
  for (const r of order) {
    const name = pickNode(pool, { request: r });
    const target = pool.find((n) => n.name === name);
    if (!target) return false;
    target.freeMemoryBytes -= r.memoryBytes;
    target.freeNanoCpus -= r.nanoCpus;
  }
  return true;
}
