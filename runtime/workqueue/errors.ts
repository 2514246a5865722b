// The one error the work queue throws: a bad option or argument, caught at the call that made it,
// before any state changes.

export class WorkQueueArgumentError extends TypeError {
  override readonly name = "WorkQueueArgumentError";

  constructor(
    /** The option or argument at fault, e.g. "backoff.maxMs" or "add.priority". */
    readonly argument: string,
    reason: string,
  ) {
    super(`${argument}: ${reason}`);
  }
}
