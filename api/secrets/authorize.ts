// Authorization by asking the console, as the original lvault did: GET
// <console>/api/v1/repos/<app>/roles/ with the caller's access-token. Unlike the original, the
// status code is read (401, 403 and 404 are passed on as such) and a console that does not answer
// within 3 s is a 503, never an implicit yes or a misleading 401.
//
// A positive answer is cached for at most `cacheMs` (5 s), keyed by SHA-256(token) and app, so a
// busy client costs the console one call per 5 s; the price is that a revoked token or a removed
// maintainer keeps access for up to 5 s. Negative answers are not cached.
import { createHash } from "node:crypto";
import type { Clock } from "../../runtime/clock.ts";
import { forbidden, unauthorized } from "../console/errors.ts";
import { notFound, unavailable } from "../http/index.ts";

export type SecretsRole = "maintainer" | "admin" | "sync";

export interface ConsoleAuthorizerOptions {
  consoleUrl: string;
  clock: Clock;
  cacheMs?: number;
  timeoutMs?: number;
}

const maxCacheEntries = 10_000;

export class ConsoleAuthorizer {
  private readonly cache = new Map<string, { role: SecretsRole; until: number }>();
  private readonly base: string;
  private readonly cacheMs: number;
  private readonly timeoutMs: number;

  constructor(private readonly opts: ConsoleAuthorizerOptions) {
    this.base = opts.consoleUrl.replace(/\/+$/, "");
    this.cacheMs = opts.cacheMs ?? 5000;
    this.timeoutMs = opts.timeoutMs ?? 3000;
  }

  /** The caller's role on `app`; throws 401/403 (AuthError), 404 or 503 (ApiError). */
  async role(token: string, app: string): Promise<SecretsRole> {
    const cacheKey = `${createHash("sha256").update(token).digest("hex")}\0${app}`;
    const now = this.opts.clock.now();
    const hit = this.cache.get(cacheKey);
    if (hit !== undefined && hit.until > now) return hit.role;

    let res: Response;
    try {
      res = await fetch(`${this.base}/api/v1/repos/${encodeURIComponent(app)}/roles/`, {
        headers: { "access-token": token },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch {
      throw unavailable("the console did not answer the role check; retry");
    }
    const body = (await res.json().catch(() => ({}))) as { role?: { role?: unknown }; error?: unknown };
    if (res.status === 401) throw unauthorized("invalid, expired or revoked access token");
    if (res.status === 403) throw forbidden(typeof body.error === "string" ? body.error : `no role on app ${app}`);
    if (res.status === 404) throw notFound(`app ${app} is not registered`);
    if (res.status !== 200) throw unavailable(`the console answered the role check with ${res.status}; retry`);
    const role = body.role?.role;
    if (role !== "maintainer" && role !== "admin" && role !== "sync") throw forbidden(`no role on app ${app}`);

    if (this.cacheMs > 0) {
      if (this.cache.size >= maxCacheEntries) this.cache.delete(this.cache.keys().next().value!);
      this.cache.delete(cacheKey);
      this.cache.set(cacheKey, { role, until: now + this.cacheMs });
    }
    return role;
  }
}
