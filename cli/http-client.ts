// The HTTP plumbing every client command shares (orchestrator, console, secrets service): JSON in
// and out, an access token when there is one, a timeout on every request (AbortSignal.timeout) so a
// hung server never hangs the command (a streamed answer, such as logs, is bounded until its
// headers arrive; then its caller's signal ends it), and typed failures (http-errors.ts): ApiError
// from an answer of the server (its status and the code, reason, message and details of its error
// body; the console's and the secrets service's `error` field too), ServerUnreachableError for no
// answer at all (refused, timed out, broken off), ServerCertificateError for an HTTPS server whose
// certificate does not verify.
//
// HTTPS: the server's certificate is verified with the system roots, or with the CA of `ca` instead
// (-ca FILE, CAPSTAN_CA or `ca:` in ~/.capstan/config.yaml; client-config.ts). There is no way to
// skip the verification. Node 20's global fetch takes no CA per request, so requests go through
// undici's fetch with an undici Agent (one per CA, kept for the life of the process).
import { Agent, fetch, type Dispatcher } from "undici";
import { ApiError, certificateError, ServerUnreachableError, type CaBundle, type Component } from "./http-errors.ts";

export interface HttpClientOptions {
  /** Base URL, e.g. http://127.0.0.1:9000. */
  server: string;
  component: Component;
  /** Sent as `access-token` (docs/security.md, "Two header forms") when given. */
  token?: string;
  /** Per request (default 10 s). */
  requestTimeoutMs?: number;
  /** Verify an https:// server with this CA instead of the system roots. */
  ca?: CaBundle;
}

export class HttpClient {
  readonly server: string;
  readonly component: Component;
  private readonly token: string | undefined;
  private readonly requestTimeoutMs: number;
  private readonly ca: CaBundle | undefined;

  constructor(opts: HttpClientOptions) {
    this.server = opts.server.replace(/\/+$/, "");
    this.component = opts.component;
    this.token = opts.token;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.ca = opts.ca;
  }

  /** `body` is sent as JSON; the answer must be JSON (an empty 2xx answer is undefined). */
  async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token !== undefined) headers["access-token"] = this.token;
    let res: Awaited<ReturnType<typeof fetch>>;
    let text: string;
    try {
      res = await fetch(this.server + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.requestTimeoutMs),
        dispatcher: dispatcherFor(this.ca),
        // A redirect would carry the access-token header to wherever Location points (undici
        // strips only Authorization and cookies): a Capstan API never redirects, so refuse.
        redirect: "error",
      });
      text = await res.text();
    } catch (e) {
      throw certificateError(e, this.server, this.component, this.ca) ?? new ServerUnreachableError(this.server, reasonOf(e, this.requestTimeoutMs, this.server), this.component);
    }
    const parsed = parseJson(text);
    if (res.ok) {
      if (parsed === undefined && text.trim() !== "") throw new ApiError(res.status, "BadAnswer", `${method} ${path} answered ${res.status} without JSON`);
      return parsed;
    }
    throw apiErrorOf(res.status, res.statusText, text);
  }

  /**
   * GET a streamed answer (`accept` names its type): resolves once the answer's headers arrived,
   * which the request timeout bounds, plus `graceMs` for a server that first opens streams of its
   * own (the orchestrator takes up to its engines' 10 s read timeout before it answers logs); an
   * error status is an ApiError, as with request(). The body has no overall timeout: `signal` ends
   * it (and the request, while it is still waiting).
   */
  async stream(path: string, accept: string, signal: AbortSignal, graceMs = 0): Promise<AsyncIterable<Uint8Array>> {
    const headers: Record<string, string> = { accept };
    if (this.token !== undefined) headers["access-token"] = this.token;
    const ac = new AbortController();
    const stop = () => ac.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    if (signal.aborted) stop();
    let timedOut = false;
    const timeoutMs = this.requestTimeoutMs + graceMs;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort(new Error("timed out"));
    }, timeoutMs);
    try {
      const res = await fetch(this.server + path, { method: "GET", headers, signal: ac.signal, dispatcher: dispatcherFor(this.ca), redirect: "error" });
      if (!res.ok) throw apiErrorOf(res.status, res.statusText, await res.text());
      clearTimeout(timer);
      // The listener on `signal` stays: aborting ends the body as it ends the request.
      return this.body(res.body, signal);
    } catch (e) {
      clearTimeout(timer);
      signal.removeEventListener("abort", stop);
      if (e instanceof ApiError || (signal.aborted && !timedOut)) throw e;
      const reason = timedOut ? `no answer within ${timeoutMs} ms` : reasonOf(e, timeoutMs, this.server);
      throw certificateError(e, this.server, this.component, this.ca) ?? new ServerUnreachableError(this.server, reason, this.component);
    }
  }

  /** A streamed body whose break (the server went away mid-answer) is a ServerUnreachableError. */
  private async *body(body: AsyncIterable<Uint8Array> | null, signal: AbortSignal): AsyncGenerator<Uint8Array, void, undefined> {
    if (body === null) return;
    try {
      yield* body;
    } catch (e) {
      if (signal.aborted) throw e;
      throw new ServerUnreachableError(this.server, `the answer broke off (${reasonOf(e, this.requestTimeoutMs, this.server)})`, this.component);
    }
  }
}

/** The ApiError of an error answer: the code, message, reason and details of its body. */
function apiErrorOf(status: number, statusText: string, text: string): ApiError {
  const parsed = parseJson(text);
  const err = (parsed ?? {}) as { code?: unknown; message?: unknown; error?: unknown; reason?: unknown; details?: unknown };
  const message = typeof err.message === "string" ? err.message : typeof err.error === "string" ? err.error : text.trim().slice(0, 500) || statusText;
  return new ApiError(
    status,
    typeof err.code === "string" ? err.code : `HTTP ${status}`,
    message,
    typeof err.reason === "string" ? err.reason : undefined,
    Array.isArray(err.details) ? err.details.map(detailOf) : undefined,
  );
}

/** `a=1&b=2`, leaving out undefined values. */
export function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, v);
  return q.toString();
}

function detailOf(d: unknown): { path: string; message: string } {
  const { path, message } = (d ?? {}) as { path?: unknown; message?: unknown };
  return { path: typeof path === "string" ? path : "", message: typeof message === "string" ? message : JSON.stringify(d) };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** fetch() hides the reason in `cause` ("fetch failed" alone says nothing). */
function reasonOf(e: unknown, timeoutMs: number, server: string): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === "TimeoutError") return `no answer within ${timeoutMs} ms`;
  const reason = err.cause?.code ?? err.cause?.message ?? err.message ?? String(e);
  // An HTTPS server hangs up on a plain HTTP request.
  if (server.startsWith("http://") && (reason === "UND_ERR_SOCKET" || reason === "ECONNRESET")) return `${reason} (if the server serves HTTPS, use an https:// URL)`;
  return reason;
}

const agents = new Map<string, Agent>();
let systemRoots: Agent | undefined;

/** One Agent per CA (connections are kept alive between the requests of a command). */
function dispatcherFor(ca: CaBundle | undefined): Dispatcher {
  if (ca === undefined) return (systemRoots ??= new Agent());
  let agent = agents.get(ca.pem);
  if (agent === undefined) {
    agent = new Agent({ connect: { ca: ca.pem } });
    agents.set(ca.pem, agent);
  }
  return agent;
}
