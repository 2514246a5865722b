// The gate of the drift-task reconciler (review finding 5): a drift task is not decided while a
// PodGroup pass that read the task list before the task existed is still running.
import { describe, expect, it } from "vitest";
import { PassesInFlight } from "../../../controllers/podgroup/passes.ts";

describe("PassesInFlight", () => {
  it("reports a pass that started below a task's revision until it ends", () => {
    const passes = new PassesInFlight();
    const old = passes.begin(10);
    const later = passes.begin(20);
    expect(passes.startedBefore(15)).toBe(true);
    expect(passes.startedBefore(10)).toBe(false); // it read revision 10: a task written at 10 was in its list
    old();
    expect(passes.startedBefore(15)).toBe(false);
    expect(passes.startedBefore(21)).toBe(true);
    later();
    expect(passes.startedBefore(Number.MAX_SAFE_INTEGER)).toBe(false);
  });

  it("keeps two passes started at the same revision apart", () => {
    const passes = new PassesInFlight();
    const a = passes.begin(5);
    const b = passes.begin(5);
    a();
    expect(passes.startedBefore(6)).toBe(true);
    b();
    expect(passes.startedBefore(6)).toBe(false);
  });
});
