// Write slots and call bounds of one engine, with calls that never reach Docker (the engine's client
// is created but unused): pure scheduling logic. Real engine calls: test/integration/cluster/.
import { describe, expect, it } from "vitest";
import { Engine } from "../../../adapters/cluster/engine.ts";
import { EngineUnavailableError } from "../../../adapters/cluster/errors.ts";
import { parseClusterSpec } from "../../../adapters/cluster/spec.ts";

const [endpoint] = parseClusterSpec("n1=unix:///nonexistent/docker.sock");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function engine(writeConcurrency: number, timeoutMs = 1000): Engine {
  return new Engine(endpoint!, { writeConcurrency, readTimeoutMs: timeoutMs, writeTimeoutMs: timeoutMs });
}

describe("Engine", () => {
  it("runs at most writeConcurrency writes at once, and reads beside them", async () => {
    const e = engine(3);
    let inFlight = 0;
    let peak = 0;
    const write = () =>
      e.write({
        op: "create",
        run: async () => {
          peak = Math.max(peak, ++inFlight);
          await sleep(10);
          inFlight--;
          return "ok";
        },
      });
    const writes = Array.from({ length: 12 }, write);
    let readDone = false;
    await e.read({ op: "inspect", run: async () => void (readDone = true) });
    expect(readDone).toBe(true);
    expect(inFlight).toBe(3); // the read did not wait behind the queued writes
    expect(await Promise.all(writes)).toEqual(Array(12).fill("ok"));
    expect(peak).toBe(3);
  });

  it("stops waiting for a slot when the caller aborts, and never runs that call", async () => {
    const e = engine(1);
    const ran: string[] = [];
    const first = e.write({ op: "start", run: async () => void (await sleep(30), ran.push("first")) });
    const ac = new AbortController();
    const second = e.write({ op: "start", signal: ac.signal, run: async () => void ran.push("second") });
    ac.abort(new Error("caller gave up"));
    await expect(second).rejects.toThrow("caller gave up");
    await first;
    await e.write({ op: "start", run: async () => void ran.push("third") });
    expect(ran).toEqual(["first", "third"]);
  });

  it("aborts a call at its timeout with EngineUnavailableError, and passes the caller's abort through", async () => {
    const e = engine(2, 50);
    const hang = (_d: unknown, signal: AbortSignal) =>
      new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(Object.assign(new Error("aborted"), { name: "AbortError" }))));
    const t0 = Date.now();
    const err = await e.read({ op: "inspect", ref: "c1", run: hang }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(EngineUnavailableError);
    expect(err).toMatchObject({ node: "n1", ref: "c1", timedOut: true });
    expect(Date.now() - t0).toBeLessThan(1000);

    const ac = new AbortController();
    const p = e.write({ op: "stop", signal: ac.signal, timeoutMs: 10_000, run: hang });
    setTimeout(() => ac.abort(new Error("shutdown")), 10);
    await expect(p).rejects.toThrow("shutdown");
  });

  it("removes its listener from a long-lived caller signal after each call", async () => {
    const e = engine(4);
    const ac = new AbortController();
    let listeners = 0;
    const add = ac.signal.addEventListener.bind(ac.signal);
    const remove = ac.signal.removeEventListener.bind(ac.signal);
    ac.signal.addEventListener = ((...a: Parameters<typeof add>) => (listeners++, add(...a))) as typeof add;
    ac.signal.removeEventListener = ((...a: Parameters<typeof remove>) => (listeners--, remove(...a))) as typeof remove;
    for (let batch = 0; batch < 4; batch++) {
      await Promise.all(Array.from({ length: 4 }, () => e.write({ op: "rename", signal: ac.signal, run: async () => sleep(1) })));
      await Promise.all(Array.from({ length: 4 }, () => e.read({ op: "inspect", signal: ac.signal, run: async () => undefined })));
    }
    expect(listeners).toBe(0);
  });
});
