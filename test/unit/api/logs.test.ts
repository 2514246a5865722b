// PodGroup logs without an engine: frames to lines (api/orchestrator/log-lines.ts), `since`, the two
// wire formats, the merges (log-merge.ts) and which containers a request reads (logs.ts).
import { describe, expect, it } from "vitest";
import type { LogFrame } from "../../../adapters/cluster/index.ts";
import { unixTime } from "../../../adapters/cluster/log-stream.ts";
import { LineAssembler, ndjsonRecord, parseSince, prefixOf, textRecord, type LogLine, type LogRecord } from "../../../api/orchestrator/log-lines.ts";
import { mergeByTime, mergeFollowing } from "../../../api/orchestrator/log-merge.ts";
import { logTargets, maxLogStreams } from "../../../api/orchestrator/logs.ts";
import type { PodGroupWithSpec, PodStatus } from "../../../api/resources/podgroup.ts";
import { pollUntil } from "../../helpers/poll.ts";

const src = { instance: 1, container: 0, node: "n2" };
const t = (n: number) => `2026-11-23T01:05:11.${String(n).padStart(9, "0")}Z`;
const out = (text: string): LogFrame => ({ stream: "stdout", data: Buffer.from(text, "utf8") });
const err = (text: string): LogFrame => ({ stream: "stderr", data: Buffer.from(text, "utf8") });
const lines = (rs: LogRecord[]) => rs.map((r) => ("error" in r ? `error:${r.error}` : `${r.stream}|${r.time}|${r.line}`));

describe("LineAssembler", () => {
  it("takes each line's time from the engine's prefix and keeps stdout and stderr apart", () => {
    const a = new LineAssembler(src, { framed: true });
    const got = a.push([out(`${t(1)} one\n`), err(`${t(2)} oops\n`), out(`${t(3)} \n`), out(`${t(4)} two\n`)]);
    expect(lines(got)).toEqual([`stdout|${t(1)}|one`, `stderr|${t(2)}|oops`, `stdout|${t(3)}|`, `stdout|${t(4)}|two`]);
    expect(got[0]).toMatchObject(src);
  });

  it("joins a message the engine split into frames, dropping the later frames' timestamps", () => {
    const a = new LineAssembler(src, { framed: true });
    expect(a.push([out(`${t(1)} first half, `), err(`${t(2)} other\n`)])).toHaveLength(1);
    expect(lines(a.push([out(`${t(3)} second half\n`)]))).toEqual([`stdout|${t(1)}|first half, second half`]);
  });

  it("in a TTY's raw stream, splits lines wherever the chunks fall, drops the \\r, keeps multi-byte characters", () => {
    const text = `${t(1)} héllo 😀\r\n${t(2)} bye\r\n`;
    const bytes = Buffer.from(text, "utf8");
    for (let i = 0; i <= bytes.length; i++) {
      const a = new LineAssembler(src, { framed: false });
      const got = [...a.push([{ stream: "stdout", data: bytes.subarray(0, i) }]), ...a.push([{ stream: "stdout", data: bytes.subarray(i) }])];
      expect(lines(got), `cut at ${i}`).toEqual([`stdout|${t(1)}|héllo 😀`, `stdout|${t(2)}|bye`]);
    }
  });

  it("passes an unfinished line on at the end, and holds no more of one than the limit", () => {
    const a = new LineAssembler(src, { framed: false, maxLineBytes: 45 });
    const got = a.push([out(`${t(1)} ${"x".repeat(70)}`)]);
    expect(got.map((r) => (r as LogLine).line)).toEqual(["x".repeat(45 - 31), "x".repeat(45)]);
    expect(got.every((r) => r.time === t(1))).toBe(true);
    expect(a.push([err(`${t(2)} no newline`)])).toEqual([]);
    expect(lines(a.end())).toEqual([`stdout|${t(1)}|${"x".repeat(11)}`, `stderr|${t(2)}|no newline`]);
  });

  it("converts an offset time to UTC and keeps a line without a timestamp at the last time", () => {
    const a = new LineAssembler(src, { framed: false });
    const got = a.push([out("2026-11-23T02:05:11.5+01:00 one\nbare\n")]);
    expect(lines(got)).toEqual(["stdout|2026-11-23T01:05:11.500000000Z|one", "stdout|2026-11-23T01:05:11.500000000Z|bare"]);
  });

  it("turns the engine's own error frame into a failure record", () => {
    const a = new LineAssembler(src, { framed: true });
    a.push([out(`${t(5)} x\n`)]);
    expect(a.push([{ stream: "system", data: Buffer.from("Error grabbing logs: gone\n") }])).toEqual([{ ...src, error: "the engine: Error grabbing logs: gone", time: t(5) }]);
  });
});

