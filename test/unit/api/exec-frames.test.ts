// The exec WebSocket's frames (api/orchestrator/exec-frames.ts): Kubernetes' channel byte, then the
// payload; each side's frames round-trip, and what a side must not send is named as an error.
import { describe, expect, it } from "vitest";
import { channel, endFrame, frame, parseClientFrame, parseServerFrame, resizeFrame } from "../../../api/orchestrator/exec-frames.ts";

describe("exec frames", () => {
  it("puts the channel before the payload", () => {
    expect([...frame(channel.stdin, "hi")]).toEqual([0, 0x68, 0x69]);
    expect([...frame(channel.stdinEnd)]).toEqual([255]);
    expect([...frame(channel.stdout, Buffer.from([0, 255]))]).toEqual([1, 0, 255]);
  });

  it("reads the client's frames: stdin bytes as they are, a resize, the end of stdin", () => {
    expect(parseClientFrame(frame(channel.stdin, Buffer.from([0, 1, 2])))).toEqual({ kind: "stdin", data: Buffer.from([0, 1, 2]) });
    expect(parseClientFrame(frame(channel.stdin))).toEqual({ kind: "stdin", data: Buffer.alloc(0) });
    expect(parseClientFrame(resizeFrame(120, 40))).toEqual({ kind: "resize", cols: 120, rows: 40 });
    expect(parseClientFrame(frame(channel.stdinEnd))).toEqual({ kind: "stdinEnd" });
  });

  it.each([
    ["an empty frame", Buffer.alloc(0), /no channel/],
    ["a server's channel", frame(channel.stdout, "x"), /channel 1 is not one a client sends/],
    ["a resize that is not JSON", frame(channel.resize, "80x24"), /cols/],
    ["a resize of zero", frame(channel.resize, JSON.stringify({ cols: 0, rows: 24 })), /from 1 to 65535/],
    ["a resize too large", frame(channel.resize, JSON.stringify({ cols: 80, rows: 70000 })), /65535/],
    ["a fractional resize", frame(channel.resize, JSON.stringify({ cols: 80.5, rows: 24 })), /whole numbers/],
  ])("refuses %s from a client", (_what, message, error) => {
    const parsed = parseClientFrame(message);
    expect("error" in parsed && parsed.error).toMatch(error);
  });

  it("reads the server's frames: stdout, stderr, the end with an exit code or an error", () => {
    expect(parseServerFrame(frame(channel.stdout, "out"))).toEqual({ kind: "stdout", data: Buffer.from("out") });
    expect(parseServerFrame(frame(channel.stderr, "err"))).toEqual({ kind: "stderr", data: Buffer.from("err") });
    expect([...endFrame({ exitCode: 3 })]).toEqual([3, ...Buffer.from('{"exitCode":3}')]);
    expect(parseServerFrame(endFrame({ exitCode: 3 }))).toEqual({ kind: "end", end: { exitCode: 3 } });
    expect(parseServerFrame(endFrame({ error: "no such container" }))).toEqual({ kind: "end", end: { error: "no such container" } });
  });

  it.each([
    ["an empty frame", Buffer.alloc(0), /no channel/],
    ["a client's channel", frame(channel.stdin, "x"), /channel 0 is not one a server sends/],
    ["an end without an exit code or error", frame(channel.end, "{}"), /not \{"exitCode":N\}/],
    ["an end that is not JSON", frame(channel.end, "bye"), /bye/],
  ])("refuses %s from a server", (_what, message, error) => {
    const parsed = parseServerFrame(message);
    expect("error" in parsed && parsed.error).toMatch(error);
  });
});
