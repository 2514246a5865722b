// Errors a controller's pass raises and its caller tells apart. Both end the pass; the work queue
// retries it with back-off.

/** Someone else wrote the status between our read and our write: re-read and try again. */
export class StatusConflictError extends Error {
  override readonly name = "StatusConflictError";
}

/** A container of our deterministic name exists on the node but is not ours: never touched. */
export class ForeignContainerError extends Error {
  override readonly name = "ForeignContainerError";
}
