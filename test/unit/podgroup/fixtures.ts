// Cached containers for the pure-logic tests.
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { cachedContainer } from "../../helpers/cached-container.ts";
import { containerLabels, containerName } from "../../../controllers/podgroup/naming.ts";
import type { StoredPodGroup } from "../../../controllers/podgroup/stored.ts";

export function cached(
  r: { group?: string; instance: number; version?: number; index?: number; node?: string },
  over: Partial<CachedContainer> = {},
): CachedContainer {
  const ref = { group: r.group ?? "web", instance: r.instance, version: r.version ?? 1, drift: 0, index: r.index ?? 0 };
  return cachedContainer({ node: r.node ?? "n1", name: containerName(ref), labels: containerLabels({ ...ref, namespace: "ns" }) }, over);
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
