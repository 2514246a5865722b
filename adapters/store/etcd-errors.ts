// How failures from the `etcd3` package become the store's typed errors. etcd3 turns gRPC statuses
// into its own classes (castGrpcError), but which of them mean "the store is unreachable, retry"
// is ours to decide: the interface promises StoreUnavailableError for exactly that.
import {
  GRPCCancelledError,
  GRPCDeadlineExceededError,
  GRPCInternalError,
  GRPCUnavailableError,
  EtcdLeaseInvalidError,
} from "etcd3";
import { isBrokenCircuitError } from "cockatiel";
import { LeaseLostError, StoreUnavailableError } from "./errors.ts";

/** etcd's ErrCompacted text (rpctypes.ErrGRPCCompacted, gRPC OutOfRange). */
export function isCompactedMessage(error: unknown): boolean {
  return error instanceof Error && error.message.includes("required revision has been compacted");
}

/** etcd's ErrFutureRev text (rpctypes.ErrGRPCFutureRev, gRPC OutOfRange). */
export function isFutureRevisionMessage(error: unknown): boolean {
  return error instanceof Error && error.message.includes("required revision is a future revision");
}

export function isLeaseNotFound(error: unknown): boolean {
  return (
    error instanceof EtcdLeaseInvalidError ||
    (error instanceof Error && error.message.includes("requested lease not found"))
  );
}

/**
 * True for failures where the request may not have reached a healthy server: connection refused or
 * reset (UNAVAILABLE, also etcd's "no leader" / "request timed out"), the per-call deadline
 * (DEADLINE_EXCEEDED), a channel torn down under the call (CANCELLED, INTERNAL e.g. RST_STREAM,
 * etcd3#153), or etcd3's per-host circuit breaker refusing to try.
 */
export function isUnavailable(error: unknown): boolean {
  return (
    error instanceof GRPCUnavailableError ||
    error instanceof GRPCDeadlineExceededError ||
    error instanceof GRPCCancelledError ||
    error instanceof GRPCInternalError ||
    (error instanceof Error && isBrokenCircuitError(error))
  );
}

/**
 * Maps an etcd3 failure of `what` to the store's errors: unavailability becomes
 * StoreUnavailableError, a missing lease LeaseLostError (when the call named one); anything else
 * (a real server-side refusal) passes through unchanged, since retrying it would not help.
 */
export function mapEtcdError(error: unknown, what: string, endpoints: string, leaseId?: string): unknown {
  if (isUnavailable(error)) {
    const detail = error instanceof Error ? error.message : String(error);
    return new StoreUnavailableError(`etcd ${what} at ${endpoints} failed: ${detail}`, error);
  }
  if (leaseId !== undefined && isLeaseNotFound(error)) return new LeaseLostError(leaseId, error);
  return error;
}

/**
 * With a member down, etcd3 still sends a call to it now and then (its per-host breaker opens
 * after three failures and lets one through every 5 s). gRPC fails such a call before sending
 * anything ("No connection established"), so sending it again, to another member, is safe even
 * for a write (docs/high-availability.md).
 */
export function isUnsent(error: unknown): boolean {
  return /No connection established/.test((error as Error)?.message ?? "");
}

/**
 * The connection broke under the call (the member died, or its socket was reset): the call may or
 * may not have reached the member. Not a deadline: re-sending after one would double the wait.
 */
export function isConnectionLost(error: unknown): boolean {
  return (
    isUnavailable(error) &&
    !(error instanceof GRPCDeadlineExceededError) &&
    !(error instanceof Error && isBrokenCircuitError(error))
  );
}
