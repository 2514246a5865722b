// A PodGroup's log lines (docs/orchestrator.md, "Logs"): the frames of one container's log turned
// into lines with their times, the `since` parameter, and the two wire formats. Pure.
//
// The engine is always asked for timestamps, whatever the client asked: they are what merges the
// instances in time order. They are shown only when the client asks (timestamps=true).
import type { LogFrame } from "../../adapters/cluster/index.ts";

/** Where lines come from: a container of an instance, on a node. */
export interface LogSource {
  instance: number;
  /** The container's index in the pod (0 for the first). */
  container: number;
  node: string;
}

export interface LogLine extends LogSource {
  stream: "stdout" | "stderr";
  /** The engine's time of the line: RFC 3339, UTC, nine fractional digits; "" when unknown. */
  time: string;
  line: string;
}

/** This source's log could not be read (further); the others go on. */
export interface LogFailure extends LogSource {
  error: string;
  /** The time of the source's last line ("" for none): where a merge by time places the failure. */
  time: string;
}

export type LogRecord = LogLine | LogFailure;

export function isFailure(r: LogRecord): r is LogFailure {
  return "error" in r;
}

/** The engine's timestamp at the start of a message, and the space after it. */
const stamp = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) /;

/** An engine timestamp as RFC 3339 UTC with nine fractional digits (comparable as text). */
function normalTime(seconds: string, fraction: string | undefined, zone: string): string {
  const nanos = (fraction ?? "").padEnd(9, "0");
  if (zone === "Z") return `${seconds}.${nanos}Z`;
  const utc = new Date(`${seconds}${zone}`);
  return Number.isNaN(utc.getTime()) ? "" : `${utc.toISOString().slice(0, 19)}.${nanos}Z`;
}

/** Length of the engine's timestamp prefix at the start of `data` (0 when there is none). */
function stampLength(data: Buffer): number {
  const m = stamp.exec(data.subarray(0, 48).toString("latin1"));
  return m ? m[0].length : 0;
}

export interface AssemblerOptions {
  /** The log is multiplexed (no TTY): every frame is one engine message, starting with its timestamp. */
  framed: boolean;
  /** A longer line is passed on in pieces of this size (default 1 MiB), so memory stays bounded. */
  maxLineBytes?: number;
}

/**
 * Turns one container's frames (asked for with timestamps) into lines: stdout and stderr each have
 * their own unfinished line, the timestamp becomes `time`, a trailing "\r" (a TTY's line end) goes.
 * A message the engine split into several frames is one line: the later frames' timestamps are
 * dropped, the first one's is the line's time.
 */
export class LineAssembler {
  private readonly pending = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  private readonly sizes = { stdout: 0, stderr: 0 };
  private lastTime = "";
  private readonly maxLineBytes: number;

  constructor(
    private readonly source: LogSource,
    private readonly options: AssemblerOptions,
  ) {
    this.maxLineBytes = options.maxLineBytes ?? 1 << 20;
    if (!(this.maxLineBytes > 0)) throw new RangeError(`maxLineBytes must be positive (got ${this.maxLineBytes})`);
  }

  /** The time of the last line seen ("" before any). */
  get time(): string {
    return this.lastTime;
  }

  /** The lines (and engine errors) these frames finish. */
  push(frames: readonly LogFrame[]): LogRecord[] {
    const out: LogRecord[] = [];
    for (const f of frames) {
      if (f.stream === "system") {
        out.push(this.failure(`the engine: ${f.data.toString("utf8").trim()}`));
        continue;
      }
      let data = f.data;
      // A frame that continues an unfinished line is the rest of a message the engine split.
      if (this.options.framed && !f.continued && this.sizes[f.stream] > 0) data = data.subarray(stampLength(data));
      this.feed(f.stream, data, out);
    }
    return out;
  }

  /** The unfinished lines, at the end of the stream. */
  end(): LogRecord[] {
    const out: LogRecord[] = [];
    for (const stream of ["stdout", "stderr"] as const) {
      if (this.sizes[stream] > 0) out.push(this.finish(stream, Buffer.alloc(0)));
    }
    return out;
  }

  /** A failure of this source, placed after its last line. */
  failure(error: string): LogFailure {
    return { ...this.source, error, time: this.lastTime };
  }

