// runtime/abort-fanout.ts: many waiters on one AbortSignal share one listener, each runs once on
// abort unless it left first, and the listener leaves the signal with the last waiter.
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { onAbort } from "../../../runtime/abort-fanout.ts";

describe("onAbort", () => {
  it("holds one listener on the signal for any number of waiters, and calls each once", () => {
    const controller = new AbortController();
    const calls: number[] = [];
    const offs = Array.from({ length: 50 }, (_, i) => onAbort(controller.signal, () => calls.push(i)));
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    offs[7]!(); // left before the abort: not called
    controller.abort();
    controller.abort();
    expect(calls).toHaveLength(49);
    expect(calls).not.toContain(7);
    expect(new Set(calls).size).toBe(49);
  });

  it("the listener leaves the signal with its last waiter; a new waiter adds it again", () => {
    const controller = new AbortController();
    const a = onAbort(controller.signal, () => {});
    const b = onAbort(controller.signal, () => {});
    a();
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    b();
    b(); // twice is harmless
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    let called = false;
    onAbort(controller.signal, () => (called = true));
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    controller.abort();
    expect(called).toBe(true);
  });

  it("the same function registered twice runs twice; a waiter that throws does not stop the others", async () => {
    const controller = new AbortController();
    let n = 0;
    const fn = () => n++;
    onAbort(controller.signal, fn);
    onAbort(controller.signal, fn);
    const reported = new Promise<unknown>((resolve) => process.once("uncaughtException", resolve));
    onAbort(controller.signal, () => {
      throw new Error("boom");
    });
    onAbort(controller.signal, fn);
    controller.abort();
    expect(n).toBe(3);
    expect(((await reported) as Error).message).toBe("boom");
  });
});
