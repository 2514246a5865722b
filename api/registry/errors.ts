// The registry's error answers: distribution's error codes (registry/api/errcode) and body
//
//   {"errors": [{"code": "BLOB_UNKNOWN", "message": "blob unknown to registry", "detail": ...}]}
//
// with the HTTP status of the first error (docs/registry.md, "Errors"). These are not the shapes of
// api/http/errors.ts: registry clients (docker, containerd, skopeo) parse exactly this one.
// Handlers throw RegistryError; registryErrorHandler (app.onError) answers it, and answers anything
// else as 500 UNKNOWN with the cause in the log only.
import type { Context, ErrorHandler } from "hono";
import type { Logger } from "../../runtime/log.ts";

export const errorCodes = {
  UNKNOWN: { status: 500, message: "unknown error" },
  UNSUPPORTED: { status: 405, message: "The operation is unsupported." },
  UNAUTHORIZED: { status: 401, message: "authentication required" },
  DENIED: { status: 403, message: "requested access to the resource is denied" },
  UNAVAILABLE: { status: 503, message: "service unavailable" },
  TOOMANYREQUESTS: { status: 429, message: "too many requests" },
  DIGEST_INVALID: { status: 400, message: "provided digest did not match uploaded content" },
  SIZE_INVALID: { status: 400, message: "provided length did not match content length" },
  RANGE_INVALID: { status: 416, message: "invalid content range" },
  NAME_INVALID: { status: 400, message: "invalid repository name" },
  TAG_INVALID: { status: 400, message: "manifest tag did not match URI" },
  NAME_UNKNOWN: { status: 404, message: "repository name not known to registry" },
  MANIFEST_UNKNOWN: { status: 404, message: "manifest unknown" },
  MANIFEST_INVALID: { status: 400, message: "manifest invalid" },
  MANIFEST_UNVERIFIED: { status: 400, message: "manifest failed signature verification" },
  MANIFEST_BLOB_UNKNOWN: { status: 400, message: "blob unknown to registry" },
  BLOB_UNKNOWN: { status: 404, message: "blob unknown to registry" },
  BLOB_UPLOAD_UNKNOWN: { status: 404, message: "blob upload unknown to registry" },
  // 404 (sic): distribution's status for this code, kept for clients that switch on it.
  BLOB_UPLOAD_INVALID: { status: 404, message: "blob upload invalid" },
  PAGINATION_NUMBER_INVALID: { status: 400, message: "invalid number of results requested" },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof errorCodes;

export interface ErrorEntry {
  code: ErrorCode;
  message: string;
  detail?: unknown;
}

export class RegistryError extends Error {
  override readonly name = "RegistryError";
  readonly status: number;
  /** Extra response headers (WWW-Authenticate on a 401, Location/Range on an upload's 416). */
  headers: Record<string, string> = {};

  constructor(readonly entries: [ErrorEntry, ...ErrorEntry[]]) {
    super(entries[0].message);
    this.status = errorCodes[entries[0].code].status;
  }

  withHeaders(headers: Record<string, string>): this {
    this.headers = { ...this.headers, ...headers };
    return this;
  }
}

/** One error: the code's standard message unless `message` is given; `detail` as the client sees it. */
export function registryError(code: ErrorCode, detail?: unknown, message?: string): RegistryError {
  return new RegistryError([entry(code, detail, message)]);
}

export function entry(code: ErrorCode, detail?: unknown, message?: string): ErrorEntry {
  return { code, message: message ?? errorCodes[code].message, ...(detail !== undefined ? { detail } : {}) };
}

export function errorBody(entries: readonly ErrorEntry[]): { errors: ErrorEntry[] } {
  return { errors: [...entries] };
}

export function errorResponse(c: Context, err: RegistryError): Response {
  for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
  return c.json(errorBody(err.entries), err.status as 400);
}

/** For app.onError. */
export function registryErrorHandler(log: Logger): ErrorHandler {
  return (err, c) => {
    if (err instanceof RegistryError) return errorResponse(c, err);
    log.error({ err, method: c.req.method, path: c.req.path }, "registry request failed");
    return errorResponse(c, registryError("UNKNOWN", undefined, "internal error (see the registry log)"));
  };
}
