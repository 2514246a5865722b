// The HTTP plumbing every client command shares (orchestrator, console, secrets service): JSON in
// and out, an access token when there is one, a timeout on every request (AbortSignal.timeout) so a
// hung server never hangs the command, and typed failures: ApiError is an answer of the server (its
// status and the code, reason, message and details of its error body; the console's and the secrets
// service's `error` field too), ServerUnreachableError is no answer at all (refused, timed out).

/** The server answered with an error status. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    /** "BadRequest", "NotFound", "NotAllowed", ... (or "HTTP <status>" for a body without one). */
    readonly code: string,
    message: string,
    /** NotAllowed's reason: "AlreadyExists", "InsufficientResources", "InUse". */
    readonly reason?: string,
    /** BadRequest's details: which field or parameter, and what is wrong with it. */
    readonly details?: { path: string; message: string }[],
  ) {
    super(message);
  }

  /** "NotAllowed (AlreadyExists): podgroup hello exists; use PATCH", plus BadRequest details. */
  describe(): string {
    const head = `${this.code}${this.reason ? ` (${this.reason})` : ""}: ${this.message}`;
    const details = (this.details ?? []).map((d) => `  ${d.path ? `${d.path}: ` : ""}${d.message}`);
    return [head, ...details].join("\n");
  }
}

/** Which service a client talks to; named in messages. */
export type Component = "orchestrator" | "console" | "secrets service";

/** No answer from the server: connection refused, DNS failure, timeout. */
export class ServerUnreachableError extends Error {
  override readonly name = "ServerUnreachableError";
  constructor(
    readonly server: string,
    reason: string,
    readonly component: Component = "orchestrator",
  ) {
    super(`cannot reach the ${component} at ${server}: ${reason}`);
  }
}

export interface HttpClientOptions {
  /** Base URL, e.g. http://127.0.0.1:9000. */
  server: string;
  component: Component;
  /** Sent as `access-token` (the header the spec names) when given. */
  token?: string;
  /** Per request (default 10 s). */
  requestTimeoutMs?: number;
}

export class HttpClient {
  readonly server: string;
  readonly component: Component;
  private readonly token: string | undefined;
  private readonly requestTimeoutMs: number;

  constructor(opts: HttpClientOptions) {
    this.server = opts.server.replace(/\/+$/, "");
    this.component = opts.component;
    this.token = opts.token;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
  }

  /** `body` is sent as JSON; the answer must be JSON (an empty 2xx answer is undefined). */
  async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token !== undefined) headers["access-token"] = this.token;
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.server + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
      text = await res.text();
    } catch (e) {
      throw new ServerUnreachableError(this.server, reasonOf(e, this.requestTimeoutMs), this.component);
    }
    const parsed = parseJson(text);
    if (res.ok) {
      if (parsed === undefined && text.trim() !== "") throw new ApiError(res.status, "BadAnswer", `${method} ${path} answered ${res.status} without JSON`);
      return parsed;
    }
    const err = (parsed ?? {}) as { code?: unknown; message?: unknown; error?: unknown; reason?: unknown; details?: unknown };
    const message = typeof err.message === "string" ? err.message : typeof err.error === "string" ? err.error : text.trim().slice(0, 500) || res.statusText;
    throw new ApiError(
      res.status,
      typeof err.code === "string" ? err.code : `HTTP ${res.status}`,
      message,
      typeof err.reason === "string" ? err.reason : undefined,
      Array.isArray(err.details) ? err.details.map(detailOf) : undefined,
    );
  }
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
function reasonOf(e: unknown, timeoutMs: number): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === "TimeoutError") return `no answer within ${timeoutMs} ms`;
  return err.cause?.code ?? err.cause?.message ?? err.message ?? String(e);
}
