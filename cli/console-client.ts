// A typed client of the console's API (issue 5): the admin helpers (register an app, list apps,
// create a token) and the role check that tells a maintainer whether an app is registered and
// whether they may deploy it.
import { ApiError, HttpClient, type HttpClientOptions } from "./http-client.ts";

export interface AppRecord {
  appname: string;
  maintainers: string[];
  createdAt: string;
}

export interface CreatedToken {
  id: string;
  token: string;
  user: string;
  role: string;
  createdAt: string;
  expiresAt?: string;
}

export class ConsoleClient {
  private readonly http: HttpClient;

  constructor(opts: Omit<HttpClientOptions, "component">) {
    this.http = new HttpClient({ ...opts, component: "console" });
  }

  get server(): string {
    return this.http.server;
  }

  async createApp(appname: string, maintainers: string[]): Promise<AppRecord> {
    return (await this.http.request("POST", "/api/v1/apps", { appname, maintainers })) as AppRecord;
  }

  async listApps(): Promise<AppRecord[]> {
    const body = await this.http.request("GET", "/api/v1/apps");
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /api/v1/apps did not answer a list");
    return (body as AppRecord[]).sort((a, b) => a.appname.localeCompare(b.appname));
  }

  async createToken(user: string, role?: string, expiresIn?: string): Promise<CreatedToken> {
    return (await this.http.request("POST", "/api/v1/tokens", { user, ...(role ? { role } : {}), ...(expiresIn ? { expiresIn } : {}) })) as CreatedToken;
  }

  /** The caller's role on `app`; ApiError 404 = not registered, 403 = no role, 401 = bad token. */
  async roleOn(app: string): Promise<string> {
    const body = (await this.http.request("GET", `/api/v1/repos/${encodeURIComponent(app)}/roles/`)) as { role?: { role?: unknown } } | undefined;
    const role = body?.role?.role;
    if (typeof role !== "string" || role === "") throw new ApiError(200, "BadAnswer", `the console answered no role for app ${app}`);
    return role;
  }
}
