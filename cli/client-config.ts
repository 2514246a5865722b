// Where the client commands find the services, and the options they share.
//
// ~/.capstan/config.yaml (mode 0600: it holds access tokens):
//
//   server: http://10.0.0.10:9000          # the orchestrator of apply/get/scale/delete
//   ca: /etc/capstan/ca.pem                # CA of every HTTPS server without a cluster `ca:`
//   clusters:                              # written by `capstan login <cluster>`
//     prod: {orchestrator: URL, secrets: URL, console: URL, token: cst_..., ca: /abs/ca.pem}
//   current: prod                          # the last cluster logged in to
//
// Orchestrator precedence for apply/get/scale/delete/nodes/drift, as kubectl and docker do it: the
// -server option, then CAPSTAN_SERVER (both through parseArgs), then the -context cluster's
// orchestrator, then `server:`, then the current cluster's orchestrator, then
// http://127.0.0.1:9000. `server:` stays above `current` so that a file written before clusters
// existed means what it meant.
//
// The cluster of an orchestrator command, whose token and CA it uses: the -context cluster (even
// with -server, as kubectl's --context does); else the current cluster when the URL came from it;
// else, when the URL came from -server, CAPSTAN_SERVER, `server:` or the default, the saved cluster
// whose orchestrator is that very URL (the current one if it is, else the only one; none when
// several match). So a saved token only ever goes to the server it was saved for.
//
// Token precedence (every client command): the -token option, then CAPSTAN_TOKEN (both through
// parseArgs), then the token of the command's cluster (`capstan login`), else none. Commands that
// name a CLUSTER (secret, deploy, apps, tokens, whoami) use that cluster's. It is sent as
// `access-token: T`.
//
// CA precedence (verification of https:// servers; there is no option that skips it): the -ca
// option, then CAPSTAN_CA (both through parseArgs), then the command's cluster's `ca:` (written by
// `capstan login -ca`), then the top-level `ca:`, else the system roots. A CA replaces the system
// roots (as curl --cacert does). Relative `ca:` paths are read from the folder of the config file,
// `~/` from the home folder.
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { X509Certificate } from "node:crypto";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { Document, isMap, LineCounter, parseDocument } from "yaml";
import type { CaBundle } from "./http-errors.ts";
import { UsageError, type OptionDef, type OptionValues } from "./options.ts";

export const defaultServer = "http://127.0.0.1:9000";

/** Where a cluster's services are by default: -web of each component (docs/cli.md, "Commands"). */
export const defaultUrls = { orchestrator: defaultServer, secrets: "http://127.0.0.1:9001", console: "http://127.0.0.1:9002" } as const;

export const clientOptionDefs: OptionDef[] = [
  {
    name: "server",
    type: "string",
    help: `orchestrator URL (else the -context cluster's, else \`server:\` in ~/.capstan/config.yaml, else the current cluster's, else ${defaultServer})`,
  },
  { name: "context", type: "string", help: "a cluster saved by `capstan login`: use its orchestrator, token and CA" },
  { name: "token", type: "string", help: "access token (else the token `capstan login` saved for the cluster of the server)" },
  { name: "ca", type: "string", help: "verify HTTPS servers with this CA certificate (PEM file) instead of the system roots (else the cluster's, else ca: in ~/.capstan/config.yaml)" },
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
  /** CA certificate file (absolute once read) that verifies the cluster's HTTPS servers. */
  ca?: string;
}

export interface ClientConfig {
  server?: string;
  /** CA certificate file (absolute once read) for HTTPS servers of no cluster with its own `ca:`. */
  ca?: string;
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
  const { server, clusters, current, ca } = data;
  if (server !== undefined && server !== null) {
    if (typeof server !== "string") throw new ClientConfigError(`${path}: server must be a URL string, e.g. ${defaultServer}`);
    config.server = server;
  }
  if (ca !== undefined && ca !== null && ca !== "") {
    if (typeof ca !== "string") throw new ClientConfigError(`${path}: ca must be the path of a CA certificate file (PEM)`);
    config.ca = configRelative(ca, path);
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
      const clusterCa = entry.ca;
      if (clusterCa !== undefined && clusterCa !== null && typeof clusterCa !== "string") throw new ClientConfigError(`${path}: clusters.${name}.ca must be the path of a CA certificate file (PEM)`);
      config.clusters[name] = {
        ...urls,
        ...(typeof token === "string" ? { token } : {}),
        ...(typeof clusterCa === "string" && clusterCa !== "" ? { ca: configRelative(clusterCa, path) } : {}),
      };
    }
  }
  return config;
}