describe("parseSince", () => {
  const now = Date.parse("2026-11-23T01:00:00Z");
  it.each([
    ["10m", now - 600_000],
    ["1h30m", now - 5_400_000],
    ["1.5s", now - 1_500],
    ["0", now],
    ["2026-11-23T00:00:00Z", Date.parse("2026-11-23T00:00:00Z")],
    ["2026-11-23T01:00:00+01:00", Date.parse("2026-11-23T00:00:00Z")],
    ["2026-11-23T00:00:00.000250Z", Date.parse("2026-11-23T00:00:00Z") + 0.25],
  ])("%s", (text, ms) => {
    expect(parseSince(text, now)).toEqual({ ms });
  });

  it("never asks the engine for a time after the one given (a line's own time keeps that line)", () => {
    // 0.181298999 s: kept to the microsecond it rounded up to .181299 on about 3 % of such times.
    const whole = Date.parse("2026-11-27T06:32:16Z") / 1000;
    expect(unixTime((parseSince("2026-11-27T06:32:16.181298999Z", now) as { ms: number }).ms)).toBe(`${whole}.181298000`);
    for (let i = 0; i < 20_000; i++) {
      const nanos = String(Math.floor(Math.random() * 1e9)).padStart(9, "0");
      const [seconds, fraction] = unixTime((parseSince(`2026-11-27T06:32:16.${nanos}Z`, now) as { ms: number }).ms).split(".");
      expect(Number(seconds)).toBe(whole);
      if (fraction! > nanos) expect.fail(`since .${fraction} is after the line's .${nanos}`);
    }
  });

  it.each(["", "10", "ten minutes", "2026-11-23", "2026-11-23T00:00:00", "-5m", "2026-13-45T00:00:00Z"])("refuses %j", (text) => {
    expect(parseSince(text, now)).toHaveProperty("error");
  });
});

describe("wire formats", () => {
  const line: LogLine = { instance: 0, container: 0, node: "n1", stream: "stderr", time: t(7), line: 'say "hi"' };
  it("text: prefix, stream, the time only when asked", () => {
    expect(textRecord(line, false)).toBe('0@n1 stderr say "hi"\n');
    expect(textRecord(line, true)).toBe(`0@n1 stderr ${t(7)} say "hi"\n`);
    expect(textRecord({ ...line, container: 2 }, false)).toBe('0-c2@n1 stderr say "hi"\n');
    expect(textRecord({ instance: 3, container: 0, node: "n2", error: "gone\nreally", time: "" }, true)).toBe("3@n2 error gone really\n");
    expect(prefixOf({ instance: 12, container: 1, node: "a.b" })).toBe("12-c1@a.b");
  });
  it("NDJSON: one object per line, time only when asked", () => {
    expect(JSON.parse(ndjsonRecord(line, false))).toEqual({ instance: 0, container: 0, node: "n1", stream: "stderr", line: 'say "hi"' });
    expect(JSON.parse(ndjsonRecord(line, true))).toEqual({ instance: 0, container: 0, node: "n1", stream: "stderr", time: t(7), line: 'say "hi"' });
    expect(JSON.parse(ndjsonRecord({ instance: 3, container: 0, node: "n2", error: "gone", time: t(1) }, true))).toEqual({ instance: 3, container: 0, node: "n2", error: "gone" });
    expect(ndjsonRecord(line, true).endsWith("\n")).toBe(true);
    expect(ndjsonRecord(line, true).slice(0, -1)).not.toContain("\n");
  });
});

/** A source that yields these batches, each after the previous was taken. */
async function* batches(...bs: LogRecord[][]): AsyncGenerator<LogRecord[]> {
  for (const b of bs) yield b;
}
const rec = (instance: number, n: number): LogLine => ({ instance, container: 0, node: `n${instance}`, stream: "stdout", time: t(n), line: `i${instance}-${n}` });

