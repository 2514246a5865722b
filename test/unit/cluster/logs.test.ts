// The demultiplexer of Docker's log stream (adapters/cluster/logs.ts), the engine query and the
// bounds of a stream (log-stream.ts): frames as the engine writes them, cut by the transport at
// every position; timeouts, aborts and a consumer that stops, on a stand-in body.
import { getEventListeners } from "node:events";
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { Demultiplexer, LogFormatError, type LogFrame } from "../../../adapters/cluster/logs.ts";
import { LogCall, logQuery, unixTime } from "../../../adapters/cluster/log-stream.ts";
import { EngineUnavailableError, InvalidRequestError } from "../../../adapters/cluster/errors.ts";

/** One frame as the engine writes it: [stream, 0, 0, 0, size BE] + payload. */
function frame(stream: number, payload: string | Buffer): Buffer {
  const data = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(data.length, 4);
  return Buffer.concat([header, data]);
}

const plain = (frames: LogFrame[]) => frames.map((f) => ({ stream: f.stream, text: f.data.toString("utf8"), ...(f.continued ? { continued: true } : {}) }));

const body = Buffer.concat([
  frame(1, "2026-11-23T01:05:11.000000001Z out one\n"),
  frame(2, "2026-11-23T01:05:11.000000002Z err ✓ 😀\n"),
  frame(1, ""),
  frame(1, "2026-11-23T01:05:11.000000003Z out two\n"),
  frame(3, "Error grabbing logs: log file is gone\n"),
]);
const expected = [
  { stream: "stdout", text: "2026-11-23T01:05:11.000000001Z out one\n" },
  { stream: "stderr", text: "2026-11-23T01:05:11.000000002Z err ✓ 😀\n" },
  { stream: "stdout", text: "2026-11-23T01:05:11.000000003Z out two\n" },
  { stream: "system", text: "Error grabbing logs: log file is gone\n" },
];

describe("Demultiplexer", () => {
  it("yields the same frames whatever single cut the transport makes, at every byte", () => {
    for (let i = 0; i <= body.length; i++) {
      const d = new Demultiplexer();
      const out = [...d.push(body.subarray(0, i)), ...d.push(body.subarray(i))];
      expect(plain(out), `cut at ${i}`).toEqual(expected);
      expect(d.pendingBytes).toBe(0);
    }
  });

  it("yields the same frames when every byte arrives alone", () => {
    const d = new Demultiplexer();
    const out: LogFrame[] = [];
    for (let i = 0; i < body.length; i++) out.push(...d.push(body.subarray(i, i + 1)));
    expect(plain(out)).toEqual(expected);
  });

  it("reports a body cut inside a header or a payload as pending bytes", () => {
    const d = new Demultiplexer();
    d.push(body.subarray(0, 5));
    expect(d.pendingBytes).toBe(5);
    const e = new Demultiplexer();
    const first = frame(1, "abcdef");
    expect(e.push(first.subarray(0, 10))).toEqual([]);
    expect(e.pendingBytes).toBe(6); // 2 payload bytes held, 4 to come
  });

  it("passes a frame larger than its limit on in pieces, the later ones marked continued", () => {
    const d = new Demultiplexer(4);
    const out = d.push(Buffer.concat([frame(2, "0123456789"), frame(1, "ab")]));
    expect(plain(out)).toEqual([
      { stream: "stderr", text: "0123" },
      { stream: "stderr", text: "4567", continued: true },
      { stream: "stderr", text: "89", continued: true },
      { stream: "stdout", text: "ab" },
    ]);
  });

  it("refuses a body that is not multiplexed, quoting what the engine wrote", () => {
    const d = new Demultiplexer();
    expect(() => d.push(Buffer.from("Error grabbing logs: no such file\nmore"))).toThrow(LogFormatError);
    expect(() => new Demultiplexer().push(Buffer.from("Error grabbing logs: no such file\n"))).toThrow(/Error grabbing logs: no such file/);
    // A known stream byte with non-zero padding is not a header either.
    expect(() => new Demultiplexer().push(Buffer.from([1, 0, 1, 0, 0, 0, 0, 1, 0x41]))).toThrow(LogFormatError);
  });

  it("copies a frame out of its chunk", () => {
    const chunk = frame(1, "hello");
    const [f] = new Demultiplexer().push(chunk);
    chunk.fill(0);
    expect(f!.data.toString()).toBe("hello");
  });
});

