// Which etcd failures the store may send again (docs/high-availability.md): a call gRPC never
// sent, always; a read whose connection broke, too; never a write whose connection broke, nor
// anything after a deadline.
import { describe, expect, it } from "vitest";
import { GRPCDeadlineExceededError, GRPCInternalError, GRPCUnavailableError } from "etcd3";
import { isConnectionLost, isUnsent, mapEtcdError } from "../../../adapters/store/etcd-errors.ts";
import { StoreUnavailableError } from "../../../adapters/store/errors.ts";

describe("etcd errors", () => {
  it("knows a call gRPC never sent", () => {
    expect(isUnsent(new GRPCUnavailableError("14 UNAVAILABLE: No connection established"))).toBe(true);
    expect(isUnsent(new GRPCUnavailableError("14 UNAVAILABLE: Connection dropped"))).toBe(false);
  });

  it("counts a dropped or reset connection as lost, but not a deadline", () => {
    expect(isConnectionLost(new GRPCUnavailableError("14 UNAVAILABLE: Connection dropped"))).toBe(true);
    expect(isConnectionLost(new GRPCInternalError("13 INTERNAL: Received RST_STREAM with code 2"))).toBe(true);
    expect(isConnectionLost(new GRPCDeadlineExceededError("4 DEADLINE_EXCEEDED: Deadline exceeded"))).toBe(false);
    expect(isConnectionLost(new Error("etcdserver: key not found"))).toBe(false);
  });

  it("maps unavailability to StoreUnavailableError naming the call and endpoints", () => {
    const mapped = mapEtcdError(new GRPCUnavailableError("14 UNAVAILABLE: Connection dropped"), "put", "etcd://a:1");
    expect(mapped).toBeInstanceOf(StoreUnavailableError);
    expect((mapped as Error).message).toBe("etcd put at etcd://a:1 failed: 14 UNAVAILABLE: Connection dropped");
  });
});
