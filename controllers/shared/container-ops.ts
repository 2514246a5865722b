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
export async function inspectAll(x: ContainerOpsContext, cs: readonly CachedContainer[], concurrency: number): Promise<void> {
  if (cs.length === 0) return;
  const q = new PQueue({ concurrency });
  await Promise.all(
    cs.map((c) =>
      q.add(async () => {
        try {
          x.cache.recordDetails(await x.cluster.inspect(c, { signal: x.signal }), c.generation);
        } catch (e) {
          if (e instanceof NotFoundError && e.resource === "container") x.cache.recordRemoved(c.node, c.id);
          else if (x.signal.aborted) throw e;
          else x.log.warn({ err: e, container: c.name }, "inspect failed");
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
export async function stopAndRemove(x: ContainerOpsContext, cs: readonly CachedContainer[], killTimeout: number, force = false): Promise<void> {
  await settleAll(
    cs.map(async (c) => {
      if (!force && (c.state === "running" || c.state === "paused" || c.state === "restarting")) {
        try {
          await x.cluster.stop(c, { timeoutSeconds: killTimeout, signal: x.signal });
        } catch (e) {
          if (x.signal.aborted) throw e;
          if (!(e instanceof NotFoundError)) x.log.warn({ err: e, container: c.name }, "stop failed; removing with force");
        }
      }
      await removeQuietly(x, c);
      x.log.info({ container: c.name, node: c.node, force }, "container removed");
    }),
  );
}

/**
 * List `node` (the engine, not the cache) for containers labelled `label` (key=value) and
 * force-remove those `match` selects: what a removal leaves behind when the cache missed a
 * container. Returns how many were removed.
 */
export async function sweepNode(x: ContainerOpsContext, node: string, label: string, match: (c: ContainerSummary) => boolean): Promise<number> {
  const found = await x.cluster.listContainers(node, { all: true, filters: { label: [label] }, signal: x.signal });
  let removed = 0;
  for (const c of found.filter(match)) {
    await removeQuietly(x, c);
    removed++;
    x.log.info({ container: c.name, node: c.node }, "leftover container removed");
  }
  return removed;
}

/** Remove with force; a container already gone is not an error. */
async function removeQuietly(x: ContainerOpsContext, c: { node: string; id: string }): Promise<void> {
  try {
    await x.cluster.remove(c, { force: true, volumes: true, signal: x.signal });
  } catch (e) {
    if (!(e instanceof NotFoundError && e.resource === "container")) throw e;
  }
  x.cache.recordRemoved(c.node, c.id);
}