  private feed(stream: "stdout" | "stderr", data: Buffer, out: LogRecord[]): void {
    let start = 0;
    for (let nl = data.indexOf(0x0a, start); nl >= 0; nl = data.indexOf(0x0a, start)) {
      out.push(this.finish(stream, data.subarray(start, nl)));
      start = nl + 1;
    }
    let rest = data.subarray(start);
    while (this.sizes[stream] + rest.length > this.maxLineBytes) {
      const room = this.maxLineBytes - this.sizes[stream];
      out.push(this.finish(stream, rest.subarray(0, room)));
      rest = rest.subarray(room);
    }
    if (rest.length > 0) {
      this.pending[stream].push(rest);
      this.sizes[stream] += rest.length;
    }
  }

  private finish(stream: "stdout" | "stderr", last: Buffer): LogLine {
    const parts = this.pending[stream];
    const bytes = parts.length === 0 ? last : Buffer.concat([...parts, last]);
    this.pending[stream] = [];
    this.sizes[stream] = 0;
    let text = bytes.toString("utf8");
    const m = stamp.exec(text);
    if (m) {
      const time = normalTime(m[1]!, m[2], m[3]!);
      if (time !== "") this.lastTime = time;
      text = text.slice(m[0].length);
    }
    if (text.endsWith("\r")) text = text.slice(0, -1);
    return { ...this.source, stream, time: this.lastTime, line: text };
  }
}

const durationPart = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
const unitMs: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const rfc3339 = /^(\d{4}-\d\d-\d\d)[Tt](\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?([Zz]|[+-]\d\d:\d\d)$/;

/**
 * `since` as milliseconds since the epoch: a duration before `nowMs` ("10m", "1h30m", "500ms", as
 * the CLI writes durations) or an RFC 3339 time ("2026-11-23T01:00:00Z", fractions kept to the
 * microsecond). An error message when it is neither.
 */
export function parseSince(text: string, nowMs: number): { ms: number } | { error: string } {
  const m = rfc3339.exec(text);
  if (m) {
    const whole = Date.parse(`${m[1]}T${m[2]}${m[4]!.toUpperCase()}`);
    if (Number.isNaN(whole)) return { error: `${JSON.stringify(text)} is not a valid time` };
    // Kept to the microsecond, rounded down: milliseconds since the epoch in a double hold no finer
    // (a unit in the last place is about 0.24 µs today), and a finer fraction could round up past
    // the time of the very line it was read from, which `since` ("at or after") must keep.
    const micros = Number((m[3] ?? "").padEnd(6, "0").slice(0, 6));
    return { ms: whole + micros / 1000 };
  }
  if (text === "0") return { ms: nowMs };
  let total = 0;
  let at = 0;
  while (at < text.length) {
    durationPart.lastIndex = at;
    const d = durationPart.exec(text);
    if (!d) return { error: "must be a duration (10m, 1h30m) or an RFC 3339 time (2026-11-23T01:00:00Z)" };
    total += Number(d[1]) * unitMs[d[2]!]!;
    at = durationPart.lastIndex;
  }
  if (text === "") return { error: "must be a duration (10m, 1h30m) or an RFC 3339 time (2026-11-23T01:00:00Z)" };
  return { ms: Math.max(0, nowMs - total) };
}

/** "0@n1" for an instance's first container, "0-c1@n1" for its second (as container names end). */
export function prefixOf(s: LogSource): string {
  return `${s.instance}${s.container > 0 ? `-c${s.container}` : ""}@${s.node}`;
}

/** text/plain: `PREFIX STREAM [TIME ]LINE`, STREAM being stdout, stderr or error. */
export function textRecord(r: LogRecord, timestamps: boolean): string {
  if (isFailure(r)) return `${prefixOf(r)} error ${r.error.replace(/\r?\n/g, " ")}\n`;
  return `${prefixOf(r)} ${r.stream} ${timestamps && r.time !== "" ? `${r.time} ` : ""}${r.line}\n`;
}

/** application/x-ndjson: one object per line; `time` only when timestamps were asked for. */
export function ndjsonRecord(r: LogRecord, timestamps: boolean): string {
  const { instance, container, node } = r;
  if (isFailure(r)) return `${JSON.stringify({ instance, container, node, error: r.error })}\n`;
  const record = { instance, container, node, stream: r.stream, ...(timestamps && r.time !== "" ? { time: r.time } : {}), line: r.line };
  return `${JSON.stringify(record)}\n`;
}
