// Error answers of every Capstan HTTP API, in the shapes of DESIGN.md section 6:
//
//   400 {"code": "BadRequest", "message": "...", "details": [{"path": "...", "message": "..."}]}
//   401 {"code": "Unauthorized", "message": "..."}   with WWW-Authenticate: no valid credential
//   403 {"code": "Forbidden", "message": "...", "missing": "...", "details"?: [...]}   a valid credential without the permission
//   404 {"code": "NotFound", "message": "..."}
//   409 {"code": "NotAllowed", "reason": "AlreadyExists" | "InsufficientResources" | "InUse" | "DependencyDeleting", "message": "..."}
//   503 {"code": "Unavailable", "message": "..."}    the store did not answer in time; safe to retry
//   500 {"code": "InternalError", "message": "..."}  a bug; details are in the server log only
//
// Handlers throw ApiError (through the constructors below); errorHandler, installed with
// app.onError, turns it into the answer. Anything else that escapes a handler is a 503 when it is a
// store timeout and a 500 otherwise, so no stack trace or stored value ever reaches a client.
import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { StoreUnavailableError } from "../../adapters/store/errors.ts";
import type { Logger } from "../../runtime/log.ts";

/** One problem with the input: `path` names the field (`pod.containers[0].image`) or parameter. */
export interface ErrorDetail {
  path: string;
  message: string;
}

export type NotAllowedReason = "AlreadyExists" | "InsufficientResources" | "InUse" | "DependencyDeleting";

export type ErrorBody =
  | { code: "BadRequest"; message: string; details: ErrorDetail[] }
  | { code: "Unauthorized"; message: string }
  | { code: "Forbidden"; message: string; missing?: string; details?: ErrorDetail[] }
  | { code: "NotFound"; message: string }
  | { code: "NotAllowed"; reason: NotAllowedReason; message: string }
  | { code: "Unavailable"; message: string }
  | { code: "InternalError"; message: string };

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 500 | 503;

export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: ErrorStatus,
    readonly body: ErrorBody,
  ) {
    super(body.message);
  }
}

export function badRequest(message: string, details: ErrorDetail[] = []): ApiError {
  return new ApiError(400, { code: "BadRequest", message, details });
}

/** 401: no credential, or one that is malformed, unknown, expired or revoked (all told apart only in the log). */
export function unauthorized(message: string): ApiError {
  return new ApiError(401, { code: "Unauthorized", message });
}

/** 403: a valid credential that lacks `missing` (a permission such as "write on app shop"). */
export function forbidden(message: string, missing?: string, details?: ErrorDetail[]): ApiError {
  return new ApiError(403, { code: "Forbidden", message, ...(missing !== undefined ? { missing } : {}), ...(details?.length ? { details } : {}) });
}

/**
 * The challenge a 401 carries (RFC 6750): the token goes in `Authorization: Bearer` or the
 * `access-token` header (docs/security.md).
 */
export const authChallenge = 'Bearer realm="capstan"';

export function notFound(message: string): ApiError {
  return new ApiError(404, { code: "NotFound", message });
}

export function notAllowed(reason: NotAllowedReason, message: string): ApiError {
  return new ApiError(409, { code: "NotAllowed", reason, message });
}

export function unavailable(message: string): ApiError {
  return new ApiError(503, { code: "Unavailable", message });
}

/** 202 {message, checkUrl}: the request is recorded; checkUrl shows its progress. */
export function accepted(c: Context, message: string, checkUrl: string): Response {
  return c.json({ message, checkUrl }, 202);
}

/** For app.onError. */
export function errorHandler(log: Logger): ErrorHandler {
  return (err, c) => {
    if (err instanceof ApiError) {
      return err.status === 401 ? c.json(err.body, 401, { "www-authenticate": authChallenge }) : c.json(err.body, err.status);
    }
    if (err instanceof HTTPException && err.status < 500) {
      // Thrown by Hono itself (e.g. a malformed URL): still our error shape.
      const body: ErrorBody = { code: "BadRequest", message: err.message || "bad request", details: [] };
      return c.json(body, 400);
    }
    if (err instanceof StoreUnavailableError || err.name === "DeadlineExceededError") {
      log.warn({ err, method: c.req.method, path: c.req.path }, "store unavailable");
      const body: ErrorBody = { code: "Unavailable", message: "the store did not answer in time; retry" };
      return c.json(body, 503, { "retry-after": "1" });
    }
    log.error({ err, method: c.req.method, path: c.req.path }, "request failed");
    const body: ErrorBody = { code: "InternalError", message: "internal error (see the server log)" };
    return c.json(body, 500);
  };
}

/** For app.notFound: unknown paths (and methods a path does not serve) in the same shape. */
export const notFoundHandler: NotFoundHandler = (c) => {
  const body: ErrorBody = { code: "NotFound", message: `no route for ${c.req.method} ${c.req.path}` };
  return c.json(body, 404);
};
