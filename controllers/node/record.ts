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
 * The record of a node whose engine does not answer: marked unreachable with the reason, keeping
 * what was last known of its capacity and labels, since an engine that is briefly down still has
 * them and `GET /api/nodes` should still show them. The outage's start (unreachableSince) and its
 * auto-drift task carry over from a previous record of the same outage, but only from a record
 * written at most `maxAgeMs` ago: an older one (a monitor that stopped long ago) says nothing of
 * what happened since, and inheriting its start would make a brief blip look like a long outage
 * and drain the node at once. A new outage starts now.
 */
export function unreachableRecord(
  node: NodeResources,
  error: string,
  previous: NodeRecord | undefined,
  updatedAt: Date,
  maxAgeMs = Infinity,
): NodeRecord {
  const known = previous ?? nodeRecord(node, { memoryBytes: 0, nanoCpus: 0 }, updatedAt);
  const { unreachableSince: since, autoDriftTask, ...rest } = known;
  const fresh = previous !== undefined && updatedAt.getTime() - Date.parse(previous.updatedAt) <= maxAgeMs;
  const sameOutage = fresh && previous.state === "unreachable" && since !== undefined;
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

/**
 * The record of a node whose engine answers (info) but whose containers could not be listed or
 * inspected in time (a loaded engine): still ready, since reachability is decided by the engine
 * answering at all, with the reason in `error` and the reservation last known (none without a
 * previous ready record), so a slow listing never starts an outage nor an auto drift.
 */
export function listingFailedRecord(node: NodeResources, error: string, previous: NodeRecord | undefined, updatedAt: Date): NodeRecord {
  const reserved = previous?.state === "ready" ? previous.reserved : { cpus: 0, memoryBytes: 0 };
  return { ...nodeRecord(node, { memoryBytes: reserved.memoryBytes, nanoCpus: reserved.cpus * nanoCpusPerCpu }, updatedAt), error };
}

/** Equal in everything but updatedAt (a rewrite only to refresh updatedAt is a heartbeat). */
export function sameRecord(a: NodeRecord, b: NodeRecord): boolean {
  return isDeepStrictEqual({ ...a, updatedAt: "" }, { ...b, updatedAt: "" });
}
