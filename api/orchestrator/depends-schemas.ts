// zod schemas of what the Dependency API answers, for the OpenAPI document only: the handlers build
// these values from the TypeScript types in api/resources/dependency.ts, and the type-level check
// at the end fails compilation the moment a schema and its type drift apart.
import { z } from "zod";
import {
  DependencySpec,
  dependencyPodStates,
  dependencyStates,
  type DependencyPodStatus,
  type DependencyWithStatus,
  type StoredDependency,
} from "../resources/dependency.ts";
import { ContainerSpec } from "../resources/podgroup.ts";
import { ContainerStatusSchema } from "./responses.ts";

export const StoredDependencySchema = DependencySpec.extend({
  containers: z.array(ContainerSpec),
  version: z.number().int().positive().describe("Bumped by every PUT that changes the pod; containers are labelled with it"),
  createdAt: z.string().describe("RFC 3339"),
  updatedAt: z.string().describe("RFC 3339"),
  deleting: z.object({ force: z.boolean() }).optional().describe("Set by DELETE; the controller is removing the pods"),
});

export const DependencyPodStatusSchema = z.object({
  node: z.string(),
  namespace: z.string().describe('The PodGroup namespace served; "" for a node-level pod shared by every namespace'),
  refCount: z.number().int().describe("PodGroup instances on this node (and namespace) that list the dependency"),
  verifyTime: z.string().describe("RFC 3339: the last add, remove or verify"),
  deployStartedAt: z.string().describe("RFC 3339: when the pod was first deployed or adopted"),
  reclaimAt: z.string().optional().describe("RFC 3339, only while refCount is 0: when the pod is reclaimed unless referenced again"),
  state: z.enum(dependencyPodStates),
  version: z.number().int(),
  restartCount: z.number().int(),
  lastError: z.string(),
  containers: z.array(ContainerStatusSchema),
});

export const DependencyWithStatusSchema = z.object({
  spec: StoredDependencySchema,
  state: z.enum(dependencyStates),
  lastError: z.string(),
  updatedAt: z.string(),
  pods: z.array(DependencyPodStatusSchema),
});

// Compile-time: each schema describes exactly its TypeScript type.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameTypes: [
  Same<z.output<typeof StoredDependencySchema>, StoredDependency>,
  Same<z.output<typeof DependencyPodStatusSchema>, DependencyPodStatus>,
  Same<z.output<typeof DependencyWithStatusSchema>, DependencyWithStatus>,
] = [true, true, true];
void sameTypes;
