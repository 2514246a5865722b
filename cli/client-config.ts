// Where the client commands find the orchestrator, and the options they share.
//
// Server precedence, as kubectl and docker do it: the -server option, then CAPSTAN_SERVER (both
// through parseArgs), then `server:` in ~/.capstan/config.yaml, then http://127.0.0.1:9000.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { LineCounter, parseDocument } from "yaml";
import { OrchestratorClient } from "./client.ts";
import { UsageError, type OptionDef, type OptionValues } from "./options.ts";

export const defaultServer = "http://127.0.0.1:9000";

export const clientOptionDefs: OptionDef[] = [
  {
    name: "server",
    type: "string",
    help: `orchestrator URL (else \`server:\` in ~/.capstan/config.yaml, else ${defaultServer})`,
  },
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

export function configPath(home = homedir()): string {
  return join(home, ".capstan", "config.yaml");
}

/** `server` from the config file, or undefined when there is no file or no such key. */
export function serverFromConfig(path: string): string | undefined {
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
  const server = (data as Record<string, unknown>).server;
  if (server === undefined || server === null) return undefined;
  if (typeof server !== "string") throw new ClientConfigError(`${path}: server must be a URL string, e.g. ${defaultServer}`);
  return server;
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

/** The client for parsed client options (-server, -request-timeout). */
export function clientFromOptions(options: OptionValues, home = homedir()): OrchestratorClient {
  let server: string;
  if (typeof options.server === "string" && options.server !== "") {
    server = normaliseServer(options.server, "-server");
  } else {
    const path = configPath(home);
    const fromFile = serverFromConfig(path);
    server = fromFile === undefined ? defaultServer : normaliseServer(fromFile, path);
  }
  return new OrchestratorClient({ server, requestTimeoutMs: options["request-timeout"] as number });
}
