// How the web console's pages reach the platform: through the same HTTP APIs the CLI calls, with
// the signed-in user's access token (docs/web-console.md). The calls go to this process's own Hono
// app in memory (no socket), so they pass the same gate, validation, permission checks and audit
// as a CLI request; a page can show nothing and change nothing its user could not with the CLI.
import type { Hono } from "hono";
import type { ErrorBody, ErrorDetail } from "../http/index.ts";

export interface ApiRequest {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** The user's access token; undefined when authentication is off (-auth none). */
  token: string | undefined;
  /** The browser's Host header, passed on (authentication off answers loopback names only). */
  host?: string | undefined;
  /** JSON-encoded when an object, sent as is when a string. */
  body?: unknown;
  accept?: string;
  /** Aborts the call (a log stream whose browser went away). */
  signal?: AbortSignal;
}

export type ApiCaller = (path: string, req: ApiRequest) => Promise<Response>;

/** Calls `app`'s routes in memory. */
export function inProcessApi(app: Pick<Hono, "request">): ApiCaller {
  return async (path, req) => {
    const headers: Record<string, string> = { accept: req.accept ?? "application/json" };
    if (req.token !== undefined) headers.authorization = `Bearer ${req.token}`;
    headers.host = req.host ?? "localhost";
    let body: string | undefined;
    if (req.body !== undefined) {
      body = typeof req.body === "string" ? req.body : JSON.stringify(req.body);
      headers["content-type"] = typeof req.body === "string" ? "application/octet-stream" : "application/json";
    }
    return app.request(`http://localhost${path}`, { method: req.method ?? "GET", headers, ...(body !== undefined && { body }), ...(req.signal !== undefined && { signal: req.signal }) });
  };
}

/** An API answer: the value, or the error body the API sent (with its status). */
export type ApiResult<T> = { ok: true; status: number; value: T } | { ok: false; status: number; error: ApiFailure };

export interface ApiFailure {
  message: string;
  code: string;
  details: ErrorDetail[];
}

/** Reads an API response as JSON; an error body becomes an ApiFailure (never throws on a status). */
export async function readApi<T>(res: Response): Promise<ApiResult<T>> {
  const text = await res.text();
  let json: unknown;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (res.ok) return { ok: true, status: res.status, value: json as T };
  // The platform's error bodies ({code, message, details}), the secrets service's ({error}), and
  // the registry's (distribution's {errors: [{code, message}]}).
  const body = (json ?? {}) as Partial<ErrorBody> & { error?: string; details?: ErrorDetail[]; errors?: { code?: string; message?: string }[] };
  const registry = Array.isArray(body.errors) ? body.errors[0] : undefined;
  const message =
    typeof body.message === "string" ? body.message : typeof body.error === "string" ? body.error : typeof registry?.message === "string" ? `${registry.code ?? ""} ${registry.message}`.trim() : `${res.status} ${res.statusText || "error"}`;
  return { ok: false, status: res.status, error: { message, code: typeof body.code === "string" ? body.code : String(res.status), details: Array.isArray(body.details) ? body.details : [] } };
}
