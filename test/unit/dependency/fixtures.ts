// Dependency containers and specs for the tests of the pure decisions (records.ts, slot-plan.ts,
// upgrade.ts, removal.ts, status.ts). Times are wall-clock ms on a fake clock starting at `t0`.
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { cachedContainer } from "../../helpers/cached-container.ts";
import { containerLabels, containerName, parseSlotKey } from "../../../controllers/dependency/naming.ts";
import { classify, type DependencyView } from "../../../controllers/dependency/observe.ts";
import type { StoredDependency } from "../../../controllers/dependency/stored.ts";
import { restartBackoff } from "../../../controllers/shared/backoff.ts";

export const t0 = Date.parse("2026-01-01T00:00:00.000Z");
export const gcMs = 300_000;
export const updateWaitMs = 10_000;
export const backoff = restartBackoff();
export const dependency = "logagent";

/** Container `index` of the pod at `slot` ("node|scope"), version `version`, as the cache holds it. */
export function container(
  at: { slot?: string; version?: number; index?: number; format?: "1" },
  over: Partial<CachedContainer> = {},
): CachedContainer {
  const slot = parseSlotKey(at.slot ?? "n1|");
  const ref = { dependency, node: slot.node, scope: slot.scope, version: at.version ?? 1, index: at.index ?? 0 };
  const labels = containerLabels(ref);
  if (at.format === "1") delete (labels as Record<string, string>)["io.capstan.format"];
  return cachedContainer({ node: slot.node, name: containerName(ref), labels, startedAt: t0 - 60_000 }, over);
}

/** A stored dependency at `version` with `podSize` containers. */
export function spec(version = 1, podSize = 1, over: Partial<StoredDependency> = {}): StoredDependency {
  return {
    name: dependency,
    namespace: "infra",
    containers: Array.from({ length: podSize }, () => ({ image: "img" })),
    version,
    createdAt: new Date(t0).toISOString(),
    updatedAt: new Date(t0).toISOString(),
    ...over,
  } as StoredDependency;
}

/** The view the pass would classify `containers` into for the spec. */
export function view(containers: CachedContainer[], version = 1, podSize = 1): DependencyView {
  return classify(containers, dependency, version, podSize);
}
