// `capstan registry`: the image registry (distribution's HTTP API V2) in one process, configured by
// distribution's config.yaml (api/registry/config.ts), and `capstan registry check-config FILE`.
//
// The process is every server command's (cli/serve.ts): probes, /metrics, leader election, -auth,
// -tls-*, -store-*; the registry API (/v2/) is mounted on the manager's app. What is particular:
//
// - Listen address: -web, else the config's http.addr, else 127.0.0.1:5000.
// - The store: the registry keeps nothing of its own in it yet (garbage collection will keep its
//   bookkeeping there); serve() needs one for leader election and compaction. With -store it is
//   that store, and the store key /platform/config/auth/registry ({realm, issuer, service}, written
//   by the console) decides token auth at run time, watched: present turns it on, removed turns it
//   off (a warning; docs/registry.md, "Token auth at run time"). Without -store it is
//   an embedded SQLite file in -data (default ROOTDIRECTORY/capstan for filesystem storage,
//   ./registry-data for s3), and token auth is what the config's auth.token says.
// - The certificate bundle is always the config's auth.token.rootcertbundle file, re-read when the
//   file changes (checked every second).
// - Filesystem storage: only one registry may serve a root directory (docs/registry.md, "One registry per root directory"). The
//   process takes ROOTDIRECTORY/capstan/registry.lock before anything else (RootDirectoryLock) and
//   refuses to start, naming the holder, when another live registry has it.
//
// `capstan up` runs the registry on a listener of its own (installUpRegistry): its /v2/ would
// collide with the secrets service's /v2/secrets on up's main address.
import { serve as serveHttp, type ServerType } from "@hono/node-server";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { Hono, type MiddlewareHandler } from "hono";
import { FilesystemDriver } from "../../adapters/blobstore/filesystem.ts";
import type { StorageDriver } from "../../adapters/blobstore/driver.ts";
import { S3Driver } from "../../adapters/blobstore/s3.ts";
import { createRegistryApi } from "../../api/registry/api.ts";
import { createRegistryGcApi } from "../../api/registry/gc-api.ts";
import { StoreGcJournal } from "../../api/registry/gc-journal.ts";
import { fencedStore } from "../../adapters/store/fenced.ts";
import { createRegistryGc } from "../../controllers/registrygc/index.ts";
import { RequestActivity } from "../../controllers/registrygc/pacer.ts";
import { formatProblem, parseRegistryConfig, type ConfigProblem, type ConfigResult, type RegistryConfig } from "../../api/registry/config.ts";
import { tokenAuthorizer } from "../../api/registry/token-auth.ts";
import { createLogger, type Logger } from "../../runtime/log.ts";
import { untilAborted } from "../../runtime/aborted.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { RootDirectoryInUseError, RootDirectoryLock, RootDirectoryLockError } from "../../adapters/blobstore/root-lock.ts";
import { registryAuthConfigKey } from "../../api/resources/registry-auth.ts";
import { CertBundleFile, RegistryAuthSettings } from "../registry-auth.ts";
import { authFromOptions, authOptionDefs, isLoopbackHost } from "../auth-options.ts";
import { parseListenAddress } from "../listen.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { historyOption, serve, webOption, type ServeContext } from "../serve.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";
import { tlsFromOptions, tlsOptionDefs, type ServerTls } from "../tls-options.ts";

/** The registry's leader key. It runs no leader-only work but the store compactor today. */
export const registryLeaderKey = "/platform/registry/leader";
export const defaultRegistryWeb = "127.0.0.1:5000";

const defs: OptionDef[] = [
  { name: "config", type: "string", help: "distribution's config.yaml (REGISTRY_* environment variables override its keys)" },
  { ...webOption, help: `listen address of the registry API (/v2/), probes and metrics (default: the config's http.addr, else ${defaultRegistryWeb})`, default: undefined },
  ...authOptionDefs,
  ...tlsOptionDefs,
  {
    name: "store",
    type: "string",
    help: `store URL (sqlite://PATH, etcd://HOST:PORT, etcds://...); given, the store key ${registryAuthConfigKey} turns token auth on and off (default sqlite://DATA/state.db)`,
  },
  ...storeConnectionOptionDefs,
  { name: "data", type: "string", help: "directory of the embedded store when -store is not given (default ROOTDIRECTORY/capstan for filesystem storage, ./registry-data for s3)" },
  historyOption,
];

