// Where the client commands find the services, and the options they share.
//
// ~/.capstan/config.yaml (mode 0600: it holds access tokens):
//
//   server: http://10.0.0.10:9000          # the orchestrator of apply/get/scale/delete (issue 3)
//   clusters:                              # written by `capstan login <cluster>`
//     prod: {orchestrator: URL, secrets: URL, console: URL, token: cst_...}
//   current: prod                          # the last cluster logged in to
//
// Orchestrator precedence for apply/get/scale/delete, as kubectl and docker do it: the -server
// option, then CAPSTAN_SERVER (both through parseArgs), then the -context cluster's orchestrator,
// then `server:`, then the current cluster's orchestrator, then http://127.0.0.1:9000. `server:`
// stays above `current` so that a file written before clusters existed means what it meant.
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { Document, isMap, LineCounter, parseDocument } from "yaml";
import { OrchestratorClient } from "./client.ts";
import { UsageError, type OptionDef, type OptionValues } from "./options.ts";

export const defaultServer = "http://127.0.0.1:9000";

/** Where a cluster's services are by default (DESIGN.md section 7: -web of each component). */
export const defaultUrls = { orchestrator: defaultServer, secrets: "http://127.0.0.1:9001", console: "http://127.0.0.1:9002" } as const;

export const clientOptionDefs: OptionDef[] = [
  {
    name: "server",
    type: "string",
    help: `orchestrator URL (else the -context cluster's, else \`server:\` in ~/.capstan/config.yaml, else the current cluster's, else ${defaultServer})`,
  },
  { name: "context", type: "string", help: "a cluster saved by `capstan login`: use its orchestrator" },
  { name: "request-timeout", type: "duration", help: "timeout of each HTTP request", default: "10s" },
];

export const waitOptionDefs: OptionDef[] = [
  { name: "wait", type: "bool", help: "wait until the group has converged (or failed), showing progress" },
  { name: "timeout", type: "duration", help: "how long -wait waits before giving up", default: "5m" },
];

/** A bad ~/.capstan/config.yaml: named with its path and line, so the user can fix it. */
export class ClientConfigError extends Error {
  override readonly name = "ClientConfigError";
}

/** One cluster's services and the token used with them. */
export interface ClusterEntry {
  orchestrator: string;
  secrets: string;
  console: string;
  token?: string;
}

export interface ClientConfig {
  server?: string;
  clusters: Record<string, ClusterEntry>;
  current?: string;
}

export const clusterNamePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export function configPath(home = homedir()): string {
  return join(home, ".capstan", "config.yaml");
}

/** The whole config file, checked; an empty config when there is no file. */
export function readClientConfig(path: string): ClientConfig {
  const data = loadMapping(path);
  const config: ClientConfig = { clusters: {} };
  if (data === undefined) return config;
  const { server, clusters, current } = data;
  if (server !== undefined && server !== null) {
    if (typeof server !== "string") throw new ClientConfigError(`${path}: server must be a URL string, e.g. ${defaultServer}`);
    config.server = server;
  }
  if (current !== undefined && current !== null) {
    if (typeof current !== "string") throw new ClientConfigError(`${path}: current must be a cluster name`);
    config.current = current;
  }
  if (clusters !== undefined && clusters !== null) {
    if (typeof clusters !== "object" || Array.isArray(clusters)) throw new ClientConfigError(`${path}: clusters must be a mapping of cluster names`);
    for (const [name, raw] of Object.entries(clusters as Record<string, unknown>)) {
      const entry = (raw ?? {}) as Record<string, unknown>;
      const urls = {} as Record<"orchestrator" | "secrets" | "console", string>;
      for (const k of ["orchestrator", "secrets", "console"] as const) {
        const v = entry[k];
        if (v === undefined || v === null) urls[k] = defaultUrls[k];
        else if (typeof v === "string") urls[k] = normaliseServer(v, `${path}: clusters.${name}.${k}`);
        else throw new ClientConfigError(`${path}: clusters.${name}.${k} must be a URL string`);
      }
      const token = entry.token;
      if (token !== undefined && token !== null && typeof token !== "string") throw new ClientConfigError(`${path}: clusters.${name}.token must be a string`);
      config.clusters[name] = { ...urls, ...(typeof token === "string" ? { token } : {}) };
    }
  }
  return config;
}

/** `server` from the config file, or undefined when there is no file or no such key. */
export function serverFromConfig(path: string): string | undefined {
  return readClientConfig(path).server;
}

/** The cluster `name` from the config; a clear error naming `capstan login` when it is not there. */
export function clusterFromConfig(name: string, home = homedir()): ClusterEntry {
  if (!clusterNamePattern.test(name)) throw new UsageError(`cluster name "${name}" must be letters, digits, ".", "_" or "-"`);
  const path = configPath(home);
  const entry = readClientConfig(path).clusters[name];
  if (entry === undefined) throw new ClientConfigError(`no cluster "${name}" in ${path}: run capstan login ${name} first`);
  return entry;
}

/**
 * Save a cluster entry (and make it current), keeping everything else in the file, comments
 * included. The file is written to a temporary file created with mode 0600 and renamed over the
 * old one, so it is never readable by others, even for a moment, and never half-written.
 */
export function saveCluster(name: string, entry: ClusterEntry, home = homedir()): string {
  const path = configPath(home);
  readClientConfig(path); // refuse to rewrite a file we could not read back
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw new ClientConfigError(`${path}: ${(e as Error).message}`);
  }
  const parsed = parseDocument(text);
  const doc = isMap(parsed.contents) ? parsed : new Document({});
  doc.setIn(["clusters", name], doc.createNode({ ...entry }));
  doc.set("current", name);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, doc.toString(), { mode: 0o600 });
  chmodSync(temp, 0o600); // a leftover temp file from a crash keeps its old mode otherwise
  renameSync(temp, path);
  return path;
}

/** The file's top-level mapping, or undefined when there is no file or it is empty. */
function loadMapping(path: string): Record<string, unknown> | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ClientConfigError(`${path}: ${(e as Error).message}`);
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const problem = doc.errors[0];
  if (problem) {
    const at = lines.linePos(problem.pos[0]);
    throw new ClientConfigError(`${path}:${at.line}:${at.col}: ${problem.message}`);
  }
  const data = doc.toJS() as unknown;
  if (data === null || data === undefined) return undefined;
  if (typeof data !== "object" || Array.isArray(data)) throw new ClientConfigError(`${path}: expected a mapping of settings (server: URL)`);
  return data as Record<string, unknown>;
}

/** An http(s) base URL; "host:port" alone means http://host:port. */
export function normaliseServer(text: string, where: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new UsageError(`${where}: "${text}" is not a URL, e.g. ${defaultServer}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`${where}: "${text}" must be an http:// or https:// URL`);
  return url.origin + url.pathname.replace(/\/+$/, "");
}

/** The client for parsed client options (-server, -context, -request-timeout). */
export function clientFromOptions(options: OptionValues, home = homedir()): OrchestratorClient {
  let server: string;
  if (typeof options.server === "string" && options.server !== "") {
    server = normaliseServer(options.server, "-server");
  } else if (typeof options.context === "string" && options.context !== "") {
    server = clusterFromConfig(options.context, home).orchestrator;
  } else {
    const path = configPath(home);
    const config = readClientConfig(path);
    const current = config.current === undefined ? undefined : config.clusters[config.current];
    if (config.server !== undefined) server = normaliseServer(config.server, path);
    else server = current?.orchestrator ?? defaultServer;
  }
  return new OrchestratorClient({ server, requestTimeoutMs: options["request-timeout"] as number });
}
