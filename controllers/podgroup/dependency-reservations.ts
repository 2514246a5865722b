// Memory and CPU held by dependency pods (containers labelled io.capstan.dependency, run by the
// Dependency controller), which PodGroup placement counts next to its own pods: a node full of
// dependency pods is full for a PodGroup too, as the API's feasibility check (node records) says.
//
// Its own container cache (label io.capstan.dependency) says which dependency containers are up;
// their limits are not in a list or an event, so each up container is inspected once (at most 8
// at a time) and its limits remembered while it is cached. A limit that cannot be read counts as
// nothing for that pass (logged); the next pass tries again.
import PQueue from "p-queue";
import type { ContainerCache } from "../../adapters/cluster/container-cache.ts";
import { NotFoundError, reservationOf, type Cluster, type Reservation } from "../../adapters/cluster/index.ts";
import type { Logger } from "../../runtime/log.ts";

export const dependencyLabel = "io.capstan.dependency";
const inspectConcurrency = 8;

export class DependencyReservations {
  /** `node/id` -> limits of a dependency container, read once. */
  private readonly limits = new Map<string, Reservation>();

  constructor(
    private readonly cache: ContainerCache,
    private readonly cluster: Cluster,
    private readonly log: Logger,
  ) {}

  /** Reservations of the dependency containers that are up now. */
  async list(signal: AbortSignal): Promise<Reservation[]> {
    const up = this.cache.list().filter((c) => c.state === "running" || c.state === "paused" || c.state === "restarting");
    const current = new Set(up.map((c) => `${c.node}/${c.id}`));
    for (const key of this.limits.keys()) if (!current.has(key)) this.limits.delete(key);
    const q = new PQueue({ concurrency: inspectConcurrency });
    await Promise.all(
      up
        .filter((c) => !this.limits.has(`${c.node}/${c.id}`) && this.cache.nodeState(c.node) === "ready")
        .map((c) =>
          q.add(async () => {
            try {
              const r = reservationOf(await this.cluster.inspect(c, { signal }));
              if (r) this.limits.set(`${c.node}/${c.id}`, r);
            } catch (e) {
              if (signal.aborted) throw e;
              if (!(e instanceof NotFoundError)) this.log.warn({ err: e, container: c.name }, "cannot read a dependency container's limits");
            }
          }),
        ),
    );
    return up.flatMap((c) => this.limits.get(`${c.node}/${c.id}`) ?? []);
  }
}
