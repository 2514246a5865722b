// A container as the container cache holds it once inspected, for the unit tests of the
// controllers' decisions and status: the caller names it (node, name, labels), the rest is a
// running container with unique, increasing ids, creation order and generation.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";

let seq = 0;

export interface ContainerIdentity {
  node: string;
  name: string;
  labels: Record<string, string>;
  /** Prefix of the unique id (`id1`, `id2`, ...). */
  idPrefix?: string;
  /** When it started (wall-clock ms); 1,000 unless said. */
  startedAt?: number;
}

export function cachedContainer(identity: ContainerIdentity, over: Partial<CachedContainer> = {}): CachedContainer {
  seq++;
  return {
    node: identity.node,
    id: `${identity.idPrefix ?? "id"}${seq}`,
    name: identity.name,
    image: "img",
    labels: identity.labels,
    state: "running",
    exitCode: undefined,
    startedAt: identity.startedAt ?? 1_000,
    finishedAt: undefined,
    oomKilled: false,
    created: seq,
    ports: [],
    ip: "",
    limits: { memoryBytes: 0, nanoCpus: 0 },
    confirmed: true,
    generation: seq,
    ...over,
  };
}