/** A `ca:` path of the config file: `~/` is the home folder, a relative path the file's folder. */
function configRelative(file: string, configFile: string): string {
  if (file === "~" || file.startsWith("~/")) return join(dirname(dirname(configFile)), file.slice(1));
  return isAbsolute(file) ? file : resolve(dirname(configFile), file);
}

/**
 * A CA certificate file, read and checked. `where` names it in messages ("-ca", or the config key);
 * a bad -ca is a UsageError, a bad `ca:` a ClientConfigError naming the config file.
 */
export function readCaFile(file: string, where: { option: string } | { configKey: string; configFile: string }): CaBundle & { path: string } {
  const path = resolve(file);
  const fail = (why: string) =>
    "option" in where ? new UsageError(`${where.option} ${path}: ${why}`) : new ClientConfigError(`${where.configFile}: ${where.configKey} ${path}: ${why}`);
  let pem: string;
  try {
    pem = readFileSync(path, "utf8");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw fail(`cannot read the CA file (${err.code ?? err.message})`);
  }
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw fail('not a PEM CA certificate (no "-----BEGIN CERTIFICATE-----" block)');
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (e) {
      throw fail(`not a usable CA certificate (${(e as Error).message})`);
    }
  }
  return { pem, path, source: `${path} (${"option" in where ? where.option : `${where.configKey} in ${where.configFile}`})` };
}

/** What a client talks to and with which credentials. */
export interface ClientTarget {
  server: string;
  token?: string;
  ca?: CaBundle;
  /** The saved cluster the token and CA came from, when one did. */
  cluster?: string;
}

/**
 * The token and CA of a command whose cluster is `cluster` (undefined: none), after -token and -ca
 * (and CAPSTAN_TOKEN, CAPSTAN_CA). `config` is read only when the options leave something open.
 */
export function credentials(options: OptionValues, cluster: string | undefined, config: () => ClientConfig, path: string): { token?: string; ca?: CaBundle } {
  const entry = () => (cluster === undefined ? undefined : config().clusters[cluster]);
  const token = typeof options.token === "string" && options.token !== "" ? options.token : entry()?.token;
  let ca: CaBundle | undefined;
  if (typeof options.ca === "string" && options.ca !== "") ca = readCaFile(options.ca, { option: "-ca" });
  else if (entry()?.ca !== undefined) ca = readCaFile(entry()!.ca!, { configKey: `clusters.${cluster}.ca`, configFile: path });
  else if (config().ca !== undefined) ca = readCaFile(config().ca!, { configKey: "ca", configFile: path });
  return { ...(token !== undefined ? { token } : {}), ...(ca !== undefined ? { ca } : {}) };
}

/** The saved cluster whose `service` URL is `url`: the current one if it is, else the only one. */
export function clusterWithUrl(config: ClientConfig, service: "orchestrator" | "secrets" | "console", url: string): string | undefined {
  if (config.current !== undefined && config.clusters[config.current]?.[service] === url) return config.current;
  const matches = Object.entries(config.clusters).filter(([, e]) => e[service] === url);
  return matches.length === 1 ? matches[0]![0] : undefined;
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

/**
 * The orchestrator, token and CA for parsed client options (-server, -context, -token, -ca), with
 * the precedence described at the top of this file.
 */
export function targetFromOptions(options: OptionValues, home = homedir()): ClientTarget {
  const path = configPath(home);
  let loaded: ClientConfig | undefined;
  const config = () => (loaded ??= readClientConfig(path));
  const context = typeof options.context === "string" && options.context !== "" ? options.context : undefined;
  let server: string;
  let cluster: string | undefined;
  if (context !== undefined) {
    const entry = clusterFromConfig(context, home);
    cluster = context;
    server = typeof options.server === "string" && options.server !== "" ? normaliseServer(options.server, "-server") : entry.orchestrator;
  } else {
    if (typeof options.server === "string" && options.server !== "") server = normaliseServer(options.server, "-server");
    else if (config().server !== undefined) server = normaliseServer(config().server!, path);
    else {
      const current = config().current;
      const entry = current === undefined ? undefined : config().clusters[current];
      server = entry?.orchestrator ?? defaultServer;
      if (entry !== undefined) cluster = current;
    }
    // A URL that did not come from a cluster: the saved cluster with that orchestrator, if any. Not
    // needed (and the file not read) when -token and -ca say everything.
    const needsConfig = !(typeof options.token === "string" && options.token !== "" && typeof options.ca === "string" && options.ca !== "");
    if (cluster === undefined && needsConfig) cluster = clusterWithUrl(config(), "orchestrator", server);
  }
  return { server, ...credentials(options, cluster, config, path), ...(cluster !== undefined ? { cluster } : {}) };
}
