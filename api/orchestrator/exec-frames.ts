// The frames of GET /api/podgroups/exec's WebSocket (docs/api-reference.md, "Exec wire protocol"):
// Kubernetes' channel framing. Every message is a binary frame whose first byte is its channel:
//
//   client -> server   0 stdin bytes    4 resize, JSON {"cols":N,"rows":N}    255 stdin closed (EOF)
//   server -> client   1 stdout bytes   2 stderr bytes    3 the end, JSON {"exitCode":N} or {"error":"..."}
//
// After channel 3 the server closes the socket with code 1000. Pure: the server (exec.ts) and the
// CLI (cli/commands/exec.ts) both encode and decode with these.

export const channel = { stdin: 0, stdout: 1, stderr: 2, end: 3, resize: 4, stdinEnd: 255 } as const;

/** The largest terminal side a resize may name (the engine takes 16-bit sizes). */
export const maxTerminalSide = 65535;

/** How a session ended: the command's exit code, or why it could not run (to its end). */
export type ExecEnd = { exitCode: number } | { error: string };

export type ClientFrame = { kind: "stdin"; data: Buffer } | { kind: "resize"; cols: number; rows: number } | { kind: "stdinEnd" };

export type ServerFrame = { kind: "stdout" | "stderr"; data: Buffer } | { kind: "end"; end: ExecEnd };

/** `data` behind the channel byte. */
export function frame(ch: number, data: Uint8Array | string = Buffer.alloc(0)): Buffer {
  const body = typeof data === "string" ? Buffer.from(data, "utf8") : data;
  const out = Buffer.allocUnsafe(1 + body.length);
  out[0] = ch;
  out.set(body, 1);
  return out;
}

export const resizeFrame = (cols: number, rows: number): Buffer => frame(channel.resize, JSON.stringify({ cols, rows }));

export const endFrame = (end: ExecEnd): Buffer => frame(channel.end, JSON.stringify(end));

/** A client's frame, or what is wrong with it. */
export function parseClientFrame(message: Buffer): ClientFrame | { error: string } {
  if (message.length === 0) return { error: "an empty frame has no channel" };
  const data = message.subarray(1);
  switch (message[0]) {
    case channel.stdin:
      return { kind: "stdin", data };
    case channel.stdinEnd:
      return { kind: "stdinEnd" };
    case channel.resize: {
      const size = parseJson(data) as { cols?: unknown; rows?: unknown } | undefined;
      const side = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= maxTerminalSide;
      if (size === undefined || typeof size !== "object" || size === null || !side(size.cols) || !side(size.rows)) {
        return { error: `a resize (channel 4) is JSON {"cols":N,"rows":N} with whole numbers from 1 to ${maxTerminalSide}` };
      }
      return { kind: "resize", cols: size.cols, rows: size.rows };
    }
    default:
      return { error: `channel ${message[0]} is not one a client sends (0 stdin, 4 resize, 255 stdin closed)` };
  }
}

/** A server's frame, or what is wrong with it. */
export function parseServerFrame(message: Buffer): ServerFrame | { error: string } {
  if (message.length === 0) return { error: "an empty frame has no channel" };
  const data = message.subarray(1);
  switch (message[0]) {
    case channel.stdout:
      return { kind: "stdout", data };
    case channel.stderr:
      return { kind: "stderr", data };
    case channel.end: {
      const end = parseJson(data) as { exitCode?: unknown; error?: unknown } | undefined;
      if (end !== undefined && typeof end === "object" && end !== null) {
        if (typeof end.exitCode === "number" && Number.isInteger(end.exitCode)) return { kind: "end", end: { exitCode: end.exitCode } };
        if (typeof end.error === "string") return { kind: "end", end: { error: end.error } };
      }
      return { error: `the end (channel 3) is not {"exitCode":N} or {"error":"..."}: ${data.toString("utf8").slice(0, 200)}` };
    }
    default:
      return { error: `channel ${message[0]} is not one a server sends (1 stdout, 2 stderr, 3 the end)` };
  }
}

function parseJson(data: Buffer): unknown {
  try {
    return JSON.parse(data.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}
