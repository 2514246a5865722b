// RemoveSpec (docs/dependencies.md, the DELETE rows), the decisions: which containers a pass
// stops and removes now, and which unreachable nodes the removal must wait for (D5). No I/O.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";

/** The containers removed in this pass: those on reachable nodes (the others are unknown, D4). */
export function removableNow(containers: readonly CachedContainer[], reachable: (node: string) => boolean): CachedContainer[] {
  return containers.filter((container) => reachable(container.node));
}

/**
 * The unreachable nodes the removal waits for (D5): those the cache still shows containers on
 * (`holding`), and those not heard from since this process started (the cache never had their
 * list). Every other unreachable node holds none: each create of ours is recorded in the cache.
 * In the order of `holding`, then `nodes`; each once.
 */
export function nodesToWaitFor(input: {
  holding: readonly string[];
  nodes: readonly string[];
  reachable: (node: string) => boolean;
  heardFrom: (node: string) => boolean;
}): string[] {
  const holding = new Set(input.holding);
  return [...new Set([...holding, ...input.nodes])].filter((node) => !input.reachable(node) && (holding.has(node) || !input.heardFrom(node)));
}
