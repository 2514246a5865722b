// Running a command in a container (the engine's exec API; docs/security.md, "Exec"): create the
// exec, start it on a hijacked connection, and hand back a session over that connection.
//
// The connection carries the process's standard streams. Without a TTY its output is multiplexed
// exactly as a log body is (8-byte frame headers, logs.ts's Demultiplexer); with a TTY it is one
// raw stream. What the client writes is the process's stdin; half-closing the connection (our
// write side) closes that stdin. A terminal has no such EOF: end() then types the terminal's EOF
// character (Ctrl-D) instead.
//
// The engine does not end an exec's process when its connection goes away (the process keeps
// running, detached), and its API has no call to kill an exec. So every exec gets a marker in its
// environment (CAPSTAN_EXEC=<random>), which its children inherit, and close() ends whatever still
// runs with it: a second exec that sends SIGKILL to every process whose environment holds the
// marker, then exec inspect until the engine reports the first one no longer running. That needs a
// shell (`sh`, `tr`, `grep`, `kill`) in the image; without one, close() reports that it could not
// make sure (a process that clears its own environment escapes it the same way).
//
// Every engine call is bounded by a timeout; none of them queues behind the node's write slots (an
// exec changes no container and must not wait behind image pulls: it is interactive).
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import type { CallOptions, ContainerRef, ExecOptions, ExecSession } from "./cluster.ts";
import { ClusterError, EngineError, EngineUnavailableError, InvalidRequestError, NotFoundError } from "./errors.ts";
import { toClusterError, type Engine } from "./engine.ts";
import { Demultiplexer, type LogFrame } from "./logs.ts";

/** The environment variable that marks an exec's processes (see above). */
export const execMarkerVariable = "CAPSTAN_EXEC";

/** Kills every process whose environment holds the marker ($1), the exec's and its children. */
const killScript =
  'for d in /proc/[0-9]*; do if tr "\\000" "\\n" < "$d/environ" 2>/dev/null | grep -qxF "$1"; then kill -9 "${d#/proc/}" 2>/dev/null; fi; done; true';

export interface ExecTimeouts {
  /** Creating and starting the exec, and starting the killer, ms. */
  openTimeoutMs: number;
  /** Each inspect and resize, ms. */
  callTimeoutMs: number;
  /** How long close() waits for the engine to report the process gone after the kill, ms. */
  killWaitMs: number;
}

/** The most arguments, and bytes of them, one exec takes (a command line, not a payload). */
export const maxExecArgs = 1024;
export const maxExecArgBytes = 128 * 1024;

/** InvalidRequestError unless `cmd` is a command the engine can run. */
export function checkExecCommand(ref: ContainerRef, cmd: readonly string[]): void {
  const bad = (what: string) => new InvalidRequestError(`exec in ${ref.id} on ${ref.node}: ${what}`, ref.node, ref.id, "exec");
  if (!Array.isArray(cmd) || cmd.length === 0) throw bad("no command");
  if (cmd.length > maxExecArgs) throw bad(`more than ${maxExecArgs} arguments`);
  if (cmd.some((a) => typeof a !== "string" || a.includes("\0"))) throw bad("an argument is not a string without NUL characters");
  if (cmd[0] === "") throw bad("the command is empty");
  if (cmd.reduce((n, a) => n + Buffer.byteLength(a), 0) > maxExecArgBytes) throw bad(`the arguments exceed ${maxExecArgBytes} bytes`);
}

/** Creates and starts an exec in `ref`'s container; resolves with the session once it runs. */
export async function openExec(engine: Engine, ref: ContainerRef, options: ExecOptions, timeouts: ExecTimeouts): Promise<ExecSession> {
  checkExecCommand(ref, options.cmd);
  const tty = options.tty === true;
  const stdin = options.stdin === true;
  const marker = `${execMarkerVariable}=${randomBytes(16).toString("hex")}`;
  const openBy = Date.now() + timeouts.openTimeoutMs;
  const id = await engine.read({
    op: "exec",
    ref: ref.id,
    signal: options.signal,
    missing: "container",
    timeoutMs: timeouts.openTimeoutMs,
    run: async (d, signal) => {
      const body = {
        Cmd: [...options.cmd],
        AttachStdin: stdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: tty,
        Env: [marker],
        ...(options.user !== undefined ? { User: options.user } : {}),
        abortSignal: signal,
      };
      return (await d.getContainer(ref.id).exec(body)).id;
    },
  });
  const socket = await engine.read({
    op: "exec",
    ref: ref.id,
    signal: options.signal,
    missing: "container",
    timeoutMs: Math.max(1, openBy - Date.now()),
    run: (d, signal) => dialExec(d, id, tty, signal),
  });
  return new DockerExecSession(engine, ref, id, marker, { tty, stdin, user: options.user }, socket, timeouts);
}

