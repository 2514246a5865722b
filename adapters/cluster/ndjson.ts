// Line splitter for newline-delimited JSON streams (Docker's /events). The engine writes one JSON
// object per line, but the transport cuts the body into chunks anywhere: a chunk may hold several
// lines, part of one, or end in the middle of a multi-byte UTF-8 character. So the splitter works on
// bytes and decodes only complete lines (a newline byte never occurs inside a UTF-8 sequence).
//
// A line longer than maxLineBytes is dropped whole (counted in `oversized`) instead of being
// buffered without bound: a stream that never sends a newline must not grow memory forever.

export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  /** True while skipping the rest of an oversized line, up to its newline. */
  private discarding = false;
  /** Lines dropped for exceeding maxLineBytes. */
  oversized = 0;

  constructor(private readonly maxLineBytes = 1 << 20) {
    if (!(maxLineBytes > 0)) throw new RangeError(`maxLineBytes must be positive (got ${maxLineBytes})`);
  }

  /** Feeds one chunk; returns the complete, non-blank lines it finished (without "\n" or "\r\n"). */
  push(chunk: Buffer | string): string[] {
    const buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    const lines: string[] = [];
    let start = 0;
    for (let nl = buf.indexOf(0x0a, start); nl >= 0; nl = buf.indexOf(0x0a, start)) {
      if (this.discarding) {
        this.discarding = false;
      } else if (this.size + (nl - start) > this.maxLineBytes) {
        this.oversized++;
      } else {
        const seg = buf.subarray(start, nl);
        const bytes = this.parts.length === 0 ? seg : Buffer.concat([...this.parts, seg], this.size + seg.length);
        const line = bytes.toString("utf8").replace(/\r$/, "");
        if (line.trim() !== "") lines.push(line);
      }
      this.parts = [];
      this.size = 0;
      start = nl + 1;
    }
    if (start < buf.length && !this.discarding) {
      const tail = buf.subarray(start);
      if (this.size + tail.length > this.maxLineBytes) {
        this.oversized++;
        this.discarding = true;
        this.parts = [];
        this.size = 0;
      } else {
        this.parts.push(tail);
        this.size += tail.length;
      }
    }
    return lines;
  }

  /** Bytes held of an unfinished line. */
  get pendingBytes(): number {
    return this.size;
  }
}
