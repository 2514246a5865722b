// What every web console handler works with: the viewer, and the platform's APIs called as the
// viewer (docs/web-console.md).
import type { Context } from "hono";
import { readApi, type ApiCaller, type ApiRequest, type ApiResult } from "./api-client.ts";
import type { Viewer } from "./layout.ts";

export interface UiRequest {
  viewer: Viewer;
  /** Calls an API path as the viewer. */
  call(path: string, req?: Omit<ApiRequest, "token" | "host">): Promise<Response>;
  /** Calls an API path as the viewer and reads the JSON answer. */
  json<T>(path: string, req?: Omit<ApiRequest, "token" | "host">): Promise<ApiResult<T>>;
}

export type UiEnv = { Variables: { ui: UiRequest } };

export function uiRequest(api: ApiCaller, viewer: Viewer, token: string | undefined, host: string | undefined): UiRequest {
  const call = (path: string, req: Omit<ApiRequest, "token" | "host"> = {}) => api(path, { ...req, token, host });
  return {
    viewer,
    call,
    json: async <T>(path: string, req: Omit<ApiRequest, "token" | "host"> = {}) => readApi<T>(await call(path, req)),
  };
}

/** The request's UiRequest (set by the session middleware). */
export function ui(c: Context<UiEnv>): UiRequest {
  return c.get("ui");
}

/** A query string from the defined values of `params`. */
export function qs(params: Record<string, string | number | boolean | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") p.set(k, String(v));
  const s = p.toString();
  return s === "" ? "" : `?${s}`;
}

/** A form field as a string ("" when absent or a file). */
export function field(form: Record<string, unknown>, name: string): string {
  const v = form[name];
  return typeof v === "string" ? v : "";
}
