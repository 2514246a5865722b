// A typed client of the console's API (docs/console.md, "Endpoints"): the admin helpers (register an app, list apps,
// create and list tokens), whoami (who the caller's token names), and the role check that tells a
// maintainer whether an app is registered and whether they may deploy it.
import { HttpClient, type HttpClientOptions } from "./http-client.ts";
import { ApiError } from "./http-errors.ts";

export interface AppRecord {
  appname: string;
  maintainers: string[];
  createdAt: string;
}

/** Token roles: admin; user (a person, maintainer of the apps listing their e-mail); viewer (read-only
 * on the apps granted on the token); sync (the read-only service identity). */
export const tokenRoles = ["user", "viewer", "sync", "admin"] as const;
export type TokenRole = (typeof tokenRoles)[number];

/** A token as GET /api/v1/tokens lists it (never the token itself). */
export interface TokenInfo {
  id: string;
  user: string;
  role: string;
  createdAt: string;
  expiresAt?: string;
  /** A viewer token's granted apps. */
  apps?: string[];
  /** What made it when not `tokens create`: "sso" (a single sign-on login), "web-session" (a web console sign-in). */
  origin?: string;
}

export interface CreatedToken extends TokenInfo {
  token: string;
}

/** GET /api/v1/whoami: the caller. */
export interface WhoAmI {
  /** The token's id (never the token). */
  id: string;
  user: string;
  role: string;
  /** The apps the caller may access: maintained ones (user), granted ones (viewer). */
  apps: string[];
  /** Every app (admin, sync). */
  allApps: boolean;
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

  /**
   * Add and remove maintainers, worked out by the console from the list as stored (PATCH): the
   * app as it is now, and who was actually added and removed. ApiError 400 for a bad e-mail or an
   * edit that would leave none, 404 for no app.
   */
  async editMaintainers(appname: string, edit: { add?: string[]; remove?: string[] }): Promise<{ app: AppRecord; added: string[]; removed: string[] }> {
    return (await this.http.request("PATCH", `/api/v1/apps/${encodeURIComponent(appname)}/maintainers`, edit)) as { app: AppRecord; added: string[]; removed: string[] };
  }

  async listApps(): Promise<AppRecord[]> {
    const body = await this.http.request("GET", "/api/v1/apps");
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /api/v1/apps did not answer a list");
    return (body as AppRecord[]).sort((a, b) => a.appname.localeCompare(b.appname));
  }

  /** `apps`: a viewer token's grants (required for role viewer, refused by the console otherwise). */
  async createToken(user: string, role?: string, expiresIn?: string, apps?: string[]): Promise<CreatedToken> {
    const body = { user, ...(role ? { role } : {}), ...(expiresIn ? { expiresIn } : {}), ...(apps !== undefined ? { apps } : {}) };
    return (await this.http.request("POST", "/api/v1/tokens", body)) as CreatedToken;
  }

  /** Every token (admin), oldest first. */
  /** Revoke a token by its id; ApiError 404 when there is none, 409 for the last admin token. */
  async revokeToken(id: string): Promise<void> {
    await this.http.request("DELETE", `/api/v1/tokens/${encodeURIComponent(id)}`);
  }

  async listTokens(): Promise<TokenInfo[]> {
    const body = await this.http.request("GET", "/api/v1/tokens");
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /api/v1/tokens did not answer a list");
    return (body as TokenInfo[]).sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  /** Who the token names: its id, user, role and apps. */
  async whoami(): Promise<WhoAmI> {
    const body = (await this.http.request("GET", "/api/v1/whoami")) as Partial<WhoAmI> | undefined;
    if (typeof body?.user !== "string" || typeof body.role !== "string") throw new ApiError(200, "BadAnswer", "GET /api/v1/whoami did not answer {id, user, role, apps}");
    return { ...body, id: String(body.id ?? ""), apps: Array.isArray(body.apps) ? body.apps.map(String) : [], allApps: body.allApps === true } as WhoAmI;
  }

  /** The caller's role on `app`; ApiError 404 = not registered, 403 = no role, 401 = bad token. */
  async roleOn(app: string): Promise<string> {
    const body = (await this.http.request("GET", `/api/v1/repos/${encodeURIComponent(app)}/roles/`)) as { role?: { role?: unknown } } | undefined;
    const role = body?.role?.role;
    if (typeof role !== "string" || role === "") throw new ApiError(200, "BadAnswer", `the console answered no role for app ${app}`);
    return role;
  }
}
