// Error answers of every Capstan JSON API, in the shapes of docs/api-reference.md ("Errors"):
//
//   400 {"code": "BadRequest", "message": "...", "details": [{"path": "...", "message": "..."}]}
//   401 {"code": "Unauthorized", "message": "..."}   with WWW-Authenticate: no valid credential
//   403 {"code": "Forbidden", "message": "...", "missing": "...", "details"?: [...]}   a valid credential without the permission
//   404 {"code": "NotFound", "message": "..."}
//   409 {"code": "NotAllowed", "reason": "AlreadyExists" | "InsufficientResources" | "InUse" | "DependencyDeleting", "message": "..."}
//   503 {"code": "Unavailable", "message": "..."}    the store did not answer in time; safe to retry
//   500 {"code": "InternalError", "message": "..."}  a bug; details are in the server log only
//
// The console and the secrets service write the same bodies with `error` (the message) first
// (ErrorFormat "with-error"). The registry's distribution API is the exception: its clients parse
// distribution's {"errors": [...]} (api/registry/errors.ts).
//
// Handlers throw ApiError (through the constructors below, or a subclass); errorHandler, installed
// with app.onError, turns it into the answer through errorResponse, the one mapping from an error
// to an answer. Anything else that escapes a handler is a 503 when it is a store timeout and a 500
// otherwise, so no stack trace or stored value ever reaches a client.
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
  // The orchestrator's 409s always name a reason (notAllowed); the secrets service's state
  // conflicts (vault.ts VaultStateError) never did.
  | { code: "NotAllowed"; reason?: NotAllowedReason; message: string }
  | { code: "Unavailable"; message: string }
  | { code: "InternalError"; message: string }
  // The console's single sign-on, when the identity provider fails or does not answer in time.
  | { code: "BadGateway"; message: string }
  | { code: "GatewayTimeout"; message: string };

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 500 | 502 | 503 | 504;

export interface ApiErrorOptions {
  /** The offending field or parameter; default the first of `details`. */
  field?: string;
  /** Extra response headers (a 401's WWW-Authenticate is added by errorResponse). */
  headers?: Record<string, string>;
}

/**
 * The one error type of the JSON APIs: `status`, `body` (code, message and the code's extra
 * fields), the `field` it is about. Components throw it (through the constructors below, or a
 * subclass such as the secrets service's VaultStateError); errorResponse answers it.
 */
export class ApiError extends Error {
  override readonly name: string = "ApiError";
  readonly field: string | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    readonly status: ErrorStatus,
    readonly body: ErrorBody,
    options: ApiErrorOptions = {},
  ) {
    super(body.message);
    this.field = options.field ?? ("details" in body ? body.details?.[0]?.path : undefined);
    this.headers = options.headers ?? {};
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

/**
 * How an API writes an error body; each API keeps the shape its clients read
 * (docs/api-reference.md, "Errors"):
 *
 * - `plain`: the body as is, `{code, message, ...}` (the orchestrator, the registry's GC API).
 * - `with-error`: the same with `error` (the message) first, `{error, code, message, ...}` (the
 *   console and the secrets service, whose original clients read `error`).
 */
export type ErrorFormat = "plain" | "with-error";

const storeUnavailable = () => new ApiError(503, { code: "Unavailable", message: "the store did not answer in time; retry" }, { headers: { "retry-after": "1" } });
const internalError = () => new ApiError(500, { code: "InternalError", message: "internal error (see the server log)" });

/**
 * Any error as an ApiError: itself; a 400 for what Hono throws below 500 (a malformed URL); a 503
 * for a store that did not answer in time; else a 500, whose cause goes to the log only, so no
 * stack trace or stored value ever reaches a client.
 */
export function asApiError(err: unknown, c: Context, log: Logger): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof HTTPException && err.status < 500) return badRequest(err.message || "bad request");
  if (err instanceof StoreUnavailableError || (err instanceof Error && err.name === "DeadlineExceededError")) {
    log.warn({ err, method: c.req.method, path: c.req.path }, "store unavailable");
    return storeUnavailable();
  }
  log.error({ err, method: c.req.method, path: c.req.path }, "request failed");
  return internalError();
}

/** The one mapping from an error to an answer, in the API's `format`. */
export function errorResponse(c: Context, err: ApiError, format: ErrorFormat = "plain"): Response {
  const headers: Record<string, string> = { ...err.headers, ...(err.status === 401 ? { "www-authenticate": authChallenge } : {}) };
  const body = format === "with-error" ? { error: err.body.message, ...err.body } : err.body;
  return c.json(body, err.status, headers);
}

/** For app.onError. */
export function errorHandler(log: Logger, format: ErrorFormat = "plain"): ErrorHandler {
  return (err, c) => errorResponse(c, asApiError(err, c, log), format);
}

/** For app.notFound (and a catch-all of an API's own paths): unknown paths, and methods a path does not serve. */
export function notFoundHandlerFor(format: ErrorFormat): NotFoundHandler {
  return (c) => errorResponse(c, notFound(`no route for ${c.req.method} ${c.req.path}`), format);
}

/** For app.notFound: unknown paths (and methods a path does not serve) in the plain shape. */
export const notFoundHandler: NotFoundHandler = notFoundHandlerFor("plain");
