// A small typed client of the orchestrator API (docs/orchestrator.md), for the client commands.
// Requests and timeouts are cli/http-client.ts's, typed failures cli/http-errors.ts's.
import type { DriftAccepted } from "../api/orchestrator/node-schemas.ts";
import type { NodeRecord } from "../api/resources/node.ts";
import type { DependencyWithStatus } from "../api/resources/dependency.ts";
import type { PodGroupSpec, PodGroupWithSpec, PodSpec, RestartPolicy } from "../api/resources/podgroup.ts";
import { LineSplitter } from "../adapters/cluster/ndjson.ts";
import { homedir } from "node:os";
import { targetFromOptions } from "./client-config.ts";
import { HttpClient, query } from "./http-client.ts";
import { ApiError, type CaBundle } from "./http-errors.ts";
import type { OptionValues } from "./options.ts";

/** The body of a 202 Accepted answer. */
export interface Accepted {
  message: string;
  checkUrl: string;
}

/** One record of GET /api/podgroups/logs (NDJSON): a line, or a failure to read a container's log. */
export interface LogEntry {
  instance: number;
  container: number;
  node: string;
  stream?: "stdout" | "stderr";
  /** With timestamps only. */
  time?: string;
  line?: string;
  error?: string;
}

export interface LogsQuery {
  instance?: number;
  follow?: boolean;
  tail?: number;
  /** A duration (10m) or an RFC 3339 time, as the server takes it. */
  since?: string;
  timestamps?: boolean;
  /** The instance's previous containers (needs instance). */
  previous?: boolean;
}

export interface ClientOptions {
  /** Base URL, e.g. http://127.0.0.1:9000. */
  server: string;
  /** Per request (default 10 s). */
  requestTimeoutMs?: number;
  /** Sent as `access-token` with every request when given. */
  token?: string;
  /** Verify an https:// server with this CA instead of the system roots. */
  ca?: CaBundle;
}

export class OrchestratorClient {
  readonly server: string;
  private readonly http: HttpClient;

  constructor(opts: ClientOptions) {
    this.http = new HttpClient({ server: opts.server, component: "orchestrator", requestTimeoutMs: opts.requestTimeoutMs, token: opts.token, ca: opts.ca });
    this.server = this.http.server;
  }

  getPodGroup(name: string): Promise<PodGroupWithSpec> {
    return this.request("GET", `/api/podgroups?${query({ name })}`) as Promise<PodGroupWithSpec>;
  }

  /** Every group, sorted by name (GET /api/podgroups/_all). */
  async listPodGroups(): Promise<PodGroupWithSpec[]> {
    const body = await this.request("GET", "/api/podgroups/_all");
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /api/podgroups/_all did not answer a list");
    return (body as PodGroupWithSpec[]).sort((a, b) => a.spec.name.localeCompare(b.spec.name));
  }

  createPodGroup(spec: PodGroupSpec): Promise<Accepted> {
    return this.request("POST", "/api/podgroups", spec) as Promise<Accepted>;
  }

  /** PATCH cmd=spec: a new pod spec, rolled out one instance at a time. */
  updatePodSpec(name: string, pod: PodSpec): Promise<Accepted> {
    return this.request("PATCH", `/api/podgroups?${query({ name, cmd: "spec" })}`, pod) as Promise<Accepted>;
  }

  /** PATCH cmd=replica: instance count, and the restart policy when given. */
  updateReplica(name: string, numInstances: number, restartPolicy?: RestartPolicy): Promise<Accepted> {
    const q = query({ name, cmd: "replica", num_instances: String(numInstances), restart_policy: restartPolicy });
    return this.request("PATCH", `/api/podgroups?${q}`) as Promise<Accepted>;
  }

  /** POST /api/podgroups/restart: a rolling restart, one instance at a time. */
  restartPodGroup(name: string): Promise<Accepted> {
    return this.request("POST", `/api/podgroups/restart?${query({ name })}`) as Promise<Accepted>;
  }

  deletePodGroup(name: string): Promise<Accepted> {
    return this.request("DELETE", `/api/podgroups?${query({ name })}`) as Promise<Accepted>;
  }

  /** GET /api/nodes: every node as the node monitor last recorded it, by name. */
  async listNodes(): Promise<NodeRecord[]> {
    const body = await this.request("GET", "/api/nodes");
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /api/nodes did not answer a list");
    return body as NodeRecord[];
  }

  /** PATCH /api/nodes?cmd=drift: move instances off `from` (a durable task on the server). */
  drift(d: { from: string; to?: string; pg?: string; instance?: number; force?: boolean }): Promise<DriftAccepted> {
    const q = query({ cmd: "drift", from: d.from, to: d.to, pg: d.pg, pg_instance: d.instance?.toString(), force: d.force ? "true" : undefined });
    return this.request("PATCH", `/api/nodes?${q}`) as Promise<DriftAccepted>;
  }

  /** GET /api/depends?name=: a dependency's definition and its pods. */
  getDependency(name: string): Promise<DependencyWithStatus> {
    return this.request("GET", `/api/depends?${query({ name })}`) as Promise<DependencyWithStatus>;
  }

  /** Every dependency, sorted by name (GET /api/depends/_all). */
  async listDependencies(): Promise<DependencyWithStatus[]> {
    const body = await this.request("GET", "/api/depends/_all");
    if (!Array.isArray(body)) throw new ApiError(200, "BadAnswer", "GET /api/depends/_all did not answer a list");
    return (body as DependencyWithStatus[]).sort((a, b) => a.spec.name.localeCompare(b.spec.name));
  }

  /**
   * A PodGroup's logs (GET /api/podgroups/logs, as NDJSON), record by record as they arrive.
   * Opening is bounded by the request timeout (plus the server's own opening time); after that
   * `signal` ends the stream (a follow stream lasts until then, or until the containers stop).
   */
  async *logs(name: string, q: LogsQuery, signal: AbortSignal): AsyncGenerator<LogEntry, void, undefined> {
    const params = query({
      name,
      instance: q.instance?.toString(),
      follow: q.follow ? "true" : undefined,
      tail: q.tail?.toString(),
      since: q.since,
      timestamps: q.timestamps ? "true" : undefined,
      previous: q.previous ? "true" : undefined,
    });
    // The orchestrator answers once it has opened every container's log, each bounded by the
    // engines' read timeout (10 s): wait that long beyond the request timeout.
    const body = await this.http.stream(`/api/podgroups/logs?${params}`, "application/x-ndjson", signal, 10_000);
    // A record is a line of at most 1 MiB, JSON-escaped: allow for the escapes.
    const lines = new LineSplitter(8 << 20);
    for await (const chunk of body) {
      for (const text of lines.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
        let entry: LogEntry;
        try {
          entry = JSON.parse(text) as LogEntry;
        } catch {
          throw new ApiError(200, "BadAnswer", `GET /api/podgroups/logs answered a line that is not JSON: ${text.slice(0, 200)}`);
        }
        yield entry;
      }
    }
  }

  private async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const answer = await this.http.request(method, path, body);
    // Every orchestrator answer is JSON; an empty one is a broken server or proxy.
    if (answer === undefined) throw new ApiError(200, "BadAnswer", `${method} ${path} answered without JSON`);
    return answer;
  }
}

/** The client for parsed client options (-server, -context, -token, -ca, -request-timeout). */
export function clientFromOptions(options: OptionValues, home = homedir()): OrchestratorClient {
  const { server, token, ca } = targetFromOptions(options, home);
  return new OrchestratorClient({ server, token, ca, requestTimeoutMs: options["request-timeout"] as number });
}
