// runtime/ states what it needs from a store structurally (listwatch.ts, leaderelection.ts,
// compactor.ts) so that it imports nothing from adapters/. These checks fail `tsc --noEmit` (run
// before every commit and in CI) if adapters/store's Store ever stops satisfying them; the runtime
// assertions below keep the duck-typed error checks honest against the real error classes.
import { describe, expect, expectTypeOf, it } from "vitest";
import { CompactedError, LeaseLostError, WatchBrokenError } from "../../../adapters/store/errors.ts";
import type { Store } from "../../../adapters/store/store.ts";
import type { CompactableStore } from "../../../runtime/compactor.ts";
import type { ElectionStore } from "../../../runtime/leaderelection.ts";
import { isCompactedError, isLeaseLostError, type ListWatchSource } from "../../../runtime/listwatch.ts";

describe("Store satisfies the runtime's structural interfaces", () => {
  it("is assignable to ListWatchSource, ElectionStore, CompactableStore", () => {
    expectTypeOf<Store>().toMatchTypeOf<ListWatchSource>();
    expectTypeOf<Store>().toMatchTypeOf<ElectionStore>();
    expectTypeOf<Store>().toMatchTypeOf<CompactableStore>();
  });

  it("recognises adapters/store's errors by shape", () => {
    expect(isCompactedError(new CompactedError(42, 7))).toBe(true);
    expect(isCompactedError(new WatchBrokenError("reset"))).toBe(false);
    expect(isCompactedError(Object.assign(new Error("x"), { name: "CompactedError" }))).toBe(false); // no revision
    expect(isLeaseLostError(new LeaseLostError("1"))).toBe(true);
    expect(isLeaseLostError(new WatchBrokenError("reset"))).toBe(false);
  });
});
