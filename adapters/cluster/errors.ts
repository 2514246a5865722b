// Typed cluster errors. Callers branch on the class, never on message text; every error names the
// node and, where there is one, the container reference (id or name) the call was about, so a
// controller can log and requeue the right key without parsing anything.

/** Base of every error a Docker engine call raises through the adapter. */
export abstract class ClusterError extends Error {
  constructor(
    message: string,
    /** Node (engine) the call went to. */
    readonly node: string,
    /** Container id or name the call was about, when there is one. */
    readonly ref: string | undefined,
    /** Adapter operation, e.g. "create", "stop", "listContainers". */
    readonly op: string,
    cause?: unknown,
  ) {
    super(message, { cause });
  }
}

/** The engine has no such container (404), or no such image for a create, or the node is unknown. */
export class NotFoundError extends ClusterError {
  override readonly name = "NotFoundError";
  constructor(
    message: string,
    node: string,
    ref: string | undefined,
    op: string,
    /** What is missing: the container itself, the image a create names, or the node. */
    readonly resource: "container" | "image" | "node",
    cause?: unknown,
  ) {
    super(message, node, ref, op, cause);
  }
}

/**
 * The engine refused because of the container's current state (409): the name is already in use
 * (a duplicate create: the idempotency guard of deterministic names), removing a running container
 * without force, renaming onto a taken name.
 */
export class ConflictError extends ClusterError {
  override readonly name = "ConflictError";
}

/**
 * 304 from the engine: the container already is in the requested state. start() and stop() treat
 * it as success (they are idempotent); it escapes only from calls where it means something else.
 */
export class NotModifiedError extends ClusterError {
  override readonly name = "NotModifiedError";
}

/**
 * The engine could not be reached or did not answer within the call's timeout. For a write the
 * outcome is unknown (the engine may have applied it): callers re-read state before acting again.
 */
export class EngineUnavailableError extends ClusterError {
  override readonly name = "EngineUnavailableError";
  constructor(
    message: string,
    node: string,
    ref: string | undefined,
    op: string,
    /** True when the call's own timeout fired (as opposed to a refused or broken connection). */
    readonly timedOut: boolean,
    cause?: unknown,
  ) {
    super(message, node, ref, op, cause);
  }
}

/** The request is malformed: rejected by our own checks before any call, or by the engine (400). */
export class InvalidRequestError extends ClusterError {
  override readonly name = "InvalidRequestError";
}

/** Any other engine answer (500 and the like): the engine is up but failed the call. */
export class EngineError extends ClusterError {
  override readonly name = "EngineError";
  constructor(
    message: string,
    node: string,
    ref: string | undefined,
    op: string,
    readonly statusCode: number,
    cause?: unknown,
  ) {
    super(message, node, ref, op, cause);
  }
}
