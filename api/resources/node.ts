// Node records: what the orchestrator knows of each Docker engine, written by the node monitor
// (controllers/node) under nodes/<name>, read by the API (feasibility checks, GET /api/nodes)
// without calling Docker.
export interface NodeRecord {
  name: string;
  /** Address published ports are reached at. */
  address: string;
  endpoint: string;
  labels: Record<string, string>;
  state: "ready" | "unreachable";
  cpus: number;
  memoryBytes: number;
  /** Reserved by running Capstan containers (their cpu and memory limits). */
  reserved: { cpus: number; memoryBytes: number };
  containers: number;
  containersRunning: number;
  engineVersion: string;
  error?: string;
  /** Since when the node has been unreachable (RFC 3339), kept across monitor restarts; absent when ready. */
  unreachableSince?: string;
  /** The drift task the monitor wrote for this outage once it lasted -node-timeout (auto drift). */
  autoDriftTask?: string;
  updatedAt: string;
}
