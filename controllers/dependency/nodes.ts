// What the Dependency controller knows of the nodes: their resources (labels for the filters,
// addresses for the status), listed from the cluster and reused for a while, and, from the
// container cache, whether each node's event stream is up and whether its list has been read
// since this process started.
//
// Invariants, kept here:
// - a node is reachable only while its event stream is up, so that its containers in the cache
//   are current; otherwise they are unknown, never missing (D4, docs/dependencies.md);
// - the node list is listed again before its time when a node it shows as not ready is reachable
//   again (its labels and address may have changed meanwhile).
import type { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import type { Cluster, NodeResources } from "../../adapters/cluster/index.ts";
import type { Clock } from "../../runtime/clock.ts";
import { withDeadline } from "../../runtime/deadline.ts";

/** Node resources are reused this long: they rarely change. */
export const nodesTtlMs = 30_000;

export class DependencyNodes {
  private listed: { at: number; nodes: NodeResources[] } | undefined;

  constructor(
    private readonly cluster: Cluster,
    private readonly cache: ContainerCache,
    private readonly clock: Clock,
    private readonly callTimeoutMs: number,
  ) {}

  /** Every node's resources, from the last list while it is fresh. */
  async get(signal: AbortSignal): Promise<NodeResources[]> {
    const listed = this.listed;
    const stale = listed?.nodes.some((node) => node.state !== "ready" && this.reachable(node.name));
    if (listed && this.clock.now() - listed.at < nodesTtlMs && !stale) return listed.nodes;
    const nodes = await withDeadline(this.cluster.nodes({ signal }), this.callTimeoutMs, this.clock, "list nodes", signal);
    this.listed = { at: this.clock.now(), nodes };
    return nodes;
  }

  /** The node's address as last listed ("" when unknown). */
  address(node: string): string {
    return this.listed?.nodes.find((candidate) => candidate.name === node)?.address ?? "";
  }

  /** Whether the node's event stream is up, so that its containers in the cache are current. */
  reachable(node: string): boolean {
    return this.cache.nodeState(node) === "ready";
  }

  /** Whether the cache has had the node's container list since this process started (D5). */
  heardFrom(node: string): boolean {
    return this.cache.listedSinceStart(node);
  }
}
