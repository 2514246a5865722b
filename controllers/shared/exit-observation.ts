// The exit a restart back-off counts (controllers/shared/restart.ts, countExit), read from a pod's
// most recently stopped container. Pure.
//
// Invariant: one exit per container and restart. The key is `<container id>#<restarts so far>`,
// not the exit's times, because an event and an inspect report the times of one exit differently:
// the same exit seen twice is counted once, and a container restarted and stopped again is a new
// exit even though its id is the same.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import type { ExitObservation } from "./restart.ts";

export function exitObservation(stopped: CachedContainer, restarts: number): ExitObservation {
  return {
    key: `${stopped.id}#${restarts}`,
    exitCode: stopped.exitCode,
    oomKilled: stopped.oomKilled,
    startedAt: stopped.startedAt,
    finishedAt: stopped.finishedAt,
  };
}
