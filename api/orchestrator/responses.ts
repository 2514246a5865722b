// zod schemas of what the PodGroup API answers, for the OpenAPI document only: the handlers build
// these values from the TypeScript types in api/resources, and the type-level checks at the end of
// this file fail compilation the moment a schema and its type drift apart.
import { z } from "zod";
import {
  ContainerSpec,
  Name,
  PodGroupSpec,
  PodSpec,
  dependencyPolicies,
  groupStates,
  podStates,
  restartPolicies,
  type ContainerStatus,
  type PodGroupWithSpec,
  type PodStatus,
  type StoredPodGroup,
} from "../resources/podgroup.ts";

/** The spec as stored and shown: enums in their string form, server-managed fields filled in. */
export const StoredPodGroupSchema = PodGroupSpec.extend({
  restartPolicy: z.enum(restartPolicies),
  pod: PodSpec.extend({
    name: Name,
    version: z.number().int().positive().describe("Bumped by every PATCH cmd=spec; containers are labelled with it"),
    containers: z.array(ContainerSpec),
    dependencies: z.array(z.strictObject({ podName: Name, policy: z.enum(dependencyPolicies) })).optional(),
  }),
  createdAt: z.string().describe("RFC 3339"),
  updatedAt: z.string().describe("RFC 3339"),
  deleting: z.boolean().optional().describe("Set by DELETE; the controller is removing the group"),
  refreshRequestedAt: z.string().optional(),
  restartedAt: z.string().optional().describe("RFC 3339: when the last rolling restart was asked for (POST /api/podgroups/restart)"),
});

export const ContainerStatusSchema = z.object({
  id: z.string(),
  name: z.string(),
  node: z.string(),
  nodeIp: z.string(),
  ip: z.string(),
  hostPort: z.number().int().optional(),
  containerPort: z.number().int().optional(),
  status: z.string(),
  exitCode: z.number().int().optional(),
  startedAt: z.string().optional(),
});

export const PodStatusSchema = z.object({
  instanceNo: z.number().int(),
  state: z.enum(podStates),
  lastError: z.string(),
  restartCount: z.number().int(),
  driftCount: z.number().int(),
  version: z.number().int(),
  node: z.string(),
  containers: z.array(ContainerStatusSchema),
  dependencies: z
    .array(z.object({ podName: z.string(), policy: z.enum(dependencyPolicies) }))
    .optional()
    .describe("The pod.dependencies of the version this pod runs; absent when unknown"),
  previous: z
    .array(ContainerStatusSchema)
    .optional()
    .describe("The stopped containers of the pod a rollout step or a rolling restart replaced last (one per container index), for logs?previous=true; absent when none"),
});

export const PodGroupWithSpecSchema = z.object({
  spec: StoredPodGroupSchema,
  state: z.enum(groupStates),
  lastError: z.string(),
  updatedAt: z.string(),
  observedVersion: z.number().int().describe("The pod version the controller last converged to (0: not yet)"),
  pods: z.array(PodStatusSchema),
});

export const AcceptedSchema = z.object({
  message: z.string(),
  checkUrl: z.string().describe("GET it to follow the change, e.g. /api/podgroups?name=web"),
});

/**
 * One record of GET /api/podgroups/logs with Accept: application/x-ndjson: a line of a container's
 * stdout or stderr, or a failure to read that container's log (then `error`, and no line).
 */
export const LogRecordSchema = z.object({
  instance: z.number().int().describe("The instance (instanceNo) the line comes from"),
  container: z.number().int().describe("The container's index in the pod (0 for the first)"),
  node: z.string().describe("The node the container runs on"),
  stream: z.enum(["stdout", "stderr"]).optional().describe("Which stream; a container with a TTY has only stdout. Absent on a failure"),
  time: z.string().optional().describe("The engine's time of the line (RFC 3339, UTC, nine fractional digits); only with timestamps=true"),
  line: z.string().optional().describe("The line, without its line end. Absent on a failure"),
  error: z.string().optional().describe("Only on a failure: why this container's log could not be read (further); the others go on"),
});

const Detail = z.object({ path: z.string().describe("The field or parameter, e.g. pod.containers[0].image"), message: z.string() });

export const BadRequestSchema = z.object({ code: z.literal("BadRequest"), message: z.string(), details: z.array(Detail) });
export const NotFoundSchema = z.object({ code: z.literal("NotFound"), message: z.string() });
export const NotAllowedSchema = z.object({
  code: z.literal("NotAllowed"),
  reason: z.enum(["AlreadyExists", "InsufficientResources", "InUse", "DependencyDeleting"]),
  message: z.string(),
});
export const UnavailableSchema = z.object({ code: z.literal("Unavailable"), message: z.string() });
export const InternalErrorSchema = z.object({ code: z.literal("InternalError"), message: z.string() });

// Compile-time: each schema describes exactly its TypeScript type.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameTypes: [
  Same<z.output<typeof StoredPodGroupSchema>, StoredPodGroup>,
  Same<z.output<typeof ContainerStatusSchema>, ContainerStatus>,
  Same<z.output<typeof PodStatusSchema>, PodStatus>,
  Same<z.output<typeof PodGroupWithSpecSchema>, PodGroupWithSpec>,
] = [true, true, true, true];
void sameTypes;
