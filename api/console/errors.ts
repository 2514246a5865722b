// Error answers of the console and the secrets service. They keep the shapes of api/http (DESIGN.md
// section 6: {code, message, details?}) and add two things the issue-5 contract needs:
//   - every error body also carries `error` (the message), the field the original lvault/console
//     clients read ({"error": "authentication failed"});
//   - 401 Unauthorized and 403 Forbidden, which api/http's ApiError does not have (it serves the
//     unauthenticated orchestrator).
// Messages name the offending field or parameter and never quote a token or secret content.
import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "../../runtime/log.ts";
import { errorHandler, notFoundHandler } from "../http/index.ts";

export class AuthError extends Error {
  override readonly name = "AuthError";
  constructor(
    readonly status: 401 | 403,
    message: string,
  ) {
    super(message);
  }
}

export const unauthorized = (message: string) => new AuthError(401, message);
export const forbidden = (message: string) => new AuthError(403, message);

async function withErrorField(c: Context, res: Response): Promise<Response> {
  const body = (await res.json()) as { message?: string };
  const headers: Record<string, string> = {};
  const retry = res.headers.get("retry-after");
  if (retry) headers["retry-after"] = retry;
  return c.json({ error: body.message ?? "error", ...body }, res.status as ContentfulStatusCode, headers);
}

/** For app.onError: api/http's handler plus 401/403 and the `error` field. */
export function authErrorHandler(log: Logger): ErrorHandler {
  const shared = errorHandler(log);
  return async (err, c) => {
    if (err instanceof AuthError) {
      const code = err.status === 401 ? "Unauthorized" : "Forbidden";
      return c.json({ error: err.message, code, message: err.message }, err.status);
    }
    return withErrorField(c, await shared(err, c));
  };
}

export const authNotFoundHandler: NotFoundHandler = async (c) => withErrorField(c, await notFoundHandler(c));
