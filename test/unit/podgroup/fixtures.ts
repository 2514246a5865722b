// Cached containers for the pure-logic tests.
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { containerLabels, containerName } from "../../../controllers/podgroup/naming.ts";
import type { StoredPodGroup } from "../../../controllers/podgroup/stored.ts";

let seq = 0;

export function cached(
  r: { group?: string; instance: number; version?: number; index?: number; node?: string },
  over: Partial<CachedContainer> = {},
): CachedContainer {
  const ref = { group: r.group ?? "web", instance: r.instance, version: r.version ?? 1, drift: 0, index: r.index ?? 0 };
  seq++;
  return {
    node: r.node ?? "n1",
    id: `id${seq}`,
    name: containerName(ref),
    image: "img",
    labels: containerLabels({ ...ref, namespace: "ns" }),
    state: "running",
    exitCode: undefined,
    startedAt: 1_000,
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

export function stored(over: Partial<StoredPodGroup> = {}, pod: Partial<StoredPodGroup["pod"]> = {}): StoredPodGroup {
  return {
    name: "web",
    namespace: "ns",
    numInstances: 2,
    restartPolicy: "always",
    pod: { name: "web", namespace: "ns", version: 1, containers: [{ image: "img" }], ...pod },
    createdAt: "t",
    updatedAt: "t",
    ...over,
  };
}
