// An app's notify routes (docs/notify.md): the definition's `notify.<kind>: "<target>"` map,
// stored by the orchestrator (PUT /api/notify/routes/<app>) so its notifier knows where the app's
// events go. `capstan notify route -f app.yaml` calls syncNotifyRoutes; so may `capstan deploy`.
import { homedir } from "node:os";
import type { AppDefinition } from "../api/appdef/index.ts";
import { clusterFromConfig, configPath, credentials, readClientConfig } from "./client-config.ts";
import { HttpClient } from "./http-client.ts";
import type { OptionValues } from "./options.ts";

export interface RoutesAnswer {
  app: string;
  routes: Record<string, string>;
}

/** Sorted by kind, for comparison and printing. */
function sorted(routes: Record<string, string>): [string, string][] {
  return Object.entries(routes).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

export function sameRoutes(a: Record<string, string>, b: Record<string, string>): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

/**
 * Make the stored routes of the definition's app equal its `notify` map (none removes them).
 * Writes only when they differ; answers "unchanged", "set" or "removed".
 */
export async function syncNotifyRoutes(http: HttpClient, def: Pick<AppDefinition, "appname" | "notify">): Promise<"unchanged" | "set" | "removed"> {
  const path = `/api/notify/routes/${encodeURIComponent(def.appname)}`;
  const current = (await http.request("GET", path)) as RoutesAnswer;
  if (sameRoutes(current.routes ?? {}, def.notify)) return "unchanged";
  await http.request("PUT", path, { routes: def.notify });
  return Object.keys(def.notify).length === 0 ? "removed" : "set";
}

/** The orchestrator client of a saved cluster (as `capstan deploy CLUSTER` addresses it). */
export function clusterOrchestratorHttp(cluster: string, options: OptionValues, home = homedir()): HttpClient {
  const entry = clusterFromConfig(cluster, home);
  const path = configPath(home);
  let loaded: ReturnType<typeof readClientConfig> | undefined;
  const { token, ca } = credentials(options, cluster, () => (loaded ??= readClientConfig(path)), path);
  return new HttpClient({ server: entry.orchestrator, component: "orchestrator", token, ca, requestTimeoutMs: options["request-timeout"] as number });
}