async function collect(it: AsyncIterable<LogRecord[]>): Promise<string[]> {
  const got: string[] = [];
  for await (const b of it) got.push(...b.map((r) => ("line" in r ? r.line : `error:${r.error}`)));
  return got;
}

describe("mergeByTime", () => {
  it("interleaves sources by time, whatever their batches, equal times in source order", async () => {
    const a = batches([rec(0, 1), rec(0, 4)], [rec(0, 6)], [], [rec(0, 9)]);
    const b = batches([rec(1, 2)], [rec(1, 3), rec(1, 4), rec(1, 10)]);
    const c = batches([rec(2, 5)]);
    expect(await collect(mergeByTime([a, b, c]))).toEqual(["i0-1", "i1-2", "i1-3", "i0-4", "i1-4", "i2-5", "i0-6", "i0-9", "i1-10"]);
  });

  it("yields batches no larger than asked, and nothing for no sources", async () => {
    const sizes: number[] = [];
    for await (const b of mergeByTime([batches(Array.from({ length: 10 }, (_, i) => rec(0, i)))], 4)) sizes.push(b.length);
    expect(sizes).toEqual([4, 4, 2]);
    expect(await collect(mergeByTime([]))).toEqual([]);
  });

  it("places a failure record at its time", async () => {
    const a = batches([rec(0, 1), rec(0, 5)]);
    const b = batches([rec(1, 2), { instance: 1, container: 0, node: "n1", error: "cut", time: t(2) }]);
    expect(await collect(mergeByTime([a, b]))).toEqual(["i0-1", "i1-2", "error:cut", "i0-5"]);
  });

  it("stops every source when its consumer stops", async () => {
    const stopped: number[] = [];
    const source = (i: number) =>
      (async function* () {
        try {
          for (let n = 0; ; n++) yield [rec(i, n)];
        } finally {
          stopped.push(i);
        }
      })();
    for await (const _ of mergeByTime([source(0), source(1)])) break;
    await new Promise((r) => setImmediate(r));
    expect(stopped.sort()).toEqual([0, 1]);
  });
});

describe("mergeFollowing", () => {
  const gate = () => {
    let open = () => {};
    const opened = new Promise<void>((r) => (open = r));
    return { opened, open };
  };

  it("merges the tails every source sends at once in time order", async () => {
    const a = batches([rec(0, 1), rec(0, 4)], [rec(0, 6)]);
    const b = batches([rec(1, 2), rec(1, 3), rec(1, 5)]);
    expect(await collect(mergeFollowing([a, b], 10_000))).toEqual(["i0-1", "i1-2", "i1-3", "i0-4", "i1-5", "i0-6"]);
  });

  it("lets a record go once every other live source is past it, and after holdMs when one is quiet", async () => {
    const quiet = gate();
    const later = gate();
    async function* a() {
      yield [rec(0, 2)];
      await quiet.opened; // quiet for a while
      yield [rec(0, 7)];
    }
    async function* b() {
      yield [rec(1, 1), rec(1, 3)];
      await later.opened;
    }
    let clock = 0;
    const it = mergeFollowing([a(), b()], 50, 4096, () => clock)[Symbol.asyncIterator]();
    // 1 and 2 go at once (each is behind what the other source has shown); 3 waits for a's next.
    const first: string[] = [];
    while (first.length < 2) first.push(...(await it.next()).value!.map((r: LogRecord) => ("line" in r ? r.line : "")));
    expect(first).toEqual(["i1-1", "i0-2"]);
    // a stays quiet: once 3 has waited holdMs it goes without it.
    const third = it.next();
    clock = 60;
    expect((await third).value!.map((r: LogRecord) => ("line" in r ? r.line : ""))).toEqual(["i1-3"]);
    quiet.open();
    later.open();
    expect(await (async () => {
      const rest: string[] = [];
      for (let r = await it.next(); !r.done; r = await it.next()) rest.push(...r.value.map((x: LogRecord) => ("line" in x ? x.line : "")));
      return rest;
    })()).toEqual(["i0-7"]);
  });

  it("lets no line wait longer than holdMs, even while another source keeps sending earlier times", async () => {
    const never = gate();
    const next = [gate(), gate()];
    async function* quiet(): AsyncGenerator<LogRecord[]> {
      await never.opened;
      yield [];
    }
    async function* late() {
      yield [rec(1, 10)]; // a clock ahead of the others
      await never.opened;
    }
    async function* early() {
      yield [rec(2, 1)];
      await next[0]!.opened;
      yield [rec(2, 2)];
      await next[1]!.opened;
      yield [rec(2, 3)];
      await never.opened;
    }
    let clock = 0;
    const it = mergeFollowing([quiet(), late(), early()], 250, 4096, () => clock)[Symbol.asyncIterator]();
    const got: string[] = [];
    const pending = it.next();
    // The first batches are taken in (at clock 0) and held: the quiet source is behind them all.
    await new Promise((r) => setImmediate(r));
    clock = 300; // they have waited long enough; early's next batch wakes the merge
    next[0]!.open();
    got.push(...(await pending).value!.map((r: LogRecord) => ("line" in r ? r.line : "")));
    // i1-10 went out although early's times are still behind it: it had waited 250 ms.
    expect(got).toEqual(["i2-1", "i2-2", "i1-10"]);
    await it.return(undefined);
  });

  it("stops every source when its consumer stops", async () => {
    // A source waiting for input is stopped once its wait ends (the API aborts the engines' reads).
    const stopped: number[] = [];
    const input = gate();
    const source = (i: number) =>
      (async function* () {
        try {
          yield [rec(i, i)];
          await input.opened;
          yield [rec(i, 10 + i)];
        } finally {
          stopped.push(i);
        }
      })();
    for await (const _ of mergeFollowing([source(0), source(1)], 10)) break;
    input.open();
    await pollUntil("both sources stopped", async () => stopped.length === 2, 2_000, 5);
    expect(stopped.sort()).toEqual([0, 1]);
  });
});

