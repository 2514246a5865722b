// Create a container under its deterministic name, or adopt the one already there. The same for
// PodGroup instances and dependency pods: a controller names each container of a pod so that a
// second create of it fails with ConflictError (docs/podgroup-controller.md, docs/dependencies.md,
// "What runs where").
//
// Invariants, kept here:
// - one container per name and node: a create that meets a conflict never creates a second one; it
//   inspects the container of that name and either adopts it (it is ours: an earlier attempt that
//   crashed or timed out before its answer was recorded) or refuses with ForeignContainerError;
// - read-your-own-writes: a created container is recorded in the cache at once (recordCreated),
//   an adopted one with what its inspect says (recordDetails), so the pass sees it right away;
// - a container that is not ours is never touched: ForeignContainerError names it, and the caller
//   reports it as the pod's error.
import type { ContainerDetails, CreateSpec } from "../../adapters/cluster/index.ts";
import { ConflictError } from "../../adapters/cluster/index.ts";
import type { ContainerOpsContext } from "./container-ops.ts";
import { ForeignContainerError } from "./errors.ts";

/** What a controller creates one container from: its deterministic name, create request and limits. */
export interface NamedContainerPlan {
  name: string;
  spec: CreateSpec;
  limits: { memoryBytes: number; nanoCpus: number };
}

export interface AdoptRule {
  /** Whether the container found under the plan's name is the one this plan would create. */
  ours: (found: ContainerDetails) => boolean;
  /** The ForeignContainerError's message when it is not. */
  foreign: (found: ContainerDetails) => string;
}

/**
 * Create `plan` on `node` and record it in the cache; on a name conflict, inspect the container of
 * that name and adopt it when `rule.ours` says so, else throw ForeignContainerError. Any other
 * failure of the create or the inspect is rethrown as it is.
 */
export async function createOrAdopt(ops: ContainerOpsContext, node: string, plan: NamedContainerPlan, rule: AdoptRule): Promise<"created" | "adopted"> {
  try {
    const ref = await ops.cluster.create(node, plan.name, plan.spec, { signal: ops.signal });
    ops.cache.recordCreated({ node, id: ref.id, name: plan.name, image: plan.spec.image, labels: plan.spec.labels ?? {}, limits: plan.limits });
    return "created";
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
    // The name is taken on this node: ours from an earlier attempt (adopted), or not ours.
    const found = await ops.cluster.inspect({ node, id: plan.name }, { signal: ops.signal });
    if (!rule.ours(found)) throw new ForeignContainerError(rule.foreign(found));
    ops.cache.recordDetails(found, undefined);
    return "adopted";
  }
}