const summary = `Runs the image registry (the Docker Registry HTTP API V2 at /v2/) with the storage and token
auth of distribution's config.yaml. With -store, the store key ${registryAuthConfigKey}
({realm, issuer, service}, written by the console) turns token auth on and off while it runs; the
certificate bundle is the config's auth.token.rootcertbundle. Filesystem storage is served by one
registry at a time (a lock in ROOTDIRECTORY/capstan).

sub-commands:
  capstan registry check-config config.yaml       validate without starting (exit 0 valid, 2 invalid)
  capstan registry garbage-collect config.yaml    distribution's command: a full collection, safe while serving
  capstan registry gc -config config.yaml         ask the running registry for a collection, show its report
  capstan registry gc-policy set|list|get|delete  retention policies (docs/registry-gc.md)`;

export async function run(argv: string[]): Promise<number> {
  if (argv[0] === "check-config") return checkConfig(argv.slice(1));
  if (argv[0] === "gc") return (await import("./registry-gc.ts")).gcCommand(argv.slice(1));
  if (argv[0] === "garbage-collect") return (await import("./registry-gc.ts")).garbageCollectCommand(argv.slice(1));
  if (argv[0] === "gc-policy") return (await import("./registry-gc-policy.ts")).gcPolicyCommand(argv.slice(1));
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(`${usage("registry", summary, defs)}\nexample:\n  capstan registry -config /etc/capstan/registry.yaml -store etcd://127.0.0.1:2379\n`);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}" (the config file is -config FILE)`);
  const o = args.options as { config?: string; web?: string; store?: string; data?: string; history: number };
  if (o.config === undefined || o.config === "") throw new UsageError("-config FILE is required (distribution's config.yaml)");
  const loaded = loadConfig(o.config);
  if (!loaded.ok) {
    printProblems(o.config, loaded);
    process.stderr.write(`capstan registry: ${o.config} is not a usable configuration (capstan registry check-config ${o.config})\n`);
    return 2;
  }
  const { config } = loaded;
  const tls = tlsFromOptions(args.options);
  const storeConnection = storeConnectionFromOptions(args.options);
  const auth = authFromOptions(args.options);
  const log = registryLogger(config);
  for (const w of loaded.warnings) logProblem(log, o.config, w);

  let lock: RootDirectoryLock | undefined;
  let dataDir = o.data;
  if (config.storage.driver === "filesystem") {
    const root = resolve(config.storage.rootDirectory);
    try {
      lock = RootDirectoryLock.acquire(root, { command: "capstan registry", log });
    } catch (e) {
      if (e instanceof RootDirectoryInUseError || e instanceof RootDirectoryLockError) {
        process.stderr.write(`capstan registry: ${e.message}\n`);
        return 1;
      }
      throw e;
    }
    dataDir ??= join(root, "capstan");
  }
  dataDir ??= "./registry-data";
  const storeUrl = o.store ?? `sqlite://${dataDir}/state.db`;
  let driver: StorageDriver | undefined;
  try {
    return await serve(
      { name: "registry", web: o.web ?? config.http.addr ?? defaultRegistryWeb, tls, storeUrl, storeConnection, historyMs: o.history, auth, leaderKey: registryLeaderKey, log, requestTimeoutMs: 0 },
      async (ctx) => {
        ({ driver } = await installRegistry(ctx, {
          config,
          configFile: o.config!,
          authFrom: o.store !== undefined ? "store" : "config",
          web: o.web ?? config.http.addr ?? defaultRegistryWeb,
          ...(lock ? { lock } : {}),
        }));
      },
    );
  } finally {
    await driver?.close().catch((e: unknown) => log.warn({ err: e }, "closing the registry storage failed"));
    lock?.release();
  }
}

// ---------------------------------------------------------------------------------------------
// check-config

