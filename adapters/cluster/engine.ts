// One Docker engine (one node): its dockerode client, its write slots and the rules every call to it
// follows. There is no lock across engines: each engine bounds only its own concurrent writes, so a
// slow or dead node never holds up work on the others.
//
// Every call is bounded. A call runs under its own AbortController, aborted when the call's timeout
// fires or the caller's signal aborts, whichever comes first; the listener on the caller's signal is
// removed when the call settles, so a long-lived signal (a controller's shutdown signal, passed to
// thousands of calls) does not collect listeners. dockerode hands the signal to http.request
// (docker-modem), which destroys the request and its response on abort.
import Docker from "dockerode";
import PQueue from "p-queue";
import {
  ClusterError,
  ConflictError,
  EngineError,
  EngineUnavailableError,
  InvalidRequestError,
  NotFoundError,
  NotModifiedError,
} from "./errors.ts";
import type { ClusterEndpoint } from "./spec.ts";

export interface EngineLimits {
  /** Concurrent writes (create, start, stop, remove, rename) on this engine. */
  writeConcurrency: number;
  /** Timeout of a read (list, inspect, info), ms. */
  readTimeoutMs: number;
  /** Timeout of a write once it holds a write slot, ms (stop adds its grace period to it). */
  writeTimeoutMs: number;
}

export interface Call<T> {
  /** Adapter operation name, for errors and logs. */
  op: string;
  /** Container id or name the call is about. */
  ref?: string;
  /** Overrides the read or write timeout. */
  timeoutMs?: number;
  signal?: AbortSignal | undefined;
  run(docker: Docker, signal: AbortSignal): Promise<T>;
}

export class Engine {
  readonly docker: Docker;
  private readonly writes: PQueue;

  constructor(
    readonly endpoint: ClusterEndpoint,
    readonly limits: EngineLimits,
  ) {
    const t = endpoint.transport;
    this.docker = new Docker(t.kind === "unix" ? { socketPath: t.socketPath } : { host: t.host, port: t.port, protocol: "http" });
    this.writes = new PQueue({ concurrency: limits.writeConcurrency });
  }

  get node(): string {
    return this.endpoint.name;
  }

  /** A read runs at once (reads are cheap for the engine and must not queue behind writes). */
  read<T>(call: Call<T>): Promise<T> {
    return this.bounded(call, call.timeoutMs ?? this.limits.readTimeoutMs);
  }

  /**
   * A write first waits for one of the engine's write slots. The timeout starts once it holds the
   * slot: it measures the engine, not the length of our own queue. The caller's signal covers the
   * wait too.
   */
  write<T>(call: Call<T>): Promise<T> {
    const signal = call.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      // Not p-queue's own `signal` option: it keeps an abort listener per task for good, and it
      // rejects an aborted task only when the task's turn comes. Here the caller stops waiting at
      // once, and the slot, when it comes, is handed on without a call.
      const onAbort = () => reject(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      void this.writes.add(async () => {
        signal?.removeEventListener("abort", onAbort);
        if (signal?.aborted) return;
        try {
          resolve(await this.bounded(call, call.timeoutMs ?? this.limits.writeTimeoutMs));
        } catch (err) {
          reject(err);
        }
      });
    });
  }

  private async bounded<T>(call: Call<T>, timeoutMs: number): Promise<T> {
    const caller = call.signal;
    caller?.throwIfAborted();
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => ac.abort(caller?.reason);
    caller?.addEventListener("abort", onAbort, { once: true });
    try {
      return await call.run(this.docker, ac.signal);
    } catch (err) {
      if (caller?.aborted && !timedOut) throw caller.reason;
      throw toClusterError(err, this.node, call.ref, call.op, timedOut ? timeoutMs : undefined);
    } finally {
      clearTimeout(timer);
      caller?.removeEventListener("abort", onAbort);
    }
  }
}

interface ModemError {
  statusCode?: unknown;
  json?: unknown;
  code?: unknown;
  syscall?: unknown;
  name?: unknown;
  message?: unknown;
}

/**
 * Maps a dockerode failure to a typed error. Status codes come from the engine; a failure without
 * one is a transport failure (refused, reset, timed out: the engine is unavailable) when it carries
 * a system error code or is our abort; anything else is a bug of ours and is rethrown unchanged.
 */
export function toClusterError(err: unknown, node: string, ref: string | undefined, op: string, timedOutAfterMs?: number): unknown {
  if (err instanceof ClusterError) return err;
  const e = (typeof err === "object" && err !== null ? err : {}) as ModemError;
  const what = ref === undefined ? `${op} on ${node}` : `${op} ${ref} on ${node}`;
  if (timedOutAfterMs !== undefined) {
    return new EngineUnavailableError(`${what}: no answer within ${timedOutAfterMs} ms`, node, ref, op, true, err);
  }
  if (typeof e.statusCode === "number") {
    const msg = `${what}: ${engineMessage(e)}`;
    switch (e.statusCode) {
      case 404:
        return new NotFoundError(msg, node, ref, op, /no such image/i.test(msg) ? "image" : "container", err);
      case 409:
        return new ConflictError(msg, node, ref, op, err);
      case 304:
        return new NotModifiedError(msg, node, ref, op, err);
      case 400:
        return new InvalidRequestError(msg, node, ref, op, err);
      default:
        return new EngineError(msg, node, ref, op, e.statusCode, err);
    }
  }
  if (typeof e.code === "string" || typeof e.syscall === "string" || e.name === "AbortError") {
    const reason = typeof e.code === "string" ? e.code : String(e.message);
    return new EngineUnavailableError(`${what}: engine unreachable (${reason})`, node, ref, op, false, err);
  }
  return err;
}

/** The engine's own words ({"message": ...}) rather than dockerode's "(HTTP code 409) unexpected - ...". */
function engineMessage(e: ModemError): string {
  const j = e.json;
  if (typeof j === "object" && j !== null && "message" in j && typeof j.message === "string") return j.message;
  return typeof e.message === "string" ? e.message : `HTTP ${String(e.statusCode)}`;
}
