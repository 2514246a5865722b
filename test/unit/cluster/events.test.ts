// The watcher's reconnect logic against an in-process event source (streams are PassThroughs the
// test writes to). The real engines are exercised by test/integration/cluster/events.test.ts.
import { PassThrough, type Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import type { ClusterEvent, ContainerSummary, EventFilters, Subscription } from "../../../adapters/cluster/cluster.ts";
import { watchEvents, type EventSource } from "../../../adapters/cluster/events.ts";

const fast = { backoff: { initialMs: 5, maxMs: 20, jitter: 0 }, connectTimeoutMs: 200 };

function line(action: string, id: string, time = 1000): string {
  return `${JSON.stringify({ Type: "container", Action: action, Actor: { ID: id, Attributes: { name: id, l: "v" } }, time, timeNano: time * 1e9 })}\n`;
}

function summary(id: string): ContainerSummary {
  return { node: "n1", id, name: id, image: "i", imageId: "i", command: "", created: 0, state: "running", status: "", labels: {}, networkMode: "none", ports: [] };
}

/**
 * A scripted engine: each open() takes the next planned outcome. Like Docker, it keeps the events
 * it has emitted and replays those at or after a `since` (engine seconds) into a new stream.
 */
class FakeSource implements EventSource {
  readonly node = "n1";
  opens: { filters: EventFilters }[] = [];
  history: { time: number; line: string }[] = [];
  streams: PassThrough[] = [];
  listed: (string[] | undefined)[] = [];
  containers: ContainerSummary[] = [];
  plan: ("ok" | "refuse" | "hang")[] = [];
  listGate: Promise<void> = Promise.resolve();

  open(query: { filters: EventFilters }, signal: AbortSignal): Promise<Readable> {
    this.opens.push(query);
    const since = (query as { since?: number }).since;
    const step = this.plan.shift() ?? "ok";
    if (step === "refuse") return Promise.reject(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
    if (step === "hang") {
      return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
    }
    const s = new PassThrough();
    signal.addEventListener("abort", () => s.destroy(), { once: true });
    this.streams.push(s);
    if (since !== undefined) for (const h of this.history) if (h.time >= since) s.write(h.line);
    return Promise.resolve(s);
  }

  /** An event happens on the engine: recorded, and sent on the current stream if it is open. */
  emit(action: string, id: string, time: number): void {
    const l = line(action, id, time);
    this.history.push({ time, line: l });
    const s = this.streams.at(-1);
    if (s && !s.writableEnded && !s.destroyed) s.write(l);
  }

  async list(label: string[] | undefined): Promise<ContainerSummary[]> {
    this.listed.push(label);
    await this.listGate;
    return [...this.containers];
  }
}

async function until(what: string, cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

function brief(e: ClusterEvent): string {
  if (e.type === "node") return `node:${e.state}`;
  if (e.type === "relist") return `relist:${e.containers.map((c) => c.id).join("+")}`;
  return `${e.action}:${e.id}`;
}

let sub: Subscription | undefined;
afterEach(async () => {
  await sub?.unsubscribe();
  sub = undefined;
});

describe("event watcher", () => {
  it("relists after connecting and delivers events that arrived during the relist after it", async () => {
    const src = new FakeSource();
    src.containers = [summary("a")];
    let release!: () => void;
    src.listGate = new Promise((r) => (release = r));
    const got: string[] = [];
    sub = watchEvents([src], (e) => got.push(brief(e)), { label: ["io.capstan.format"] }, fast);
    await until("open", () => src.streams.length === 1);
    src.streams[0]!.write(line("start", "b"));
    await new Promise((r) => setTimeout(r, 10));
    expect(got).toEqual([]); // held back until the relist is out
    release();
    await until("relist", () => got.length === 3);
    src.streams[0]!.write(line("die", "b"));
    await until("live event", () => got.length === 4);
    expect(got).toEqual(["node:ready", "relist:a", "start:b", "die:b"]);
    expect(src.opens[0]).toEqual({ filters: { label: ["io.capstan.format"] } });
    expect(src.listed).toEqual([["io.capstan.format"]]);
  });

  it("reconnects after the stream ends and relists, with no replay of events older than the relist", async () => {
    const src = new FakeSource();
    const got: string[] = [];
    sub = watchEvents([src], (e) => got.push(brief(e)), {}, fast);
    await until("open", () => src.streams.length === 1 && got.length === 2);
    src.emit("create", "c", 1234);
    src.emit("start", "c", 1234);
    await until("events", () => got.includes("start:c"));
    src.streams[0]!.end(); // the engine closed the stream (restart): silently
    src.emit("die", "c", 1235); // while the stream is down
    src.containers = [{ ...summary("c"), state: "exited" }, summary("d")];
    await until("second relist", () => got.includes("relist:c+d"));
    await new Promise((r) => setTimeout(r, 20));
    // The relist (c exited) is the last word: no replayed start:c (or die:c) arrives after it.
    expect(got).toEqual(["node:ready", "relist:", "create:c", "start:c", "relist:c+d"]); // no state flap: the node never failed
    expect(src.opens[1]).toEqual({ filters: {} });
    expect(sub.connects).toBe(2);
  });

  it("reports unreachable once while connects fail, then ready, and bounds a hanging connect", async () => {
    const src = new FakeSource();
    src.plan = ["refuse", "refuse", "hang", "ok"];
    const got: ClusterEvent[] = [];
    sub = watchEvents([src], (e) => got.push(e), {}, fast);
    await until("relist", () => got.some((e) => e.type === "relist"));
    expect(got.map(brief)).toEqual(["node:unreachable", "node:ready", "relist:"]);
    expect(got[0]).toMatchObject({ error: "connect ECONNREFUSED" });
    expect(src.opens).toHaveLength(4);
  });

  it("treats a failed relist as a failed connection", async () => {
    const src = new FakeSource();
    let fail = true;
    const list = src.list.bind(src);
    src.list = (label) => (fail ? ((fail = false), Promise.reject(new Error("list timed out"))) : list(label));
    const got: string[] = [];
    sub = watchEvents([src], (e) => got.push(brief(e)), {}, fast);
    await until("relist", () => got.includes("relist:"));
    expect(got).toEqual(["node:unreachable", "node:ready", "relist:"]);
    expect(src.streams[0]!.destroyed).toBe(true);
  });

  it("counts and skips bad lines and survives a throwing handler", async () => {
    const src = new FakeSource();
    const got: string[] = [];
    sub = watchEvents(
      [src],
      (e) => {
        got.push(brief(e));
        if (e.type === "container" && e.id === "boom") throw new Error("handler bug");
      },
      {},
      { ...fast, maxLineBytes: 300 },
    );
    await until("ready", () => got.length === 2);
    const s = src.streams[0]!;
    s.write("not json\n" + line("start", "boom").slice(0, 20));
    s.write(line("start", "boom").slice(20) + '{"hello":1}\n' + "x".repeat(400) + "\n");
    s.write(`${JSON.stringify({ Type: "network", Action: "connect", Actor: { ID: "net" } })}\n` + line("stop", "ok"));
    await until("after bad lines", () => got.includes("stop:ok"));
    expect(got).toEqual(["node:ready", "relist:", "start:boom", "stop:ok"]);
    expect(sub.badLines).toBe(3); // not json, not an event, oversized; the network event is not bad
    expect(sub.connects).toBe(1);
  });

  it("stops streams and reconnects on unsubscribe", async () => {
    const src = new FakeSource();
    const got: string[] = [];
    const s = watchEvents([src], (e) => got.push(brief(e)), {}, fast);
    await until("ready", () => got.length === 2);
    await s.unsubscribe();
    expect(src.streams[0]!.destroyed).toBe(true);
    const opens = src.opens.length;
    await new Promise((r) => setTimeout(r, 50));
    expect(src.opens.length).toBe(opens);
    expect(got).toEqual(["node:ready", "relist:"]);
    await s.unsubscribe(); // idempotent
  });
});
