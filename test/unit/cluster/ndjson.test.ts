import { describe, expect, it } from "vitest";
import { LineSplitter } from "../../../adapters/cluster/ndjson.ts";

// Three events as the engine writes them, one with multi-byte UTF-8 (2-, 3- and 4-byte sequences)
// so that some cut points fall inside a character.
const objects = [
  { Type: "container", Action: "create", Actor: { ID: "a1", Attributes: { name: "x" } } },
  { Type: "container", Action: "start", Actor: { ID: "b2", Attributes: { "io.capstan.podgroup": "züri-€-😀" } } },
  { Type: "container", Action: "die", Actor: { ID: "c3", Attributes: { exitCode: "137" } } },
];
const lines = objects.map((o) => JSON.stringify(o));
const body = Buffer.from(lines.map((l) => `${l}\n`).join(""), "utf8");

function feed(chunks: Buffer[], max?: number): { out: string[]; splitter: LineSplitter } {
  const splitter = new LineSplitter(max);
  const out = chunks.flatMap((c) => splitter.push(c));
  return { out, splitter };
}

describe("LineSplitter", () => {
  it("yields every line whatever single cut the transport makes, at every byte position", () => {
    for (let i = 0; i <= body.length; i++) {
      const { out, splitter } = feed([body.subarray(0, i), body.subarray(i)]);
      expect(out, `cut at ${i}`).toEqual(lines);
      expect(splitter.pendingBytes).toBe(0);
    }
  });

  it("yields every line for every pair of cuts (three chunks)", () => {
    // Coarser stride keeps this quadratic test fast while still crossing every line boundary.
    for (let i = 0; i <= body.length; i += 3) {
      for (let j = i; j <= body.length; j += 7) {
        const { out } = feed([body.subarray(0, i), body.subarray(i, j), body.subarray(j)]);
        expect(out, `cuts at ${i},${j}`).toEqual(lines);
      }
    }
  });

  it("yields every line when fed one byte at a time, and all of them from one chunk", () => {
    const bytes = [...body].map((b) => Buffer.from([b]));
    expect(feed(bytes).out).toEqual(lines);
    expect(feed([body]).out).toEqual(lines);
  });

  it("holds a partial last line until its newline arrives", () => {
    const s = new LineSplitter();
    expect(s.push('{"a":1}\n{"b"')).toEqual(['{"a":1}']);
    expect(s.pendingBytes).toBe(4);
    expect(s.push(":2}\r\n\n  \n")).toEqual(['{"b":2}']);
  });

  it("drops an oversized line whole, counts it once and resumes at the next line", () => {
    const long = "x".repeat(50);
    // Oversized within one chunk, and oversized across chunks (the tail grows past the limit).
    const a = feed([Buffer.from(`${long}\nok1\n`)], 20);
    expect(a.out).toEqual(["ok1"]);
    expect(a.splitter.oversized).toBe(1);
    const b = feed([Buffer.from("ok0\n" + long.slice(0, 15)), Buffer.from(long.slice(15, 40)), Buffer.from(`${long.slice(40)}\nok2\n`)], 20);
    expect(b.out).toEqual(["ok0", "ok2"]);
    expect(b.splitter.oversized).toBe(1);
    expect(b.splitter.pendingBytes).toBe(0);
  });

  it("accepts a line of exactly maxLineBytes", () => {
    expect(feed([Buffer.from("abcde\nabcdef\n")], 5).out).toEqual(["abcde"]);
  });
});
