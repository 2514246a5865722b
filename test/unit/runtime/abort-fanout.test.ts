// runtime/abort-fanout.ts: many waiters on one AbortSignal share one listener, each runs once on
// abort unless it left first, and the listener leaves the signal with the last waiter.
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { onAbort, waiterWarningThreshold } from "../../../runtime/abort-fanout.ts";

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

  it("a waiter that another waiter unregisters during the abort does not run, as with EventTarget", () => {
    const controller = new AbortController();
    const calls: string[] = [];
    let offB: () => void = () => {};
    onAbort(controller.signal, () => {
      calls.push("a");
      offB();
    });
    offB = onAbort(controller.signal, () => calls.push("b"));
    onAbort(controller.signal, () => calls.push("c"));
    // The native behaviour the fan-out stands in for.
    const native = new AbortController();
    const nativeCalls: string[] = [];
    const b = () => nativeCalls.push("b");
    native.signal.addEventListener("abort", () => {
      nativeCalls.push("a");
      native.signal.removeEventListener("abort", b);
    });
    native.signal.addEventListener("abort", b);
    native.signal.addEventListener("abort", () => nativeCalls.push("c"));
    native.abort();
    controller.abort();
    expect(nativeCalls).toEqual(["a", "c"]);
    expect(calls).toEqual(["a", "c"]);
  });

  it("warns once, naming the owner and the caller, when one signal's waiters pass the threshold", async () => {
    const controller = new AbortController();
    const warnings: Error[] = [];
    const record = (w: Error) => warnings.push(w);
    process.on("warning", record);
    try {
      const offs = Array.from({ length: waiterWarningThreshold }, () => onAbort(controller.signal, () => {}, "test signal"));
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === "AbortWaitersWarning")).toHaveLength(0);
      for (let i = 0; i < 10; i++) offs.push(onAbort(controller.signal, () => {}, "test signal"));
      await new Promise((resolve) => setImmediate(resolve));
      const ours = warnings.filter((w) => w.name === "AbortWaitersWarning");
      expect(ours).toHaveLength(1);
      expect(ours[0]!.message).toContain(`${waiterWarningThreshold + 1} waiters on one AbortSignal (test signal)`);
      expect(ours[0]!.message).toContain("abort-fanout.test.ts");
      for (const off of offs) off();
      expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    } finally {
      process.off("warning", record);
    }
  });
});