/** POST /exec/{id}/start on a connection the engine hijacks: resolves with that connection. */
function dialExec(docker: Docker, id: string, tty: boolean, signal: AbortSignal): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    docker.modem.dial(
      {
        path: `/exec/${encodeURIComponent(id)}/start`,
        method: "POST",
        hijack: true,
        isStream: true,
        abortSignal: signal,
        statusCodes: { 200: true, 101: true, 404: "no such exec", 409: "container stopped/paused", 500: "server error" },
        options: { _body: { Detach: false, Tty: tty } },
      },
      (err, result) => {
        if (err) return reject(err);
        const r = result as Duplex | IncomingMessage;
        // An upgrade gives the socket; an engine that answered without upgrading gives a response.
        if ("statusCode" in r && typeof r.statusCode === "number") {
          r.destroy();
          return reject(Object.assign(new Error(`the engine answered ${r.statusCode} instead of taking over the connection`), { statusCode: 500 }));
        }
        resolve(r as Duplex);
      },
    );
  });
}

interface ExecInspect {
  Running: boolean;
  ExitCode: number | null;
}

class DockerExecSession implements ExecSession {
  readonly tty: boolean;
  readonly output: AsyncIterable<LogFrame[]>;
  readonly exitCode: Promise<number>;
  private readonly stdin: boolean;
  private closing: Promise<void> | undefined;
  private closed = false;
  private stdinEnded = false;
  private outputEnded!: () => void;
  private outputFailed!: (err: unknown) => void;
  private outputRead = false;
  /** The exec's user: the killer runs as it too, so it may signal what the exec started. */
  private readonly user: string | undefined;

  constructor(
    private readonly engine: Engine,
    private readonly ref: ContainerRef,
    readonly id: string,
    private readonly marker: string,
    mode: { tty: boolean; stdin: boolean; user: string | undefined },
    private readonly socket: Duplex,
    private readonly timeouts: ExecTimeouts,
  ) {
    this.tty = mode.tty;
    this.stdin = mode.stdin;
    this.user = mode.user;
    // A broken connection surfaces through the output (and write()); never as an unhandled event.
    socket.on("error", () => undefined);
    const ended = new Promise<void>((resolve, reject) => {
      this.outputEnded = resolve;
      this.outputFailed = reject;
    });
    this.exitCode = ended.then(() => this.waitForExit());
    this.exitCode.catch(() => undefined); // awaited by whoever wants it; not an unhandled rejection
    this.output = { [Symbol.asyncIterator]: () => this.read()[Symbol.asyncIterator]() };
  }

  private async *read(): AsyncGenerator<LogFrame[], void, undefined> {
    if (this.outputRead) throw new Error("an exec's output can be read once");
    this.outputRead = true;
    const demux = this.tty ? undefined : new Demultiplexer();
    const { node, id } = this.ref;
    try {
      for await (const chunk of this.socket as AsyncIterable<Buffer>) {
        const frames: LogFrame[] = demux ? demux.push(chunk) : [{ stream: "stdout", data: chunk }];
        if (frames.length > 0) yield frames;
      }
      if (demux !== undefined && demux.pendingBytes > 0) {
        throw new EngineUnavailableError(`exec in ${id} on ${node}: the engine ended the stream inside a frame`, node, id, "exec", false);
      }
      this.outputEnded();
    } catch (err) {
      const failure = this.closed ? new Error("the exec session was closed") : toClusterError(err, node, id, "exec");
      this.outputFailed(failure);
      if (this.closed) return;
      throw failure instanceof Error ? failure : new EngineError(`exec in ${id} on ${node}: ${String(failure)}`, node, id, "exec", 500);
    }
  }

  write(data: Uint8Array): Promise<void> {
    if (!this.stdin) return Promise.reject(new InvalidRequestError(`exec ${this.id}: stdin was not attached`, this.ref.node, this.ref.id, "exec"));
    if (this.stdinEnded || this.closed || this.socket.destroyed) return Promise.reject(new Error("stdin is closed"));
    return new Promise((resolve, reject) => this.socket.write(data, (err) => (err ? reject(err) : resolve())));
  }

