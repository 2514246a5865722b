// The cluster adapter's public surface. Other code imports from here, not from the files behind it.
export type * from "./cluster.ts";
export { ArchiveInputError, buildTar, type ArchiveFile } from "./archive.ts";
export { DockerCluster, defaultEngineLimits, defaultLogsTimeoutMs, type DockerClusterOptions } from "./docker-cluster.ts";
export { patchEnv } from "./env.ts";
export {
  ClusterError,
  ConflictError,
  EngineError,
  EngineUnavailableError,
  InvalidRequestError,
  NotFoundError,
  NotModifiedError,
} from "./errors.ts";
export { defaultEventBackoff, type EventStreamOptions } from "./events.ts";
export { Demultiplexer, LogFormatError } from "./logs.ts";
export { noopNetworkManager, type NetworkManager } from "./network.ts";
export {
  capstanLabelPrefix,
  fits,
  freeCapacity,
  matchesFilters,
  parsePlacementFilter,
  parsePlacementFilters,
  pickNode,
  rankNodes,
  reservationOf,
  scoreNode,
  PlacementFilterError,
  type NodeCapacity,
  type PlacementFilter,
  type PlacementRequest,
  type Reservation,
  type ResourceRequest,
} from "./placement.ts";
export { ClusterSpecError, parseClusterSpec, type ClusterEndpoint, type Transport } from "./spec.ts";
