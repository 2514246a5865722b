// Checks of a PodSpec that the PodGroup API (podgroups.ts) and the Dependency API (depends.ts)
// make alike before they store it (docs/api-reference.md, "PodSpec": `filters`).
import { parsePlacementFilter, type PlacementFilter } from "../../adapters/cluster/index.ts";
import { invalid, type ErrorDetail } from "../http/index.ts";
import type { PodSpec } from "../resources/podgroup.ts";

/** The form a value has after a store round trip (no undefined members), so comparisons are fair. */
export function normalised<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/**
 * Placement filters must parse (`node==x`, `label:k!=v`, ...); a 400 names the bad entry at
 * `path` (`pod.filters` in a PodGroupSpec, `filters` in a PodSpec).
 */
export function placementFilters(pod: Pick<PodSpec, "filters">, path: string): PlacementFilter[] {
  const out: PlacementFilter[] = [];
  const details: ErrorDetail[] = [];
  for (const [i, text] of (pod.filters ?? []).entries()) {
    try {
      out.push(parsePlacementFilter(text));
    } catch (e) {
      details.push({ path: `${path}[${i}]`, message: e instanceof Error ? e.message : String(e) });
    }
  }
  if (details.length > 0) throw invalid(path.startsWith("pod.") ? "PodGroupSpec" : "PodSpec", details);
  return out;
}
