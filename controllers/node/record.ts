// A node's record (api/resources/node.ts) from what its engine reports and what Capstan's running
// containers reserve. Pure, so the monitor's decisions are testable without an engine.
import { isDeepStrictEqual } from "node:util";
import type { NodeResources, ResourceRequest } from "../../adapters/cluster/index.ts";
import type { NodeRecord } from "../../api/resources/node.ts";

const nanoCpusPerCpu = 1e9;

export function nodeRecord(node: NodeResources, reserved: ResourceRequest, updatedAt: Date): NodeRecord {
  return {
    name: node.name,
    address: node.address,
    endpoint: node.endpoint,
    labels: node.labels,
    state: node.state,
    cpus: node.cpus,
    memoryBytes: node.memoryBytes,
    reserved: { cpus: reserved.nanoCpus / nanoCpusPerCpu, memoryBytes: reserved.memoryBytes },
    containers: node.containers,
    containersRunning: node.containersRunning,
    engineVersion: node.engineVersion,
    ...(node.error !== undefined && { error: node.error }),
    updatedAt: updatedAt.toISOString(),
  };
}

/**
 * The record of a node that cannot be reached (or whose containers cannot be listed): marked
 * unreachable with the reason, keeping what was last known of its capacity and labels, since an
 * engine that is briefly down still has them and `GET /api/nodes` should still show them. The
 * outage's start (unreachableSince) and its auto-drift task carry over from a previous record of
 * the same outage; a new outage starts now.
 */
export function unreachableRecord(node: NodeResources, error: string, previous: NodeRecord | undefined, updatedAt: Date): NodeRecord {
  const known = previous ?? nodeRecord(node, { memoryBytes: 0, nanoCpus: 0 }, updatedAt);
  const { unreachableSince: since, autoDriftTask, ...rest } = known;
  const sameOutage = previous?.state === "unreachable" && since !== undefined;
  return {
    ...rest,
    name: node.name,
    address: node.address,
    endpoint: node.endpoint,
    state: "unreachable",
    error,
    unreachableSince: sameOutage ? since : updatedAt.toISOString(),
    ...(sameOutage && autoDriftTask !== undefined && { autoDriftTask }),
    updatedAt: updatedAt.toISOString(),
  };
}

/** Equal in everything but updatedAt (a rewrite only to refresh updatedAt is a heartbeat). */
export function sameRecord(a: NodeRecord, b: NodeRecord): boolean {
  return isDeepStrictEqual({ ...a, updatedAt: "" }, { ...b, updatedAt: "" });
}
