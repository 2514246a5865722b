// One webhook POST (docs/notify.md): JSON, a deadline on the whole exchange, no redirects, and an
// outcome that never carries the URL (undici's errors may name it; only their code is kept).
import { request } from "undici";
import type { PostOutcome } from "./decisions.ts";

export type PostJson = (url: string, body: unknown, signal: AbortSignal) => Promise<PostOutcome>;

/** POST `body` as JSON to `url`, giving up after `timeoutMs` (or when `signal` aborts). */
export function webhookPoster(timeoutMs: number): PostJson {
  return async (url, body, signal) => {
    const deadline = AbortSignal.timeout(timeoutMs);
    try {
      const res = await request(url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": "capstan-notify" },
        body: JSON.stringify(body),
        signal: AbortSignal.any([signal, deadline]),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      // The answer's body is read (bounded by the deadline) only to free the connection.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
      if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, status: res.statusCode };
      return { ok: false, status: res.statusCode, problem: `HTTP ${res.statusCode}` };
    } catch (e) {
      if (deadline.aborted) return { ok: false, problem: `no answer within ${timeoutMs} ms` };
      if (signal.aborted) return { ok: false, problem: "stopped" };
      const code = (e as { code?: unknown }).code;
      return { ok: false, problem: typeof code === "string" ? `connection failed (${code})` : "connection failed" };
    }
  };
}
