// Readiness of the orchestrator's API (docs/orchestrator.md, "Readiness"): /readyz answers 200 only
// once GET /api/nodes lists every node of the process's -cluster, so a client that waits for
// readiness can schedule at once. Synced informers alone are not enough on a fresh store: the node
// records appear only when the leader's node monitor has written them, a moment later.
import type { Informer } from "../../runtime/informer.ts";
import { keys } from "../resources/keys.ts";
import type { NodeRecord } from "../resources/node.ts";

/**
 * True when the node records' cache is synced and holds a record (ready or unreachable) for each
 * of `expected`; false while `expected` is not known yet (undefined).
 */
export function nodesRecorded(nodes: Pick<Informer<NodeRecord>, "hasSynced" | "get">, expected: readonly string[] | undefined): boolean {
  if (expected === undefined || !nodes.hasSynced()) return false;
  return expected.every((name) => nodes.get(keys.node(name)) !== undefined);
}
