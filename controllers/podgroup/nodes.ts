// Which nodes exist, which can be reached, and what they have free. Node resources come from
// cluster.nodes() (one engine info call per node). They change rarely (an engine's CPUs and memory),
// so an answer is reused: older than `ttlMs`, it is still served while a fresh one is fetched in
// the background, so a repair never waits for engine info calls. Reachability comes from the
// container cache's event streams, which notice an engine going away (or coming back) at once.
import type { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import type { Cluster, NodeResources, Reservation } from "../../adapters/cluster/index.ts";
import type { Clock } from "../../runtime/clock.ts";
import { withDeadline } from "../../runtime/deadline.ts";

export class NodeView {
  private cached: { at: number; nodes: NodeResources[] } | undefined;
  private inflight: Promise<NodeResources[]> | undefined;

  constructor(
    private readonly cluster: Cluster,
    private readonly cache: ContainerCache,
    private readonly clock: Clock,
    private readonly ttlMs = 30_000,
    private readonly callTimeoutMs = 15_000,
  ) {}

  /** Node resources; the state is overridden by the event streams' view. */
  async get(signal: AbortSignal): Promise<NodeResources[]> {
    const c = this.cached;
    // A node the last answer had as unreachable but whose stream is back has no resources in
    // that answer: wait for a fresh one rather than leave the node out of placement.
    const missing = c?.nodes.some((n) => n.state !== "ready" && this.reachable(n.name));
    if (c && !missing) {
      if (this.clock.now() - c.at >= this.ttlMs) void this.fetch().catch(() => undefined);
      return this.withStreamState(c.nodes);
    }
    const nodes = await withDeadline(this.fetch(), this.callTimeoutMs, this.clock, "list nodes", signal);
    return this.withStreamState(nodes);
  }

  /** One call in flight for everyone; its own deadline bounds it, each caller's signal its wait. */
  private fetch(): Promise<NodeResources[]> {
    this.inflight ??= withDeadline(this.cluster.nodes(), this.callTimeoutMs, this.clock, "list nodes")
      .then((nodes) => {
        this.cached = { at: this.clock.now(), nodes };
        return nodes;
      })
      .finally(() => {
        this.inflight = undefined;
      });
    return this.inflight;
  }

  /** Whether the node's event stream is up: its containers in the cache are current. */
  reachable(node: string): boolean {
    return this.cache.nodeState(node) === "ready";
  }

  /** The address published ports are reached at, from the last nodes() answer ("" before one). */
  address(node: string): string {
    return this.cached?.nodes.find((n) => n.name === node)?.address ?? "";
  }

  private withStreamState(nodes: NodeResources[]): NodeResources[] {
    return nodes.map((n) => (n.state === "ready" && !this.reachable(n.name) ? { ...n, state: "unreachable" } : n));
  }
}

/** Reservations for placement: running containers that hold memory or CPU, by node. */
export function reservationsOf(containers: Iterable<{ node: string; state: string; limits?: { memoryBytes: number; nanoCpus: number } }>): Reservation[] {
  const out: Reservation[] = [];
  for (const c of containers) {
    if (c.state !== "running" && c.state !== "paused" && c.state !== "restarting") continue;
    if (!c.limits || (c.limits.memoryBytes === 0 && c.limits.nanoCpus === 0)) continue;
    out.push({ node: c.node, memoryBytes: c.limits.memoryBytes, nanoCpus: c.limits.nanoCpus });
  }
  return out;
}
