// The orchestrator's store key layout (docs/store.md lists every component's).
export const orchestratorPrefix = "/platform/orchestrator/";

export const keys = {
  podGroups: `${orchestratorPrefix}podgroups/`,
  podGroupStatus: `${orchestratorPrefix}podgroup-status/`,
  /** Every stored pod version of a group, by group name (api/orchestrator/history.ts). */
  podGroupHistory: `${orchestratorPrefix}podgroup-history/`,
  depends: `${orchestratorPrefix}depends/`,
  dependStatus: `${orchestratorPrefix}depend-status/`,
  tasks: `${orchestratorPrefix}tasks/`,
  /** Node records (capacity, reservations, state) written by the node monitor; read by the API. */
  nodes: `${orchestratorPrefix}nodes/`,
  leader: `${orchestratorPrefix}leader`,
  /** Events recorded by the controllers (api/resources/event.ts; docs/events.md). */
  events: `${orchestratorPrefix}events/`,
  podGroup: (name: string) => `${orchestratorPrefix}podgroups/${name}`,
  podGroupStatusOf: (name: string) => `${orchestratorPrefix}podgroup-status/${name}`,
  node: (name: string) => `${orchestratorPrefix}nodes/${name}`,
  task: (id: string) => `${orchestratorPrefix}tasks/${id}`,
} as const;

/** The last path segment of a key: the resource name. */
export function nameOf(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1);
}
