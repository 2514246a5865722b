// The audit trail: one JSON line per write that got past authentication (docs/security.md,
// "Audit"). Who (the token's id and user, never the token), what (method, path, the query that
// names the object), when (the log line's time), outcome (the status, and "allowed", "denied" or
// "failed"). Reads are not audited; requests without a valid credential are not either (they
// changed nothing and name nobody).
//
// The gate records the caller of a request (`remember`); the middleware, installed once in front
// of every API of a process, writes the line after the handler has answered.
import type { MiddlewareHandler } from "hono";
import type { Logger } from "../../runtime/log.ts";
import type { Principal } from "./principal.ts";

const callers = new WeakMap<Request, Principal>();
const objects = new WeakMap<Request, string>();

/** Note who made this request (the gate calls it once the credential checked out). */
export function remember(request: Request, who: Principal): void {
  callers.set(request, who);
}

/** Name the object a write is about ("podgroup/shop.web.web") when the path and query do not. */
export function auditObject(request: Request, object: string): void {
  objects.set(request, object);
}

/** The caller the gate found for this request, if any. */
export function callerOf(request: Request): Principal | undefined {
  return callers.get(request);
}

const writes = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Query values as logged: a token sent by mistake in the query is not written down. */
function redacted(query: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(query)) out[k] = /cst_[0-9a-f]{12}_/.test(v) || /token/i.test(k) ? "<redacted>" : v;
  return out;
}

/**
 * Middleware: the `audit` line of every authenticated write, and of any other request a handler
 * named an object for (a GET that writes a refresh request). Audit lines are written at info level
 * whatever the process's log level, so a quieter log never loses them.
 */
export function auditWrites(log: Logger): MiddlewareHandler {
  const audit = log.child({ audit: true }, { level: "info" });
  return async (c, next) => {
    await next();
    const object = objects.get(c.req.raw);
    if (!writes.has(c.req.method) && object === undefined) return;
    const who = callerOf(c.req.raw);
    if (who === undefined) return;
    const status = c.res.status;
    const outcome = status < 400 ? "allowed" : status === 403 ? "denied" : "failed";
    const query = redacted(c.req.query());
    audit.info(
      {
        tokenId: who.tokenId,
        user: who.user,
        role: who.role,
        method: c.req.method,
        path: c.req.path,
        ...(Object.keys(query).length > 0 ? { query } : {}),
        ...(object !== undefined ? { object } : {}),
        status,
        outcome,
      },
      "audit",
    );
  };
}
