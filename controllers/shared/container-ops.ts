// Engine calls on a controller's own containers, with the container cache kept in step: the same
// for PodGroup instances and dependency pods. Every call carries the pass's AbortSignal (the
// cluster adds its own per-call timeout).
import PQueue from "p-queue";
import type { CachedContainer, ContainerCache } from "../../adapters/cluster/container-cache.ts";
import { NotFoundError, type Cluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import type { Logger } from "../../runtime/log.ts";
import { settleAll } from "./settle.ts";

export interface ContainerOpsContext {
  cache: ContainerCache;
  cluster: Cluster;
  signal: AbortSignal;
  log: Logger;
}

/**
 * Inspect `cs` (at most `concurrency` at once) and record the details in the cache; a container
 * gone meanwhile is recorded as removed. A failed inspect is logged, not thrown: the pass goes on
 * with what the cache knows (events keep it current).
 */
export async function inspectAll(ops: ContainerOpsContext, containers: readonly CachedContainer[], concurrency: number): Promise<void> {
  if (containers.length === 0) return;
  const queue = new PQueue({ concurrency });
  await Promise.all(
    containers.map((container) =>
      queue.add(async () => {
        try {
          ops.cache.recordDetails(await ops.cluster.inspect(container, { signal: ops.signal }), container.generation);
        } catch (error) {
          if (error instanceof NotFoundError && error.resource === "container") ops.cache.recordRemoved(container.node, container.id);
          else if (ops.signal.aborted) throw error;
          else ops.log.warn({ err: error, container: container.name }, "inspect failed");
        }
      }),
    ),
  );
}

/**
 * Stop each container (SIGTERM, SIGKILL after `killTimeout` s; skipped when `force`), then remove
 * it with force, so nothing is left behind even when the stop failed. All run at once; the first
 * failure is rethrown after every one settled.
 */
export async function stopAndRemove(ops: ContainerOpsContext, containers: readonly CachedContainer[], killTimeout: number, force = false): Promise<void> {
  await settleAll(
    containers.map(async (container) => {
      if (!force && (container.state === "running" || container.state === "paused" || container.state === "restarting")) {
        try {
          await ops.cluster.stop(container, { timeoutSeconds: killTimeout, signal: ops.signal });
        } catch (error) {
          if (ops.signal.aborted) throw error;
          if (!(error instanceof NotFoundError)) ops.log.warn({ err: error, container: container.name }, "stop failed; removing with force");
        }
      }
      await removeQuietly(ops, container);
      ops.log.info({ container: container.name, node: container.node, force }, "container removed");
    }),
  );
}

/**
 * Start every container of `containers` that is not running, one after another (a pod's containers start
 * in index order). Each start is recorded in the cache with the generation read before the call,
 * so an event that arrived meanwhile (the container died at once) wins over our record
 * (adapters/cluster/container-cache.ts, I3). The first failure is thrown; the containers after it are not started.
 */
export async function startContainers(ops: ContainerOpsContext, containers: readonly CachedContainer[]): Promise<void> {
  for (const container of containers) {
    if (container.state === "running") continue;
    const generation = ops.cache.get(container.node, container.id)?.generation;
    await ops.cluster.start(container, { signal: ops.signal });
    ops.cache.recordStarted(container.node, container.id, generation);
  }
}

/**
 * List `node` (the engine, not the cache) for containers labelled `label` (key=value) and
 * force-remove those `match` selects: what a removal leaves behind when the cache missed a
 * container. Returns how many were removed.
 */
export async function sweepNode(ops: ContainerOpsContext, node: string, label: string, match: (container: ContainerSummary) => boolean): Promise<number> {
  const found = await ops.cluster.listContainers(node, { all: true, filters: { label: [label] }, signal: ops.signal });
  let removed = 0;
  for (const container of found.filter(match)) {
    await removeQuietly(ops, container);
    removed++;
    ops.log.info({ container: container.name, node: container.node }, "leftover container removed");
  }
  return removed;
}

/** Remove with force; a container already gone is not an error. */
async function removeQuietly(ops: ContainerOpsContext, container: { node: string; id: string }): Promise<void> {
  try {
    await ops.cluster.remove(container, { force: true, volumes: true, signal: ops.signal });
  } catch (error) {
    if (!(error instanceof NotFoundError && error.resource === "container")) throw error;
  }
  ops.cache.recordRemoved(container.node, container.id);
}
