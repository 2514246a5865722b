// Typed store errors. Callers branch on the class, never on message text.

/** The requested revision is below the store's compact revision; history there is gone. */
export class CompactedError extends Error {
  override readonly name = "CompactedError";
  constructor(
    readonly compactRevision: number,
    readonly requestedRevision?: number,
  ) {
    super(
      `revision ${requestedRevision ?? "?"} has been compacted; history starts after ${compactRevision}`,
    );
  }
}

/** The lease expired or was revoked; keys attached to it are gone. */
export class LeaseLostError extends Error {
  override readonly name = "LeaseLostError";
  constructor(readonly leaseId: string, cause?: unknown) {
    super(`lease ${leaseId} is lost`, { cause });
  }
}

/** The store could not be reached within the call's deadline. Safe to retry. */
export class StoreUnavailableError extends Error {
  override readonly name = "StoreUnavailableError";
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
  }
}

/** A watch ended for a reason other than compaction (stream broke, server closed it). Relist. */
export class WatchBrokenError extends Error {
  override readonly name = "WatchBrokenError";
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
  }
}
