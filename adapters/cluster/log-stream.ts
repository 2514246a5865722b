// Reading one container's log from its engine (docs/cluster.md, "Logs"): the query, the request,
// and the body turned into a LogStream of demultiplexed frames.
//
// A log call outlives the request that opens it, so it cannot use Engine.read's bounds alone (they
// end when the answer's headers arrive). It has its own AbortController, aborted by whichever comes
// first: the caller's signal, the whole-read timeout (only without follow: a follow stream has none),
// or the consumer stopping (breaking out of its loop). Aborting it destroys the answer's body,
// which closes the connection: the engine sees the client go and ends its reader. The listener on
// the caller's signal is removed when the stream ends, as every other call does.
import type { IncomingMessage } from "node:http";
import type Docker from "dockerode";
import type { ContainerRef, LogOptions, LogStream } from "./cluster.ts";
import { EngineError, EngineUnavailableError, InvalidRequestError } from "./errors.ts";
import { toClusterError } from "./engine.ts";
import { Demultiplexer, LogFormatError, type LogFrame } from "./logs.ts";

/** The engine's query for `options` (GET /containers/{id}/logs); InvalidRequestError for bad options. */
export function logQuery(ref: ContainerRef, options: LogOptions): Record<string, string> {
  const bad = (what: string) => new InvalidRequestError(`logs ${ref.id} on ${ref.node}: ${what}`, ref.node, ref.id, "logs");
  const { tail, since, until } = options;
  if (tail !== undefined && !(Number.isSafeInteger(tail) && tail >= 0)) throw bad(`tail must be a whole number >= 0 (got ${tail})`);
  if (since !== undefined && !(Number.isFinite(since) && since >= 0)) throw bad(`since must be a time in milliseconds since the epoch (got ${since})`);
  if (until !== undefined && !(Number.isFinite(until) && until > 0)) throw bad(`until must be a time in milliseconds since the epoch (got ${until})`);
  const stdout = options.stdout ?? true;
  const stderr = options.stderr ?? true;
  if (!stdout && !stderr) throw bad("choose stdout, stderr or both");
  const q: Record<string, string> = {
    stdout: stdout ? "1" : "0",
    stderr: stderr ? "1" : "0",
    follow: options.follow ? "1" : "0",
    timestamps: options.timestamps ? "1" : "0",
    tail: tail === undefined ? "all" : String(tail),
  };
  if (since !== undefined) q.since = unixTime(since);
  if (until !== undefined) q.until = unixTime(until);
  return q;
}

/**
 * Milliseconds since the epoch as the engine's "seconds.nanoseconds" (its `since` takes fractions).
 * Kept to the microsecond (what a double holds here), rounded down: `since` is "at or after", so a
 * line at exactly that time is never cut.
 */
export function unixTime(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  const micros = Math.min(999_999, Math.max(0, Math.floor((ms - seconds * 1000) * 1e3)));
  return `${seconds}.${String(micros * 1000).padStart(9, "0")}`;
}

/** Opens the log body: resolves with it once the engine answered 200 (errors are dockerode's). */
export function dialLogs(docker: Docker, id: string, query: Record<string, string>, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    // Not Container.logs(): without follow it collects the whole log in memory before answering.
    docker.modem.dial(
      {
        path: `/containers/${encodeURIComponent(id)}/logs?`,
        method: "GET",
        isStream: true,
        abortSignal: signal,
        statusCodes: { 200: true, 404: "no such container", 500: "server error" },
        options: { ...query },
      },
      (err, result) => (err ? reject(err) : resolve(result as IncomingMessage)),
    );
  });
}

/** The bounds of one log call, from before its request until its stream ends. */
export class LogCall {
  private readonly ac = new AbortController();
  private readonly timer: NodeJS.Timeout | undefined;
  private timedOut = false;
  /** The consumer stopped reading (not an error). */
  private stopped = false;
  private readonly onCallerAbort = () => this.ac.abort(this.caller?.reason);

  constructor(
    private readonly ref: ContainerRef,
    private readonly caller: AbortSignal | undefined,
    private readonly timeoutMs: number | undefined,
  ) {
    caller?.throwIfAborted();
    caller?.addEventListener("abort", this.onCallerAbort, { once: true });
    if (timeoutMs !== undefined) {
      this.timer = setTimeout(() => {
        this.timedOut = true;
        this.ac.abort(new Error(`timed out after ${timeoutMs} ms`));
      }, timeoutMs);
    }
  }

  /** Aborted when the call must end: caller, timeout, consumer. */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** Ends the call: timers and listeners go, the connection (if any) is closed. Idempotent. */
  close(): void {
    clearTimeout(this.timer);
    this.caller?.removeEventListener("abort", this.onCallerAbort);
    if (!this.ac.signal.aborted) this.ac.abort(new Error("log stream closed"));
  }

  /** The error a failure of this call is reported as. */
  failure(err: unknown): unknown {
    const { node, id } = this.ref;
    if (this.timedOut) return new EngineUnavailableError(`logs ${id} on ${node}: not read within ${this.timeoutMs} ms`, node, id, "logs", true, err);
    if (this.caller?.aborted) return this.caller.reason;
    if (err instanceof LogFormatError) return new EngineError(`logs ${id} on ${node}: ${err.message}`, node, id, "logs", 200, err);
    return toClusterError(err, node, id, "logs");
  }

  /** The stream over `body`; reading it, stopping it or aborting the call closes the connection. */
  stream(body: IncomingMessage, tty: boolean): LogStream {
    const destroy = () => body.destroy();
    this.ac.signal.addEventListener("abort", destroy, { once: true });
    if (this.ac.signal.aborted) destroy();
    const frames = this.read(body, tty);
    let opened = false;
    return {
      tty,
      [Symbol.asyncIterator]: () => {
        if (opened) throw new Error("a log stream can be read once");
        opened = true;
        return {
          next: () => frames.next(),
          // Not frames.return() alone: a generator waiting for the next chunk would run it only once
          // a chunk came, and a quiet follow stream may send none for hours. Closing the call ends
          // that wait at once; the generator then finishes (and runs its cleanup) by itself.
          return: async () => {
            this.stopped = true;
            this.close();
            void frames.return(undefined).catch(() => undefined);
            return { done: true, value: undefined };
          },
        };
      },
    };
  }

  private async *read(body: IncomingMessage, tty: boolean): AsyncGenerator<LogFrame[], void, undefined> {
    const demux = tty ? undefined : new Demultiplexer();
    const { node, id } = this.ref;
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        const frames: LogFrame[] = demux ? demux.push(chunk) : [{ stream: "stdout", data: chunk }];
        if (frames.length > 0) yield frames;
      }
      if (demux !== undefined && demux.pendingBytes > 0) {
        throw new EngineUnavailableError(`logs ${id} on ${node}: the engine ended the stream inside a frame`, node, id, "logs", false);
      }
    } catch (err) {
      if (this.stopped) return;
      throw this.failure(err);
    } finally {
      this.close();
    }
  }
}
