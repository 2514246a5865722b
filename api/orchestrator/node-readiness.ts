// Readiness of the orchestrator's API (docs/orchestrator.md, "Readiness"): /readyz answers 200 only
// once GET /api/nodes lists every node of the process's -cluster, so a client that waits for
// readiness can schedule at once. Synced informers alone are not enough on a fresh store: the node
// records appear only when the leader's node monitor has written them, a moment later.
//
// The expected names come from the -cluster spec itself (Cluster.nodeNames), never from the
// engines: an engine that hangs or fails must not delay readiness or keep it away for good, and
// its record (then `unreachable`) is what the check waits for.
import type { Informer } from "../../runtime/informer.ts";
import { keys } from "../resources/keys.ts";
import type { NodeRecord } from "../resources/node.ts";

/**
 * True when the node records' cache is synced and holds a record (ready or unreachable) for each
 * of `expected`; otherwise what it waits for, for /readyz to show: "waiting for the node records'
 * cache", or "waiting for node records: n2, n3" naming the missing ones (in `expected`'s order).
 */
export function nodesRecorded(nodes: Pick<Informer<NodeRecord>, "hasSynced" | "get">, expected: readonly string[]): true | string {
  if (!nodes.hasSynced()) return "waiting for the node records' cache";
  const missing = expected.filter((name) => nodes.get(keys.node(name)) === undefined);
  return missing.length === 0 ? true : `waiting for node records: ${missing.join(", ")}`;
}
