// Tasks: imperative requests that are not desired state (DESIGN.md section 3). The API writes one
// record under tasks/<id>; the controller that owns its kind acts on it and deletes it when done, so
// a task survives an orchestrator restart and is carried out exactly once to completion.
export interface RefreshTask {
  id: string;
  kind: "refresh";
  /** The PodGroup to refresh at once (GET ?force_update=true). */
  podGroup: string;
  createdAt: string;
}

/** Drift tasks (PATCH /api/nodes?cmd=drift) join this union with the nodes issue. */
export type Task = RefreshTask;
