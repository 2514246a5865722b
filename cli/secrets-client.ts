// A typed client of the secrets service (docs/secrets.md, "Endpoints"): /v2/secrets records and
// the /v2/sys seal life cycle.
import { HttpClient, query, type HttpClientOptions } from "./http-client.ts";
import { ApiError } from "./http-errors.ts";

export interface SecretRecord {
  path: string;
  content: string;
  owner: string;
  group: string;
  mode: string;
  proc?: string;
}

export interface SecretAddress {
  app: string;
  proc: string;
  path: string;
}

export interface SealStatus {
  initialized: boolean;
  sealed: boolean;
  [more: string]: unknown;
}

export class SecretsClient {
  private readonly http: HttpClient;

  constructor(opts: Omit<HttpClientOptions, "component">) {
    this.http = new HttpClient({ ...opts, component: "secrets service" });
  }

  get server(): string {
    return this.http.server;
  }

  async put(at: SecretAddress, record: { content: string; mode?: string; owner?: string; group?: string }): Promise<void> {
    await this.http.request("PUT", `/v2/secrets?${query({ ...at })}`, record);
  }

  /** Every record of `proc` (of every proc of the app when proc is undefined). */
  async list(app: string, proc?: string): Promise<SecretRecord[]> {
    const body = await this.http.request("GET", `/v2/secrets?${query({ app, proc })}`);
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /v2/secrets did not answer a list");
    return body as SecretRecord[];
  }

  /** Whether a record was there to delete (a DELETE of a missing record succeeds too). */
  async delete(at: SecretAddress): Promise<boolean> {
    const body = (await this.http.request("DELETE", `/v2/secrets?${query({ ...at })}`)) as { deleted?: unknown } | undefined;
    return body?.deleted !== false;
  }

  async init(shares: number, threshold: number): Promise<{ keys: string[]; rootToken: string }> {
    return (await this.http.request("POST", "/v2/sys/init", { shares, threshold })) as { keys: string[]; rootToken: string };
  }

  async unseal(key: string): Promise<{ sealed: boolean; progress?: number; threshold?: number }> {
    return (await this.http.request("POST", "/v2/sys/unseal", { key })) as { sealed: boolean; progress?: number; threshold?: number };
  }

  async seal(): Promise<unknown> {
    return this.http.request("POST", "/v2/sys/seal");
  }

  async status(): Promise<SealStatus> {
    return (await this.http.request("GET", "/v2/sys/status")) as SealStatus;
  }
}
