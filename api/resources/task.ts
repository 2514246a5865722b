// Tasks: imperative requests that are not desired state (docs/nodes-and-drift.md). The API writes one
// record under tasks/<id>; the controller that owns its kind acts on it and deletes it when done, so
// a task survives an orchestrator restart and is carried out exactly once to completion.
export interface RefreshTask {
  id: string;
  kind: "refresh";
  /** The PodGroup to refresh at once (GET ?force_update=true). */
  podGroup: string;
  createdAt: string;
}

/**
 * Move instances off node `from` (PATCH /api/nodes?cmd=drift, or the node monitor when a node stays
 * unreachable past -node-timeout). Carried out by the PodGroup controller (controllers/podgroup/
 * drift.ts); deleted once no matching instance is left on `from`. docs/nodes-and-drift.md.
 */
export interface DriftTask {
  id: string;
  kind: "drift";
  /** The node to move instances away from (it may have left the cluster already). */
  from: string;
  /** The node to move them to; absent: the scheduler chooses any node but `from`. */
  to?: string;
  /** Only this PodGroup. */
  podGroup?: string;
  /** Only this InstanceNo of podGroup (1..numInstances). */
  instance?: number;
  /** 1 with `instance` since instances are numbered from 1; absent in older tasks (numbered from 0, read with one added). */
  instanceBase?: number;
  /** Move stateful groups' instances too (their volumes stay behind on `from`). */
  force: boolean;
  /** "request": the API; "node-timeout": the node monitor (auto drift). */
  reason: "request" | "node-timeout";
  createdAt: string;
}

export type Task = RefreshTask | DriftTask;