describe("logTargets", () => {
  const pod = (instanceNo: number, containers: string[], state: PodStatus["state"] = "running"): PodStatus => ({
    instanceNo,
    state,
    lastError: "",
    restartCount: 0,
    driftCount: 0,
    version: 1,
    node: `n${instanceNo}`,
    containers: containers.map((name, i) => ({ id: `id-${instanceNo}-${i}`, name, node: `n${instanceNo}`, nodeIp: "127.0.0.1", ip: "", status: "running" })),
  });
  const group = (pods: PodStatus[]) => ({ spec: { name: "web" }, pods }) as unknown as PodGroupWithSpec;

  it("lists every instance's containers in instance order, the container index from the name", () => {
    const g = group([pod(1, ["web.v1-i1-d0"]), pod(0, ["web.v1-i0-d0", "web.v1-i0-d0-c1"]), pod(2, [], "pending")]);
    expect(logTargets(g, undefined)).toEqual([
      { instance: 0, container: 0, node: "n0", id: "id-0-0" },
      { instance: 0, container: 1, node: "n0", id: "id-0-1" },
      { instance: 1, container: 0, node: "n1", id: "id-1-0" },
    ]);
    expect(logTargets(g, 1)).toEqual([{ instance: 1, container: 0, node: "n1", id: "id-1-0" }]);
  });

  it("says which instances exist for an unknown one, and the state of one without a container", () => {
    const g = group([pod(0, ["web.v1-i0-d0"]), pod(2, [], "pending")]);
    expect(logTargets(g, 5)).toEqual({ notFound: "podgroup web has no instance 5 (instances: 0, 2)" });
    expect(logTargets(g, 2)).toEqual({ notFound: "instance 2 of podgroup web has no container (state pending)" });
    expect(logTargets(group([]), 0)).toEqual({ notFound: "podgroup web has no instance 0 (it has none yet)" });
    expect(logTargets(group([]), undefined)).toEqual([]);
  });

  it("refuses to read more containers at once than the bound, but reads one instance of a big group", () => {
    const big = group(Array.from({ length: maxLogStreams + 1 }, (_, i) => pod(i, [`web.v1-i${i}-d0`])));
    expect(logTargets(big, undefined)).toEqual({ tooMany: `podgroup web has ${maxLogStreams + 1} containers; one request reads at most ${maxLogStreams}: ask for one instance` });
    expect(logTargets(big, maxLogStreams)).toHaveLength(1);
    expect(logTargets(group(big.pods.slice(1)), undefined)).toHaveLength(maxLogStreams);
  });
});
