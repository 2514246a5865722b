// The console's and the secrets service's error answers: api/http's ApiError and errorResponse in
// the "with-error" format, the shapes of api/http plus `error` (the message), the field the
// original lvault/console clients read ({"error": "authentication failed"}); docs/api-reference.md,
// "Errors". Messages name the offending field or parameter and never quote a token or secret content.
import type { ErrorHandler, NotFoundHandler } from "hono";
import type { Logger } from "../../runtime/log.ts";
import { errorHandler, notFoundHandlerFor } from "../http/index.ts";

// 401 and 403 are api/http's (one error type for every API); re-exported for the console's callers.
export { forbidden, unauthorized } from "../http/index.ts";

/** For app.onError: api/http's handler in the "with-error" format. */
export function authErrorHandler(log: Logger): ErrorHandler {
  return errorHandler(log, "with-error");
}

export const authNotFoundHandler: NotFoundHandler = notFoundHandlerFor("with-error");
