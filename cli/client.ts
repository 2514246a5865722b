// A small typed client of the orchestrator API (DESIGN.md section 6), for the client commands.
//
// Every request carries a timeout (AbortSignal.timeout), so a hung server never hangs the command.
// Failures are typed: ApiError is an answer of the server (its status and the code, reason and
// message of its error body), ServerUnreachableError is no answer at all (refused, timed out).
import type { PodGroupSpec, PodGroupWithSpec, PodSpec, RestartPolicy } from "../api/resources/podgroup.ts";

/** The body of a 202 Accepted answer. */
export interface Accepted {
  message: string;
  checkUrl: string;
}

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

/** No answer from the server: connection refused, DNS failure, timeout. */
export class ServerUnreachableError extends Error {
  override readonly name = "ServerUnreachableError";
  constructor(
    readonly server: string,
    reason: string,
  ) {
    super(`cannot reach the orchestrator at ${server}: ${reason}`);
  }
}

export interface ClientOptions {
  /** Base URL, e.g. http://127.0.0.1:9000. */
  server: string;
  /** Per request (default 10 s). */
  requestTimeoutMs?: number;
}

export class OrchestratorClient {
  readonly server: string;
  private readonly requestTimeoutMs: number;

  constructor(opts: ClientOptions) {
    this.server = opts.server.replace(/\/+$/, "");
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
  }

  getPodGroup(name: string): Promise<PodGroupWithSpec> {
    return this.request("GET", `/api/podgroups?${query({ name })}`) as Promise<PodGroupWithSpec>;
  }

  /** Every group, sorted by name (GET /api/podgroups/_all). */
  async listPodGroups(): Promise<PodGroupWithSpec[]> {
    const body = await this.request("GET", "/api/podgroups/_all");
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /api/podgroups/_all did not answer a list");
    return (body as PodGroupWithSpec[]).sort((a, b) => a.spec.name.localeCompare(b.spec.name));
  }

  createPodGroup(spec: PodGroupSpec): Promise<Accepted> {
    return this.request("POST", "/api/podgroups", spec) as Promise<Accepted>;
  }

  /** PATCH cmd=spec: a new pod spec, rolled out one instance at a time. */
  updatePodSpec(name: string, pod: PodSpec): Promise<Accepted> {
    return this.request("PATCH", `/api/podgroups?${query({ name, cmd: "spec" })}`, pod) as Promise<Accepted>;
  }

  /** PATCH cmd=replica: instance count, and the restart policy when given. */
  updateReplica(name: string, numInstances: number, restartPolicy?: RestartPolicy): Promise<Accepted> {
    const q = query({ name, cmd: "replica", num_instances: String(numInstances), restart_policy: restartPolicy });
    return this.request("PATCH", `/api/podgroups?${q}`) as Promise<Accepted>;
  }

  deletePodGroup(name: string): Promise<Accepted> {
    return this.request("DELETE", `/api/podgroups?${query({ name })}`) as Promise<Accepted>;
  }

  private async request(method: string, path: string, body?: unknown): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(this.server + path, {
        method,
        headers: body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
    } catch (e) {
      throw new ServerUnreachableError(this.server, reasonOf(e, this.requestTimeoutMs));
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw new ServerUnreachableError(this.server, reasonOf(e, this.requestTimeoutMs));
    }
    const parsed = parseJson(text);
    if (res.ok) {
      if (parsed === undefined) throw new ApiError(res.status, "BadAnswer", `${method} ${path} answered ${res.status} without JSON`);
      return parsed;
    }
    const err = (parsed ?? {}) as { code?: unknown; message?: unknown; reason?: unknown; details?: unknown };
    throw new ApiError(
      res.status,
      typeof err.code === "string" ? err.code : `HTTP ${res.status}`,
      typeof err.message === "string" ? err.message : text.trim().slice(0, 500) || res.statusText,
      typeof err.reason === "string" ? err.reason : undefined,
      Array.isArray(err.details) ? err.details.map(detailOf) : undefined,
    );
  }
}

function detailOf(d: unknown): { path: string; message: string } {
  const { path, message } = (d ?? {}) as { path?: unknown; message?: unknown };
  return { path: typeof path === "string" ? path : "", message: typeof message === "string" ? message : JSON.stringify(d) };
}

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, v);
  return q.toString();
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
