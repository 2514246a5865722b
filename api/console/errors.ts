// Error answers of the console and the secrets service. They keep the shapes of api/http (DESIGN.md
// section 6: {code, message, details?}) and add one thing the original clients need: every error
// body also carries `error` (the message), the field the original lvault/console clients read
// ({"error": "authentication failed"}).
// Messages name the offending field or parameter and never quote a token or secret content.
import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "../../runtime/log.ts";
import { errorHandler, notFoundHandler } from "../http/index.ts";

// 401 and 403 are api/http's (one error type for every API); re-exported for the console's callers.
export { forbidden, unauthorized } from "../http/index.ts";

async function withErrorField(c: Context, res: Response): Promise<Response> {
  const body = (await res.json()) as { message?: string };
  const headers: Record<string, string> = {};
  for (const name of ["retry-after", "www-authenticate"]) {
    const value = res.headers.get(name);
    if (value) headers[name] = value;
  }
  return c.json({ error: body.message ?? "error", ...body }, res.status as ContentfulStatusCode, headers);
}

/** For app.onError: api/http's handler plus the `error` field. */
export function authErrorHandler(log: Logger): ErrorHandler {
  const shared = errorHandler(log);
  return async (err, c) => withErrorField(c, await shared(err, c));
}

export const authNotFoundHandler: NotFoundHandler = async (c) => withErrorField(c, await notFoundHandler(c));