async function checkConfig(argv: string[]): Promise<number> {
  const args = parseArgs(argv, []);
  if (args.help) {
    process.stdout.write(
      "usage: capstan registry check-config config.yaml\n\nValidates distribution's config.yaml as `capstan registry -config` reads it (REGISTRY_* environment\nvariables applied) without starting anything. Prints each warning and error with its key and line;\nexit code 0 when the registry would start with it, 2 when not.\n",
    );
    return 0;
  }
  if (args.positionals.length !== 1) {
    throw new UsageError(args.positionals.length === 0 ? "check-config needs the config file, e.g. capstan registry check-config config.yaml" : `unexpected argument "${args.positionals[1]}"`);
  }
  const file = args.positionals[0]!;
  let result: ConfigResult;
  try {
    result = loadConfig(file);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`capstan registry check-config: ${e.message}\n`);
    return 2;
  }
  printProblems(file, result);
  if (!result.ok) {
    process.stderr.write(`${file}: invalid (${result.errors.length} error${result.errors.length === 1 ? "" : "s"})\n`);
    return 2;
  }
  const c = result.config;
  const bundle = c.tokenAuth?.rootCertBundle;
  if (bundle !== undefined) {
    const problem = bundleProblem(bundle);
    if (problem) process.stderr.write(`warning: ${file}: auth.token.rootcertbundle: ${problem} (the registry needs it for token auth)\n`);
  }
  const storage = c.storage.driver === "filesystem" ? `filesystem ${c.storage.rootDirectory}` : `s3 bucket ${c.storage.bucket} (${c.storage.regionEndpoint ?? c.storage.region})`;
  const auth = c.tokenAuth?.realm ? `token auth (realm ${c.tokenAuth.realm}, service ${c.tokenAuth.service})` : c.tokenAuth ? "token auth from the store key" : "no auth";
  process.stdout.write(
    `${file}: valid: storage ${storage}, delete ${c.deleteEnabled ? "enabled" : "disabled"}, ${auth}, listen ${c.http.addr ?? defaultRegistryWeb}` +
      `${result.warnings.length > 0 ? ` (${result.warnings.length} warning${result.warnings.length === 1 ? "" : "s"})` : ""}\n`,
  );
  return 0;
}

/** Read and parse the file, REGISTRY_* variables applied; an unreadable file is a UsageError. */
export function loadConfig(file: string, env: Record<string, string | undefined> = process.env): ConfigResult {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new UsageError(`${file}: cannot read the config file (${err.code ?? err.message})`);
  }
  return parseRegistryConfig(text, { env });
}

export function printProblems(file: string, result: ConfigResult): void {
  for (const w of result.warnings) process.stderr.write(`warning: ${formatProblem(w, file)}\n`);
  if (!result.ok) for (const e of result.errors) process.stderr.write(`error: ${formatProblem(e, file)}\n`);
}

function logProblem(log: Logger, file: string, p: ConfigProblem): void {
  log.warn({ config: file, key: p.key, ...(p.line !== undefined ? { line: p.line } : {}), ...(p.env !== undefined ? { env: p.env } : {}) }, `config: ${formatProblem(p, file)}`);
}

function registryLogger(config: RegistryConfig): Logger {
  const fromEnv = process.env.CAPSTAN_LOG_LEVEL;
  const log = createLogger("registry", fromEnv !== undefined && fromEnv !== "" ? fromEnv : (config.log.level ?? "info"));
  return Object.keys(config.log.fields).length > 0 ? log.child(config.log.fields) : log;
}

