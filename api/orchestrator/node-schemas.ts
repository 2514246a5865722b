// The nodes endpoints' query parameters and answers as zod schemas: the handlers validate with the
// query schema, and the OpenAPI document (openapi.ts) lists both from here. Parameter names are
// docs/api-reference.md's (snake_case). An empty optional parameter (`to=`) counts as absent, as clients of the
// original system send every parameter.
import { z } from "zod";
import type { NodeRecord } from "../resources/node.ts";

/** Node names as the -cluster option allows them (adapters/cluster/spec.ts). */
export const nodeNamePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const nodeNameMessage = "must be a node name ([A-Za-z0-9][A-Za-z0-9_.-]{0,62})";

export const driftCommands = ["drift"] as const;

export const DriftQuery = z.object({
  cmd: z.enum(driftCommands, { error: "must be drift" }).describe("drift: move instances off node `from`"),
  from: z.string().regex(nodeNamePattern, nodeNameMessage).describe("The node to move instances away from; required (it may have left the cluster)"),
  to: z
    .string()
    .regex(/^([A-Za-z0-9][A-Za-z0-9_.-]{0,62})?$/, nodeNameMessage)
    .optional()
    .describe("The node to move them to (a node of GET /api/nodes, not `from`); absent: the scheduler chooses, never `from`"),
  pg: z
    .string()
    .regex(/^([a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?)?$/, "must be a PodGroup name")
    .optional()
    .describe("Only this PodGroup (404 if there is none)"),
  pg_instance: z.string().regex(/^(\d{1,9})?$/, "must be a positive integer (instances are numbered from 1)").optional().describe("Only this InstanceNo of pg (1..numInstances); needs pg"),
  force: z.string().regex(/^(true|false)?$/i, "must be true or false").optional().describe("true: stateful PodGroups move too (default false: they stay)"),
});

export const NodeSchema = z.object({
  name: z.string(),
  address: z.string().describe("Where the node's published ports are reached"),
  endpoint: z.string().describe("The Docker endpoint of -cluster"),
  labels: z.record(z.string(), z.string()).describe("Engine labels (placement filters label:k==v)"),
  state: z.enum(["ready", "unreachable"]),
  cpus: z.number(),
  memoryBytes: z.number().int(),
  reserved: z.object({ cpus: z.number(), memoryBytes: z.number().int() }).describe("Summed limits of Capstan's running containers on it"),
  containers: z.number().int().describe("Containers on the engine, all states"),
  containersRunning: z.number().int(),
  engineVersion: z.string(),
  error: z.string().optional().describe("Why it is unreachable"),
  unreachableSince: z.string().optional().describe("RFC 3339; absent when ready"),
  autoDriftTask: z.string().optional().describe("The drift task written when the outage outlasted -node-timeout"),
  updatedAt: z.string().describe("RFC 3339: when the node monitor last wrote the record (about every minute at least)"),
});

export const DriftAcceptedSchema = z.object({
  message: z.string(),
  task: z.string().describe("The drift task's id (store key tasks/<id>); deleted once nothing it covers is left on `from`"),
  from: z.string(),
  to: z.string().nullable(),
  pg: z.string().nullable(),
  pgInstance: z.number().int().nullable(),
  force: z.boolean(),
  checkUrl: z.string().describe("The PodGroup (pg given) or /api/nodes"),
});
export type DriftAccepted = z.output<typeof DriftAcceptedSchema>;

// Compile-time: the node schema describes exactly the record type.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameTypes: [Same<z.output<typeof NodeSchema>, NodeRecord>] = [true];
void sameTypes;
