// The orchestrator under test, as operators run it: `capstan orchestrator -web -store -cluster` in a
// child process (so its RSS and CPU are its own, read from /proc), talked to over HTTP only. The
// benchmark watches the status key in the store to see convergence the moment the controller
// writes it, which is what a client's GET would answer next.
import { tokenHeader } from "../../api/auth/index.ts";
import { ensureAdminToken, generateToken } from "../../api/console/index.ts";
import { keys } from "../../api/resources/keys.ts";
import type { PodGroupStatus } from "../../api/resources/podgroup.ts";
import type { Store } from "../../adapters/store/store.ts";
import { CapstanProcess } from "../lib/capstan-process.ts";
import { httpCall } from "../lib/http.ts";

export interface OrchestratorOptions {
  storeUrl: string;
  cluster: string;
  /** Extra options, e.g. ["-refresh-interval", "20s"]. */
  args?: string[];
  /** Options for node itself, e.g. ["--cpu-prof", "--cpu-prof-dir=/tmp/prof"]. */
  nodeArgs?: string[];
  /**
   * -auth (default "token", the process's own default): every API call then needs a console access
   * token registered in the store (see registerAdminToken); "none" is allowed on 127.0.0.1 only.
   */
  auth?: "token" | "none";
  readyTimeoutMs?: number;
}

export type OrchestratorProcess = CapstanProcess;

export const OrchestratorProcess = {
  /** `capstan orchestrator -web <free port> -store -cluster ...args`, once /readyz answers. */
  start(options: OrchestratorOptions): Promise<CapstanProcess> {
    const args = ["-store", options.storeUrl, "-cluster", options.cluster, "-auth", options.auth ?? "token", ...(options.args ?? [])];
    return CapstanProcess.start("orchestrator", args, options);
  },
};

export interface ApiAnswer {
  status: number;
  body: unknown;
}

export interface ApiCallOptions {
  /** Sent as `access-token: <token>` (the API's own header); none with `-auth none`. */
  token?: string | undefined;
  timeoutMs?: number;
}

/** One API request with a timeout; the body parsed as JSON when there is one. */
export async function api(baseUrl: string, method: string, path: string, body?: unknown, options: ApiCallOptions = {}): Promise<ApiAnswer> {
  const { token, timeoutMs = 10_000 } = options;
  const headers: Record<string, string> = {};
  if (token !== undefined) headers[tokenHeader] = token;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await httpCall(`${baseUrl}${path}`, method, {
    timeoutMs,
    headers,
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  try {
    return { status: res.status, body: res.text === "" ? undefined : (JSON.parse(res.text) as unknown) };
  } catch (err) {
    throw new Error(`${method} ${path}: ${res.status} answer is not JSON: ${res.text.slice(0, 200)}`, { cause: err });
  }
}

/**
 * Resolves with performance.now() at the moment the store's status record for `name` first
 * satisfies `test` (checked on the current value, then on every write the watch delivers).
 */
export async function untilStatus(
  store: Store,
  name: string,
  test: (status: PodGroupStatus | null) => boolean,
  timeoutMs: number,
): Promise<number> {
  const key = keys.podGroupStatusOf(name);
  const parse = (value: string | undefined) => (value ? (JSON.parse(value) as PodGroupStatus) : null);
  const current = await store.list(key, { limit: 1 });
  const kv = current.items.find((i) => i.key === key);
  if (test(parse(kv?.value))) return performance.now();
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err: Error | null, at = 0) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      void watch.close();
      if (err) reject(err);
      else resolve(at);
    };
    const timer = setTimeout(() => finish(new Error(`status of ${name}: condition not met in ${timeoutMs} ms`)), timeoutMs);
    const watch = store.watch(key, current.revision + 1, {
      onEvents(events) {
        const at = performance.now();
        for (const e of events) {
          if (e.kv.key !== key) continue;
          if (test(e.type === "put" ? parse(e.kv.value) : null)) return finish(null, at);
        }
      },
      onError: (err) => finish(err),
    });
  });
}

/** Every pod of the status is running and there are exactly `instances` of them. */
export function allRunning(instances: number): (s: PodGroupStatus | null) => boolean {
  return (s) => s !== null && s.pods.length === instances && s.pods.every((p) => p.state === "running");
}

/**
 * A fresh admin token, registered in `store` as the console would register CAPSTAN_ADMIN_TOKEN
 * (only its hash is stored). `capstan orchestrator` creates none itself; the bench plays the
 * console's part before the orchestrator starts.
 */
export async function registerAdminToken(store: Store, token = generateToken().token): Promise<string> {
  await ensureAdminToken({ store, envToken: token });
  return token;
}
