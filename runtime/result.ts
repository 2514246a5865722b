// What a reconcile returns, and how the controller acts on it (controller-runtime's contract,
// without the deprecated `Requeue: true`; docs/runtime.md, "Controller ... and the Result contract"):
//   resolves void / {}              -> success: forget the key's back-off
//   resolves {requeueAfterMs: d}    -> forget the back-off, then run the key again after d ms
//   throws / rejects                -> run the key again after its per-key back-off (grows per failure)
//   throws TerminalError            -> do not retry (the input must change first); counted
// `priority` is the priority the key is re-enqueued with (on requeueAfter); without it, and on
// error, the key keeps the priority it was dequeued with (controller-runtime does the same).
import type { Logger } from "./log.ts";

export interface Result {
  requeueAfterMs?: number;
  priority?: number;
}

export interface ReconcileContext {
  /** Aborted on reconcile timeout, controller stop, or loss of leadership. Pass it to every call. */
  signal: AbortSignal;
  /** Carries controller, key and reconcileID. */
  log: Logger;
  /** 1 for a first try; n + 1 after n consecutive failures of this key (from the queue's back-off). */
  attempt: number;
}

export type Reconciler = (key: string, ctx: ReconcileContext) => Promise<Result | void>;

/** A failure that retrying cannot fix (bad input): the key is not requeued until it changes. */
export class TerminalError extends Error {
  override readonly name = "TerminalError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export function isTerminalError(error: unknown): boolean {
  return error instanceof TerminalError || (error instanceof Error && error.name === "TerminalError");
}
