// One Docker engine (one node): its dockerode client, its write slots and the rules every call to it
// follows. There is no lock across engines: each engine bounds only its own concurrent writes, so a
// slow or dead node never holds up work on the others.
//
// Every call is bounded. A call runs under its own AbortController, aborted when the call's timeout
// fires or the caller's signal aborts, whichever comes first; the listener on the caller's signal is
// removed when the call settles, so a long-lived signal (a controller's shutdown signal, passed to
// thousands of calls) does not collect listeners. dockerode hands the signal to http.request
// (docker-modem), which destroys the request and its response on abort.
import type Docker from "dockerode";
import { dockerClient } from "./docker-client.ts";
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
import { ClusterSpecError, type ClusterEndpoint } from "./spec.ts";
import { onAbort } from "../../runtime/abort-fanout.ts";

/** Client TLS material for engines reached over TLS: PEM text (not file paths). */
export interface EngineTls {
  /** The CA (or CAs, concatenated) that signed the engines' server certificates. */
  ca: string;
  /** Our client certificate, signed by a CA the engines trust (dockerd --tlscacert). */
  cert: string;
  /** The client certificate's private key. */
  key: string;
}

export interface EngineLimits {
  /** Concurrent writes (create, start, stop, remove, rename, image pull) on this engine. */
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
  /** What a 404 means (default: an image when the engine says "no such image", else the container). */
  missing?: "container" | "image";
  signal?: AbortSignal | undefined;
  run(docker: Docker, signal: AbortSignal): Promise<T>;
}

export class Engine {
  readonly docker: Docker;
  private readonly writes: PQueue;

  constructor(
    readonly endpoint: ClusterEndpoint,
    readonly limits: EngineLimits,
    tls?: EngineTls,
  ) {
    const t = endpoint.transport;
    if (t.kind === "unix") {
      this.docker = dockerClient({ socketPath: t.socketPath });
    } else if (t.tls) {
      if (tls === undefined) throw new ClusterSpecError(`node ${endpoint.name}: ${endpoint.endpoint} is a TLS endpoint but no TLS client material was given`);
      // protocol is explicit: docker-modem falls back to http silently when it is missing.
      this.docker = dockerClient({ host: t.host, port: t.port, protocol: "https", ca: tls.ca, cert: tls.cert, key: tls.key });
    } else {
      this.docker = dockerClient({ host: t.host, port: t.port, protocol: "http" });
    }
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
      const unsubscribe = signal ? onAbort(signal, () => reject(signal.reason)) : undefined;
      void this.writes.add(async () => {
        unsubscribe?.();
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
    // One listener on the caller's signal however many calls share it (runtime/abort-fanout.ts).
    const unsubscribe = caller ? onAbort(caller, () => ac.abort(caller.reason)) : undefined;
    try {
      return await call.run(this.docker, ac.signal);
    } catch (err) {
      if (caller?.aborted && !timedOut) throw caller.reason;
      throw toClusterError(err, this.node, call.ref, call.op, timedOut ? timeoutMs : undefined, call.missing);
    } finally {
      clearTimeout(timer);
      unsubscribe?.();
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
  /** OpenSSL's reason text on a TLS error, e.g. "sslv3 alert bad certificate". */
  reason?: unknown;
}

/**
 * Maps a dockerode failure to a typed error. Status codes come from the engine; a failure without
 * one is a transport failure (refused, reset, timed out: the engine is unavailable) when it carries
 * a system error code or is our abort; anything else is a bug of ours and is rethrown unchanged.
 */
export function toClusterError(
  err: unknown,
  node: string,
  ref: string | undefined,
  op: string,
  timedOutAfterMs?: number,
  missing?: "container" | "image",
): unknown {
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
        return new NotFoundError(msg, node, ref, op, missing ?? (/no such image/i.test(msg) ? "image" : "container"), err);
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
    const reason = tlsFailure(err) ?? (typeof e.code === "string" ? e.code : String(e.message));
    return new EngineUnavailableError(`${what}: engine unreachable (${reason})`, node, ref, op, false, err);
  }
  return err;
}

const unknownIssuer = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
]);

/**
 * A TLS failure in words, starting "TLS": which side refused which certificate, with the code.
 * The code alone (UNABLE_TO_VERIFY_LEAF_SIGNATURE, ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE) does not
 * say which certificate is wrong. Undefined for anything that is not a TLS failure.
 */
export function tlsFailure(err: unknown): string | undefined {
  const e = (typeof err === "object" && err !== null ? err : {}) as ModemError;
  const code = e.code;
  if (typeof code !== "string") return undefined;
  const message = String(e.message);
  // OpenSSL errors (ERR_SSL_..., or EPROTO from a socket write) read
  // "<id>:error:<n>:SSL routines:<func>:<reason>:<file>:<line>:..."; the reason is the readable part.
  const sslReason = typeof e.reason === "string" ? e.reason : /SSL routines:[^:]*:([^:]+)/.exec(message)?.[1];
  const openssl = code.startsWith("ERR_SSL_") || (code === "EPROTO" && sslReason !== undefined);
  if (openssl) {
    const detail = sslReason ?? message.split("\n")[0] ?? message;
    if (/alert/i.test(detail) || /ALERT/.test(code)) {
      if (/certificate|unknown ca|access denied/i.test(detail)) {
        return `TLS handshake refused by the engine: it rejected our client certificate (${detail}); the client certificate must be signed by the CA the engine trusts (dockerd --tlscacert) [${code}]`;
      }
      return `TLS handshake refused by the engine (${detail}) [${code}]`;
    }
    if (/wrong version number|packet length too long/i.test(detail)) {
      return `TLS handshake failed (${detail}): the engine does not answer TLS on this port; is it started with --tlsverify? [${code}]`;
    }
    return `TLS handshake failed (${detail}) [${code}]`;
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") return `TLS: the engine's certificate is not for this address (${message}) [${code}]`;
  if (code.startsWith("ERR_TLS_")) return `TLS failed (${message}) [${code}]`;
  if (unknownIssuer.has(code)) {
    return `TLS: the engine's certificate is not signed by our CA (${message}); the CA given (-docker-tls-ca) must be the one that signed the engine's --tlscert [${code}]`;
  }
  if (/CERT|SIGNATURE|ISSUER|INVALID_CA|INVALID_PURPOSE/.test(code)) return `TLS: the engine's certificate failed verification (${message}) [${code}]`;
  return undefined;
}

/** The engine's own words ({"message": ...}) rather than dockerode's "(HTTP code 409) unexpected - ...". */
function engineMessage(e: ModemError): string {
  const j = e.json;
  if (typeof j === "object" && j !== null && "message" in j && typeof j.message === "string") return j.message;
  if (typeof e.message !== "string") return `HTTP ${String(e.statusCode)}`;
  // A streaming call (a pull) carries no json: the engine's words follow dockerode's prefix.
  return /^\(HTTP code \d+\) [^-]* - ([\s\S]+)$/.exec(e.message)?.[1]?.trim() || e.message;
}