describe("the engine's log query", () => {
  const ref = { node: "n1", id: "c1" };

  it("asks for both streams, the whole log, no follow and no timestamps by default", () => {
    expect(logQuery(ref, {})).toEqual({ stdout: "1", stderr: "1", follow: "0", timestamps: "0", tail: "all" });
  });

  it("passes follow, timestamps, tail and since (seconds with nanoseconds)", () => {
    expect(logQuery(ref, { follow: true, timestamps: true, tail: 0, since: 1_700_000_000_123.456, stderr: false })).toEqual({
      stdout: "1",
      stderr: "0",
      follow: "1",
      timestamps: "1",
      tail: "0",
      since: "1700000000.123456000",
    });
  });

  it("passes until (output before a time) the same way, and refuses a bad one", () => {
    expect(logQuery(ref, { until: 1_700_000_000_500 }).until).toBe("1700000000.500000000");
    expect(() => logQuery(ref, { until: 0 })).toThrow(/until/);
  });

  it("writes times as seconds.nanoseconds", () => {
    expect(unixTime(0)).toBe("0.000000000");
    expect(unixTime(1_500)).toBe("1.500000000");
    expect(unixTime(1_999.9999999)).toBe("1.999999000"); // rounded down: never later than asked
    expect(unixTime(1_700_000_000_123.25)).toBe("1700000000.123250000");
  });

  it("refuses a bad tail, a bad since, or no stream, before any call", () => {
    expect(() => logQuery(ref, { tail: -1 })).toThrow(InvalidRequestError);
    expect(() => logQuery(ref, { tail: 1.5 })).toThrow(/tail/);
    expect(() => logQuery(ref, { since: Number.NaN })).toThrow(/since/);
    expect(() => logQuery(ref, { stdout: false, stderr: false })).toThrow(/stdout, stderr or both/);
  });
});

describe("LogCall: the bounds of a log stream", () => {
  const ref = { node: "n1", id: "c1" };
  /** A stand-in for the engine's answer body: a stream we write frames into. */
  const body = () => new PassThrough() as unknown as IncomingMessage & PassThrough;

  it("yields the demultiplexed frames of each chunk, and the raw chunks of a TTY", async () => {
    const b = body();
    const stream = new LogCall(ref, undefined, undefined).stream(b, false);
    b.end(Buffer.concat([frame(1, "a\n"), frame(2, "b\n")]));
    const got: string[] = [];
    for await (const batch of stream) got.push(...batch.map((f) => `${f.stream}:${f.data.toString()}`));
    expect(got).toEqual(["stdout:a\n", "stderr:b\n"]);
    const t = body();
    const tty = new LogCall(ref, undefined, undefined).stream(t, true);
    t.end(Buffer.concat([frame(2, "raw")]));
    for await (const batch of tty) expect(batch.map((f) => f.stream)).toEqual(["stdout"]);
  });

  it("ends a read without follow at its timeout with EngineUnavailableError, closing the body", async () => {
    const b = body();
    const stream = new LogCall(ref, undefined, 50).stream(b, false);
    const it = stream[Symbol.asyncIterator]();
    const err = await it.next().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EngineUnavailableError);
    expect(err).toMatchObject({ timedOut: true, node: "n1", ref: "c1", op: "logs" });
    expect(b.destroyed).toBe(true);
  });

  it("rejects with the caller's reason on abort, closes the body, and leaves no listener on the signal", async () => {
    const b = body();
    const ac = new AbortController();
    const stream = new LogCall(ref, ac.signal, undefined).stream(b, false);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(1);
    const it = stream[Symbol.asyncIterator]();
    const pending = it.next();
    const reason = new Error("stop");
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(b.destroyed).toBe(true);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  it("removes its listener when the stream ends by itself", async () => {
    const b = body();
    const ac = new AbortController();
    const stream = new LogCall(ref, ac.signal, 60_000).stream(b, false);
    b.end();
    for await (const _ of stream) expect.fail("no frames");
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  it("stops at once when the consumer breaks out, even while waiting for a chunk", async () => {
    const b = body();
    const stream = new LogCall(ref, undefined, undefined).stream(b, false);
    const it = stream[Symbol.asyncIterator]();
    const pending = it.next();
    await it.return!();
    expect(b.destroyed).toBe(true);
    await expect(pending).resolves.toEqual({ done: true, value: undefined });
    expect(() => stream[Symbol.asyncIterator]()).toThrow(/read once/);
  });

  it("reports a body cut inside a frame, and a body that is not multiplexed", async () => {
    const cut = body();
    const s1 = new LogCall(ref, undefined, undefined).stream(cut, false);
    cut.end(frame(1, "abcdef").subarray(0, 10));
    await expect((async () => { for await (const _ of s1); })()).rejects.toThrow(/inside a frame/);
    const text = body();
    const s2 = new LogCall(ref, undefined, undefined).stream(text, false);
    text.end("Error grabbing logs: gone\n");
    await expect((async () => { for await (const _ of s2); })()).rejects.toMatchObject({ name: "EngineError", message: expect.stringContaining("Error grabbing logs: gone") });
  });

  it("refuses a signal that is already aborted", () => {
    const ac = new AbortController();
    ac.abort(new Error("already"));
    expect(() => new LogCall(ref, ac.signal, undefined)).toThrow("already");
  });
});
