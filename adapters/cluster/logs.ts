// A container's log stream as the engine sends it (GET /containers/{id}/logs), turned into frames
// (docs/cluster.md, "Logs"). Pure: no I/O here, the reading is docker-cluster.ts's.
//
// Without a TTY the engine multiplexes stdout and stderr onto one body. Each of its writes is one
// frame: an 8-byte header, then the payload:
//
//   [stream, 0, 0, 0, size (uint32, big-endian)] [size bytes]
//   stream 0 stdin, 1 stdout, 2 stderr, 3 the engine's own error ("Error grabbing logs: ...")
//
// The engine writes each log message with one write, so with timestamps on every frame starts with
// that message's time. A message the engine split (a line longer than its 16 KiB buffer) is several
// frames, only the last ending in "\n". With a TTY there is one raw stream and no headers: the
// container's stdout and stderr were one terminal, and chunk boundaries mean nothing.
//
// Memory is bounded: a frame is held until complete only up to maxFrameBytes; a bigger one is
// passed on in pieces of at most that size, the later pieces marked `continued`.

export type LogStreamName = "stdout" | "stderr";

/** One frame of a container's log: a piece of its stdout or stderr, or the engine's own error text. */
export interface LogFrame {
  /** "system": the engine's message about the log read itself (stdcopy's Systemerr), not the container's output. */
  stream: LogStreamName | "system";
  data: Buffer;
  /** This piece continues the previous frame (a frame larger than maxFrameBytes, passed on in pieces). */
  continued?: boolean;
}

/** The body is not in the multiplexed format (a header with an unknown stream or non-zero padding). */
export class LogFormatError extends Error {
  override readonly name = "LogFormatError";
}

const streams: Record<number, LogFrame["stream"]> = { 0: "stdout", 1: "stdout", 2: "stderr", 3: "system" };

/** Splits a multiplexed log body into frames; feed it the chunks in order. */
export class Demultiplexer {
  private readonly header = Buffer.alloc(8);
  private headerBytes = 0;
  private stream: LogFrame["stream"] = "stdout";
  /** Payload bytes of the current frame still to come. */
  private remaining = 0;
  private parts: Buffer[] = [];
  private held = 0;
  /** Part of the current frame was already passed on (it is larger than maxFrameBytes). */
  private split = false;

  constructor(private readonly maxFrameBytes = 1 << 20) {
    if (!(maxFrameBytes > 0)) throw new RangeError(`maxFrameBytes must be positive (got ${maxFrameBytes})`);
  }

  /** The frames `chunk` completes. Throws LogFormatError when the body is not multiplexed. */
  push(chunk: Buffer): LogFrame[] {
    const out: LogFrame[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining === 0 && this.headerBytes < 8) {
        const n = Math.min(8 - this.headerBytes, chunk.length - at);
        chunk.copy(this.header, this.headerBytes, at, at + n);
        this.headerBytes += n;
        at += n;
        if (this.headerBytes < 8) break;
        this.startFrame(chunk.subarray(at));
        if (this.remaining === 0) this.headerBytes = 0; // an empty frame: nothing to pass on
        continue;
      }
      const n = Math.min(this.remaining, chunk.length - at, this.maxFrameBytes - this.held);
      this.parts.push(chunk.subarray(at, at + n));
      this.held += n;
      this.remaining -= n;
      at += n;
      if (this.remaining === 0) {
        out.push(this.take());
        this.headerBytes = 0;
        this.split = false;
      } else if (this.held >= this.maxFrameBytes) {
        out.push(this.take());
        this.split = true;
      }
    }
    return out;
  }

  /** Bytes of a frame begun but not finished (non-zero at the end of a body: it was cut short). */
  get pendingBytes(): number {
    return this.remaining > 0 ? this.held + this.remaining : this.headerBytes;
  }

  private startFrame(rest: Buffer): void {
    const h = this.header;
    const stream = streams[h[0]!];
    if (stream === undefined || h[1] !== 0 || h[2] !== 0 || h[3] !== 0) {
      // Not a header: the engine wrote plain text (an engine error, or a TTY body read as multiplexed).
      const text = Buffer.concat([h, rest]).toString("utf8").split("\n")[0]!.slice(0, 500);
      throw new LogFormatError(`the engine's log stream is not multiplexed: ${JSON.stringify(text)}`);
    }
    this.stream = stream;
    this.remaining = h.readUInt32BE(4);
  }

  private take(): LogFrame {
    // Copied when it is a slice of a chunk, so a small frame does not keep the whole chunk alive.
    const data = this.parts.length === 1 ? Buffer.from(this.parts[0]!) : Buffer.concat(this.parts, this.held);
    this.parts = [];
    this.held = 0;
    const frame: LogFrame = { stream: this.stream, data };
    if (this.split) frame.continued = true;
    return frame;
  }
}
