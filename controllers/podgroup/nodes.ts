// Which nodes exist, which can be reached, and what they have free. Node resources come from
// cluster.nodes() (one engine info call per node), cached for `ttlMs` and shared by concurrent
// reconciles, so a wave of deploys costs one round of calls, not one per instance. Reachability
// comes from the container cache's event streams, which notice an engine going away at once.
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
    private readonly ttlMs = 5_000,
    private readonly callTimeoutMs = 15_000,
  ) {}

  /** Node resources, at most ttlMs old; the state is overridden by the event streams' view. */
  async get(signal: AbortSignal): Promise<NodeResources[]> {
    const c = this.cached;
    // A node the last answer had as unreachable but whose stream is back has no resources in
    // that answer: ask again rather than leave it out of placement for the rest of the TTL.
    const stale = c?.nodes.some((n) => n.state !== "ready" && this.reachable(n.name));
    if (c && !stale && this.clock.now() - c.at < this.ttlMs) return this.withStreamState(c.nodes);
    // One call in flight for everyone; its own deadline bounds it, each caller's signal its wait.
    this.inflight ??= withDeadline(this.cluster.nodes(), this.callTimeoutMs, this.clock, "list nodes")
      .then((nodes) => {
        this.cached = { at: this.clock.now(), nodes };
        return nodes;
      })
      .finally(() => {
        this.inflight = undefined;
      });
    const nodes = await withDeadline(this.inflight, this.callTimeoutMs, this.clock, "list nodes", signal);
    return this.withStreamState(nodes);
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
