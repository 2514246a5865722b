// Building blocks for the decision tests (plan-*.ts): containers of a group by instance, version,
// drift and node, and the classified view of them, as the pass sees it.
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { cachedContainer } from "../../helpers/cached-container.ts";
import { containerLabels, containerName } from "../../../controllers/podgroup/naming.ts";
import { classify, type GroupView } from "../../../controllers/podgroup/observe.ts";
import type { Internal, StoredPodGroup } from "../../../controllers/podgroup/stored.ts";
import { stored } from "./fixtures.ts";

export const down = "down";
export const reachable = (node: string): boolean => node !== down;

export interface PodRef {
  instance: number;
  version?: number;
  drift?: number;
  index?: number;
  node?: string;
  restartedAt?: string;
}

/** One container of group "web" (namespace "ns"), running since t=1000 unless `over` says otherwise. */
export function container(ref: PodRef, over: Partial<CachedContainer> = {}): CachedContainer {
  const id = { group: "web", instance: ref.instance, version: ref.version ?? 1, drift: ref.drift ?? 0, index: ref.index ?? 0 };
  return cachedContainer(
    {
      node: ref.node ?? "n1",
      idPrefix: "c",
      name: containerName(id),
      labels: containerLabels({ ...id, namespace: "ns", ...(ref.restartedAt !== undefined && { restartedAt: ref.restartedAt }) }),
    },
    over,
  );
}

export function viewOf(spec: StoredPodGroup, containers: CachedContainer[]): GroupView {
  return classify(containers, {
    group: spec.name,
    version: spec.pod.version,
    podSize: spec.pod.containers.length,
    reachable,
    restartedAt: spec.restartedAt ?? "",
  });
}

export function internalOf(over: Partial<Internal> = {}): Internal {
  return { instances: {}, ...over };
}

/** Group "web" at version `version` with `numInstances` single-container pods. */
export function group(numInstances: number, version = 1, over: Partial<StoredPodGroup> = {}, pod: Partial<StoredPodGroup["pod"]> = {}): StoredPodGroup {
  return stored({ numInstances, ...over }, { version, ...pod });
}