/** Why a certificate bundle file is not usable now, or undefined. */
function bundleProblem(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    return `${path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
  }
  return text.includes("-----BEGIN CERTIFICATE-----") ? undefined : `${path}: not a PEM file with a CERTIFICATE`;
}

// ---------------------------------------------------------------------------------------------
// Installing the registry on a process

export interface RegistryInstallOptions {
  config: Pick<RegistryConfig, "storage" | "deleteEnabled" | "tokenAuth" | "http">;
  /** Names the file in errors. */
  configFile: string;
  /**
   * "store": the store key decides token auth at run time (with -store, and in capstan up);
   * "config": the config's auth.token does.
   */
  authFrom: "store" | "config";
  /** The filesystem root's lock, already taken: kept fresh while the process runs. */
  lock?: RootDirectoryLock;
  /**
   * The address the registry API listens on. Token auth may be off only on a loopback address (no
   * listener without auth outside loopback, docs/security.md): elsewhere a config without token auth
   * refuses to start, and a missing store key refuses every request instead of allowing it.
   */
  web: string;
  /** Serve on a listener of its own (capstan up) instead of the manager's app. */
  listener?: { web: string; tls?: ServerTls; /** The address was not chosen: when it is taken, run without the registry. */ optional?: boolean };
}

/** Put the registry on ctx's manager; answers the storage driver (the caller closes it after the process stops). */
/** The registry's storage driver, and its API (the web console calls it in memory). */
export async function installRegistry(ctx: ServeContext, o: RegistryInstallOptions): Promise<{ driver: StorageDriver; api: Hono }> {
  const { manager, store } = ctx;
  const log = ctx.log;
  const driver = openDriver(o.config.storage, o.configFile);
  const bundlePath = o.config.tokenAuth?.rootCertBundle;
  const bundle = bundlePath === undefined ? undefined : new CertBundleFile(bundlePath, log);
  const settings = new RegistryAuthSettings({ from: o.authFrom, store, config: o.config.tokenAuth, bundle, log, openAllowed: isLoopbackHost(parseListenAddress(o.web).host), web: o.web });
  await settings.init(o.configFile);
  const activity = new RequestActivity();
  const api = createRegistryApi({ driver, deleteEnabled: o.config.deleteEnabled, authorizer: tokenAuthorizer(() => settings.current()), log, journal: new StoreGcJournal(store), activity });
  // Garbage collection (docs/registry-gc.md): its controllers lead, its API is on the manager's app.
  const gc = createRegistryGc({
    driver,
    store,
    fenced: fencedStore(store, () => ctx.elector.fence()),
    identity: ctx.elector.identity,
    term: () => ctx.elector.fence()?.createRevision,
    registry: manager.registry,
    log,
    activity,
  });
  for (const i of gc.informers) manager.addInformer(i);
  for (const c of gc.controllers) manager.add(c);
  manager.app.route("/", createRegistryGcApi({ store, access: ctx.access, log }));
  const headers = responseHeaders(o.config.http.headers);

  manager.add(settings, { leaderOnly: false });
  if (o.lock) manager.add(o.lock.runnable(), { leaderOnly: false });
  if (o.listener) {
    const app = new Hono();
    if (headers) app.use("*", headers);
    app.route("/", api);
    manager.add(new RegistryListener({ app, web: o.listener.web, tls: o.listener.tls, optional: o.listener.optional ?? false, driver, log }), { leaderOnly: false });
  } else {
    if (headers) {
      manager.app.use("/v2", headers);
      manager.app.use("/v2/*", headers);
    }
    manager.app.route("/", api);
  }
  const where = o.config.storage.driver === "filesystem" ? { rootDirectory: resolve(o.config.storage.rootDirectory) } : { bucket: o.config.storage.bucket, region: o.config.storage.region };
  log.info({ storage: o.config.storage.driver, ...where, deleteEnabled: o.config.deleteEnabled, authFrom: o.authFrom }, "registry installed");
  return { driver, api };
}

/**
 * `capstan up`'s registry: filesystem storage in DATA/registry, delete enabled, token auth from the
 * store key its console publishes (certificate bundle DATA/registry-cert.pem), on its own listener
 * `web`. `explicit`: -registry-web was given (a taken address fails the process; the default one
 * only logs an error and runs on without the registry).
 */
export async function installUpRegistry(ctx: ServeContext, o: { data: string; web: string; explicit: boolean; tls?: ServerTls }): Promise<Hono> {
  try {
    parseListenAddress(o.web, "-registry-web");
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const root = resolve(o.data, "registry");
  let lock: RootDirectoryLock;
  try {
    lock = RootDirectoryLock.acquire(root, { command: "capstan up", log: ctx.log });
  } catch (e) {
    if (e instanceof RootDirectoryInUseError || e instanceof RootDirectoryLockError) throw new UsageError(`-registry-web: ${e.message}`);
    throw e;
  }
  const { api } = await installRegistry(ctx, {
    config: { storage: { driver: "filesystem", rootDirectory: root }, deleteEnabled: true, tokenAuth: { rootCertBundle: upRegistryCertFile(o.data) }, http: { headers: {} } },
    configFile: "capstan up",
    authFrom: "store",
    web: o.web,
    lock,
    listener: { web: o.web, ...(o.tls ? { tls: o.tls } : {}), optional: !o.explicit },
  });
  return api;
}

/**
 * Where `capstan up`'s console writes the registry token certificate, and its registry reads it.
 * Creates DATA when it is missing (with an etcd store nothing else has made it yet).
 */
export function upRegistryCertFile(data: string): string {
  try {
    mkdirSync(data, { recursive: true });
  } catch {
    // the console's write names the problem
  }
  return join(data, "registry-cert.pem");
}

/** The console's token endpoint at `web` (up's own address): the realm `capstan up` publishes. */
export function upRegistryRealm(web: string, tls: boolean): string | undefined {
  let listen: { host: string; port: number };
  try {
    listen = parseListenAddress(web);
  } catch {
    return undefined;
  }
  const host = listen.host === "0.0.0.0" || listen.host === "::" ? hostname() : listen.host;
  return `${tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${listen.port}/api/v1/authorize/registry/`;
}

export function openDriver(storage: RegistryConfig["storage"], configFile: string): StorageDriver {
  try {
    if (storage.driver === "filesystem") return new FilesystemDriver({ rootDirectory: storage.rootDirectory });
    const { driver: _driver, ...s3 } = storage;
    return new S3Driver(s3);
  } catch (e) {
    throw new UsageError(`${configFile}: storage.${storage.driver}: ${(e as Error).message}`);
  }
}

/** http.headers on every registry response; undefined when there are none. */
function responseHeaders(headers: Record<string, string[]>): MiddlewareHandler | undefined {
  const entries = Object.entries(headers);
  if (entries.length === 0) return undefined;
  return async (c, next) => {
    await next();
    const set = (h: Headers) => {
      for (const [name, values] of entries) {
        h.delete(name);
        for (const v of values) h.append(name, v);
      }
    };
    try {
      set(c.res.headers);
    } catch {
      // An immutable response (e.g. one a driver streamed through fetch): copy it.
      const res = new Response(c.res.body, c.res);
      set(res.headers);
      c.res = res;
    }
  };
}

// ---------------------------------------------------------------------------------------------
// capstan up's second listener

class RegistryListener implements Runnable {
  readonly name = "registry-listener";

  constructor(private readonly o: { app: Hono; web: string; tls: ServerTls | undefined; optional: boolean; driver: StorageDriver; log: Logger }) {}

  async start(signal: AbortSignal): Promise<void> {
    const { log } = this.o;
    const listen = parseListenAddress(this.o.web, "-registry-web");
    let server: ServerType;
    try {
      server = await this.listen(listen);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      const message = `registry listener ${this.o.web}: ${err.code === "EADDRINUSE" ? "the address is in use" : err.message}`;
      if (this.o.optional) {
        log.error({ address: this.o.web, err }, `${message}; running without the registry (give -registry-web ADDR, or -registry-web "" to run none)`);
        await untilAborted(signal);
        await this.o.driver.close().catch(() => {});
        return;
      }
      throw new Error(message);
    }
    await untilAborted(signal);
    await new Promise<void>((done) => {
      server.close(() => done());
      if ("closeIdleConnections" in server) server.closeIdleConnections();
      const t = setTimeout(() => {
        if ("closeAllConnections" in server) server.closeAllConnections();
      }, 1_000);
      t.unref();
    });
    await this.o.driver.close().catch((e: unknown) => log.warn({ err: e }, "closing the registry storage failed"));
  }

  private listen(listen: { host: string; port: number }): Promise<ServerType> {
    const { tls, log } = this.o;
    return new Promise((resolveListen, reject) => {
      const base = { fetch: this.o.app.fetch, hostname: listen.host, port: listen.port };
      // No whole-request limit: a layer of gigabytes is one PATCH (headers must still come in 60 s).
      const limits = { requestTimeout: 0, headersTimeout: 60_000 };
      const options = tls
        ? { ...base, createServer: createHttpsServer, serverOptions: { cert: tls.cert, key: tls.key, ...limits } }
        : { ...base, serverOptions: limits };
      const server = serveHttp(options, (info: AddressInfo) => {
        log.info({ address: { host: listen.host, port: info.port }, scheme: tls ? "https" : "http" }, "registry is serving");
        server.off("error", reject);
        resolveListen(server);
      });
      server.once("error", reject);
    });
  }
}