  async end(): Promise<void> {
    if (!this.stdin || this.stdinEnded || this.closed || this.socket.destroyed) return;
    if (this.tty) {
      // A terminal's EOF is a character (VEOF, Ctrl-D), read as the end of input at a line's start.
      await this.write(Buffer.from([4]));
      this.stdinEnded = true;
      return;
    }
    this.stdinEnded = true;
    // Half-close: the engine closes the process's stdin, and the output keeps coming.
    this.socket.end();
  }

  async resize(cols: number, rows: number, options: CallOptions = {}): Promise<void> {
    const ok = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535;
    if (!ok(cols) || !ok(rows)) {
      throw new InvalidRequestError(`exec ${this.id}: a terminal size is whole numbers from 1 to 65535 (got ${cols}x${rows})`, this.ref.node, this.ref.id, "exec");
    }
    if (!this.tty || this.closed) return;
    await this.engine.read({
      op: "exec resize",
      ref: this.ref.id,
      signal: options.signal,
      timeoutMs: this.timeouts.callTimeoutMs,
      run: (d, signal) => d.getExec(this.id).resize({ h: rows, w: cols, abortSignal: signal }) as Promise<unknown>,
    });
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    this.socket.destroy();
    this.outputFailed(new Error("the exec session was closed before the command ended"));
    let state = await this.inspect();
    if (state === undefined || !state.Running) return;
    await this.kill();
    const deadline = Date.now() + this.timeouts.killWaitMs;
    for (let wait = 50; ; wait = Math.min(wait * 2, 500)) {
      state = await this.inspect();
      if (state === undefined || !state.Running) return;
      if (Date.now() > deadline) break;
      await sleep(wait);
    }
    const { node, id } = this.ref;
    throw new EngineError(
      `exec ${this.id} in ${id} on ${node}: still running ${this.timeouts.killWaitMs} ms after the kill (the image needs sh, tr, grep and kill for it)`,
      node,
      id,
      "exec",
      500,
    );
  }

  /** Starts the killer exec (detached) for the marker. */
  private async kill(): Promise<void> {
    const { node, id } = this.ref;
    await this.engine.read({
      op: "exec kill",
      ref: id,
      missing: "container",
      timeoutMs: this.timeouts.openTimeoutMs,
      run: async (d, signal) => {
        const killer = await d.getContainer(id).exec({
          Cmd: ["sh", "-c", killScript, "sh", this.marker],
          AttachStdout: false,
          AttachStderr: false,
          ...(this.user !== undefined ? { User: this.user } : {}),
          abortSignal: signal,
        });
        const answer = (await killer.start({ Detach: true, abortSignal: signal })) as { resume?: () => void } | undefined;
        answer?.resume?.();
      },
    }).catch((err: unknown) => {
      // The container stopped meanwhile: so did the process.
      if (err instanceof NotFoundError || (err instanceof ClusterError && /not running/i.test(err.message))) return;
      throw err instanceof ClusterError ? err : new EngineError(`exec kill in ${id} on ${node}: ${String(err)}`, node, id, "exec", 500);
    });
  }

  /** The exec's state, or undefined when the engine no longer has it (its container is gone). */
  private async inspect(): Promise<ExecInspect | undefined> {
    try {
      return await this.engine.read({
        op: "exec inspect",
        ref: this.ref.id,
        timeoutMs: this.timeouts.callTimeoutMs,
        run: (d, signal) => d.getExec(this.id).inspect({ abortSignal: signal }) as Promise<ExecInspect>,
      });
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  /** After the output ended: the exit code, once the engine reports the process gone. */
  private async waitForExit(): Promise<number> {
    for (let wait = 20; ; wait = Math.min(wait * 2, 1000)) {
      if (this.closed) throw new Error("the exec session was closed before the command ended");
      const state = await this.inspect();
      const { node, id } = this.ref;
      if (state === undefined) throw new NotFoundError(`exec ${this.id} in ${id} on ${node}: the engine no longer has it`, node, id, "exec", "container");
      if (!state.Running) {
        if (typeof state.ExitCode !== "number") throw new EngineError(`exec ${this.id} in ${id} on ${node}: the engine reports no exit code`, node, id, "exec", 500);
        return state.ExitCode;
      }
      // The output can end a moment before the engine has recorded the exit (or the command closed
      // its output and goes on): keep asking, ever less often, until it ends or the session closes.
      await sleep(wait);
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
