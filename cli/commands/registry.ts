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
//   off (a warning), as the original platform's entry.sh did at each start. Without -store it is
//   an embedded SQLite file in -data (default ROOTDIRECTORY/capstan for filesystem storage,
//   ./registry-data for s3), and token auth is what the config's auth.token says.
// - The certificate bundle is always the config's auth.token.rootcertbundle file, re-read when the
//   file changes (checked every second).
// - Filesystem storage: only one registry may serve a root directory (spec D, limits). The
//   process takes ROOTDIRECTORY/capstan/registry.lock before anything else (RootDirectoryLock) and
//   refuses to start, naming the holder, when another live registry has it.
//
// `capstan up` runs the registry on a listener of its own (installUpRegistry): its /v2/ would
// collide with the secrets service's /v2/secrets on up's main address.
import { serve as serveHttp, type ServerType } from "@hono/node-server";
import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, readlinkSync, renameSync, statSync, unlinkSync, unwatchFile, utimesSync, watchFile, writeFileSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { Hono, type MiddlewareHandler } from "hono";
import { FilesystemDriver } from "../../adapters/blobstore/filesystem.ts";
import type { StorageDriver } from "../../adapters/blobstore/driver.ts";
import { S3Driver } from "../../adapters/blobstore/s3.ts";
import type { Store } from "../../adapters/store/store.ts";
import { createRegistryApi } from "../../api/registry/api.ts";
import { formatProblem, parseRegistryConfig, type ConfigProblem, type ConfigResult, type RegistryConfig, type TokenAuthConfig } from "../../api/registry/config.ts";
import { tokenAuthorizer, type TokenAuthSettings } from "../../api/registry/token-auth.ts";
import { realClock } from "../../runtime/clock.ts";
import { createLogger, type Logger } from "../../runtime/log.ts";
import type { Runnable } from "../../runtime/manager.ts";
import { authFromOptions, authOptionDefs } from "../auth-options.ts";
import { parseListenAddress } from "../listen.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { historyOption, serve, webOption, type ServeContext } from "../serve.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";
import { tlsFromOptions, tlsOptionDefs, type ServerTls } from "../tls-options.ts";

/** The registry's leader key. It runs no leader-only work but the store compactor today. */
export const registryLeaderKey = "/platform/registry/leader";
/** Where the console publishes {realm, issuer, service} (spec D). */
export const registryAuthKey = "/platform/config/auth/registry";
export const defaultRegistryWeb = "127.0.0.1:5000";

const defs: OptionDef[] = [
  { name: "config", type: "string", help: "distribution's config.yaml (REGISTRY_* environment variables override its keys)" },
  { ...webOption, help: `listen address of the registry API (/v2/), probes and metrics (default: the config's http.addr, else ${defaultRegistryWeb})`, default: undefined },
  ...authOptionDefs,
  ...tlsOptionDefs,
  {
    name: "store",
    type: "string",
    help: `store URL (sqlite://PATH, etcd://HOST:PORT, etcds://...); given, the store key ${registryAuthKey} turns token auth on and off (default sqlite://DATA/state.db)`,
  },
  ...storeConnectionOptionDefs,
  { name: "data", type: "string", help: "directory of the embedded store when -store is not given (default ROOTDIRECTORY/capstan for filesystem storage, ./registry-data for s3)" },
  historyOption,
];

const summary = `Runs the image registry (the Docker Registry HTTP API V2 at /v2/) with the storage and token
auth of distribution's config.yaml. With -store, the store key ${registryAuthKey}
({realm, issuer, service}, written by the console) turns token auth on and off while it runs; the
certificate bundle is the config's auth.token.rootcertbundle. Filesystem storage is served by one
registry at a time (a lock in ROOTDIRECTORY/capstan).

sub-command: capstan registry check-config config.yaml   validate without starting (exit 0 valid, 2 invalid)`;

export async function run(argv: string[]): Promise<number> {
  if (argv[0] === "check-config") return checkConfig(argv.slice(1));
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
        driver = await installRegistry(ctx, {
          config,
          configFile: o.config!,
          authFrom: o.store !== undefined ? "store" : "config",
          ...(lock ? { lock } : {}),
        });
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
function loadConfig(file: string, env: Record<string, string | undefined> = process.env): ConfigResult {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new UsageError(`${file}: cannot read the config file (${err.code ?? err.message})`);
  }
  return parseRegistryConfig(text, { env });
}

function printProblems(file: string, result: ConfigResult): void {
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
  /** Serve on a listener of its own (capstan up) instead of the manager's app. */
  listener?: { web: string; tls?: ServerTls; /** The address was not chosen: when it is taken, run without the registry. */ optional?: boolean };
}

/** Put the registry on ctx's manager; answers the storage driver (the caller closes it after the process stops). */
export async function installRegistry(ctx: ServeContext, o: RegistryInstallOptions): Promise<StorageDriver> {
  const { manager, store } = ctx;
  const log = ctx.log;
  const driver = openDriver(o.config.storage, o.configFile);
  const bundlePath = o.config.tokenAuth?.rootCertBundle;
  const bundle = bundlePath === undefined ? undefined : new CertBundleFile(bundlePath, log);
  const settings = new RegistryAuthSettings({ from: o.authFrom, store, config: o.config.tokenAuth, bundle, log });
  await settings.init(o.configFile);
  const api = createRegistryApi({ driver, deleteEnabled: o.config.deleteEnabled, authorizer: tokenAuthorizer(() => settings.current()), log });
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
  return driver;
}

/**
 * `capstan up`'s registry: filesystem storage in DATA/registry, delete enabled, token auth from the
 * store key its console publishes (certificate bundle DATA/registry-cert.pem), on its own listener
 * `web`. `explicit`: -registry-web was given (a taken address fails the process; the default one
 * only logs an error and runs on without the registry).
 */
export async function installUpRegistry(ctx: ServeContext, o: { data: string; web: string; explicit: boolean; tls?: ServerTls }): Promise<void> {
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
  await installRegistry(ctx, {
    config: { storage: { driver: "filesystem", rootDirectory: root }, deleteEnabled: true, tokenAuth: { rootCertBundle: upRegistryCertFile(o.data) }, http: { headers: {} } },
    configFile: "capstan up",
    authFrom: "store",
    lock,
    listener: { web: o.web, ...(o.tls ? { tls: o.tls } : {}), optional: !o.explicit },
  });
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

function openDriver(storage: RegistryConfig["storage"], configFile: string): StorageDriver {
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
// Token auth settings: the store key or the config, and the certificate bundle file

interface RealmIssuerService {
  realm: string;
  issuer: string;
  service: string;
}

/**
 * What tokenAuthorizer asks on every request. From the config: auth.token's realm, issuer and
 * service when all are given. From the store: the key's, watched (re-read after a broken watch).
 * The bundle: the file's current text; "" (every token refused, fail closed) when it is not
 * readable while token auth is on.
 */
class RegistryAuthSettings implements Runnable {
  readonly name = "registry-auth-settings";
  private fromStore: RealmIssuerService | undefined;
  private revision = 0;
  private lastState = "";
  private warnedNoBundle = false;

  constructor(
    private readonly o: {
      from: "store" | "config";
      store: Store;
      config: TokenAuthConfig | undefined;
      bundle: CertBundleFile | undefined;
      log: Logger;
      retryMs?: number;
    },
  ) {}

  /** The first read, before the registry serves: the bundle (required now with config auth) and the store key. */
  async init(configFile: string): Promise<void> {
    const { config, bundle, log } = this.o;
    if (this.o.from === "config") {
      if (config && config.realm !== undefined && bundle) {
        const problem = bundle.load();
        if (problem) throw new UsageError(`${configFile}: auth.token.rootcertbundle: ${problem}`);
        log.info({ realm: config.realm, issuer: config.issuer, service: config.service, rootCertBundle: bundle.path }, "registry token auth on (config auth.token)");
      } else {
        log.warn(
          config ? "registry token auth off: auth.token has no realm, issuer and service, and without -store no store key provides them" : "registry token auth off: the config has no auth.token; every request is allowed",
        );
      }
      return;
    }
    const problem = bundle?.load();
    if (problem) log.warn({ file: bundle!.path }, `registry token certificate bundle not readable yet: ${problem}`);
    if (config?.realm !== undefined) {
      log.info({ key: registryAuthKey }, "the config's auth.token realm, issuer and service are not used: the store key decides token auth (-store)");
    }
    await this.read();
  }

  current(): TokenAuthSettings | undefined {
    const ris =
      this.o.from === "store"
        ? this.fromStore
        : this.o.config?.realm !== undefined
          ? { realm: this.o.config.realm, issuer: this.o.config.issuer!, service: this.o.config.service! }
          : undefined;
    if (!ris) return undefined;
    const pem = this.o.bundle?.text;
    if (pem === undefined && !this.warnedNoBundle) {
      this.warnedNoBundle = true;
      this.o.log.error(
        { file: this.o.bundle?.path },
        this.o.bundle ? "registry token auth is on but its certificate bundle is not readable: every token is refused" : "registry token auth is on but the config has no auth.token.rootcertbundle: every token is refused",
      );
    }
    if (pem !== undefined) this.warnedNoBundle = false;
    return { ...ris, rootCertBundle: pem ?? "" };
  }

  async start(signal: AbortSignal): Promise<void> {
    this.o.bundle?.watch();
    try {
      if (this.o.from === "store") await this.follow(signal);
      else await untilAborted(signal);
    } finally {
      this.o.bundle?.unwatch();
    }
  }

  private async follow(signal: AbortSignal): Promise<void> {
    const retryMs = this.o.retryMs ?? 2_000;
    while (!signal.aborted) {
      let watch: { close(): Promise<void> } | undefined;
      const ended = new Promise<Error>((resolveEnded) => {
        watch = this.o.store.watch(registryAuthKey, this.revision + 1, {
          onEvents: (events) => {
            for (const ev of events) {
              this.revision = Math.max(this.revision, ev.kv.modRevision);
              if (ev.kv.key === registryAuthKey) this.apply(ev.type === "put" ? ev.kv.value : undefined);
            }
          },
          onProgress: (revision) => {
            this.revision = Math.max(this.revision, revision);
          },
          onError: resolveEnded,
        });
      });
      const err = await Promise.race([ended, untilAborted(signal).then(() => undefined)]);
      await watch?.close().catch(() => {});
      if (err === undefined || signal.aborted) return;
      this.o.log.warn({ err, key: registryAuthKey }, "watch of the registry auth key ended; reading the key again");
      while (!signal.aborted) {
        await realClock.sleep(retryMs, signal).catch(() => {});
        if (signal.aborted) return;
        try {
          await this.read();
          break;
        } catch (e) {
          this.o.log.warn({ err: e, key: registryAuthKey }, "reading the registry auth key failed; retrying");
        }
      }
    }
  }

  /** Read the key and the revision it was read at. */
  private async read(): Promise<void> {
    const page = await this.o.store.list(registryAuthKey, { limit: 1 });
    const kv = page.items[0];
    this.revision = page.revision;
    this.apply(kv?.key === registryAuthKey ? kv.value : undefined);
  }

  private apply(value: string | undefined): void {
    const { log } = this.o;
    let next: RealmIssuerService | undefined;
    let why = "";
    if (value === undefined) why = `the store key ${registryAuthKey} is absent`;
    else {
      try {
        const v = JSON.parse(value) as Record<string, unknown>;
        const ok = (x: unknown): x is string => typeof x === "string" && x !== "";
        if (v && ok(v.realm) && ok(v.issuer) && ok(v.service)) next = { realm: v.realm, issuer: v.issuer, service: v.service };
        else why = `the store key ${registryAuthKey} does not hold non-empty realm, issuer and service`;
      } catch {
        why = `the store key ${registryAuthKey} is not JSON`;
      }
    }
    this.fromStore = next;
    const state = next ? JSON.stringify(next) : `off:${why}`;
    if (state === this.lastState) return;
    const first = this.lastState === "";
    this.lastState = state;
    if (next) log.info({ ...next, key: registryAuthKey }, "registry token auth on (store key)");
    else if (first && value === undefined) log.warn({ key: registryAuthKey }, `registry token auth off: ${why}; every request is allowed`);
    else log.warn({ key: registryAuthKey }, `registry token auth off: ${why}; every request is allowed from now on`);
  }
}

/** The PEM text of a certificate bundle file, re-read when the file changes. Keeps the last good text. */
class CertBundleFile {
  text: string | undefined;
  private watching = false;

  constructor(
    readonly path: string,
    private readonly log: Logger,
  ) {}

  /** Read now; answers what is wrong, or undefined. */
  load(): string | undefined {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (e) {
      return `${this.path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
    }
    if (!text.includes("-----BEGIN CERTIFICATE-----")) return `${this.path}: not a PEM file with a CERTIFICATE`;
    this.text = text;
    return undefined;
  }

  watch(): void {
    if (this.watching) return;
    this.watching = true;
    watchFile(this.path, { interval: 1_000, persistent: false }, (cur, prev) => {
      if (cur.mtimeMs === prev.mtimeMs && cur.size === prev.size && cur.ino === prev.ino) return;
      const before = this.text;
      const problem = this.load();
      if (problem) this.log.error({ file: this.path }, `registry token certificate bundle changed and is not usable (${problem}); keeping the last one read`);
      else if (this.text !== before) this.log.info({ file: this.path }, "registry token certificate bundle re-read");
    });
  }

  unwatch(): void {
    if (!this.watching) return;
    this.watching = false;
    unwatchFile(this.path);
  }
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

function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((done) => signal.addEventListener("abort", () => done(), { once: true }));
}

// ---------------------------------------------------------------------------------------------
// The root directory lock

/** What the lock file holds: who has the root directory. */
export interface LockHolder {
  pid: number;
  host: string;
  /** /proc/sys/kernel/random/boot_id: the same host name after a reboot is not the same machine state. */
  bootId?: string;
  /** /proc/self/ns/pid: pids mean something only inside one pid namespace (container). */
  pidNamespace?: string;
  /** Field 22 of /proc/PID/stat: tells a live holder from a later process that got its pid. */
  startTime?: string;
  command: string;
  since: string;
  /** Random: tells this holder's file from a later one. */
  token: string;
}

/** Another live registry has the root directory. */
export class RootDirectoryInUseError extends Error {
  override readonly name = "RootDirectoryInUseError";
  constructor(
    readonly root: string,
    readonly lockFile: string,
    readonly holder: LockHolder | undefined,
    detail: string,
  ) {
    const who = holder ? `pid ${holder.pid} on host ${holder.host} (${holder.command}, since ${holder.since})` : "an unknown process (the lock file is not readable)";
    super(
      `registry root directory ${root} is in use by ${who}; lock file ${lockFile}${detail ? `; ${detail}` : ""}. ` +
        "Only one registry may serve a filesystem root directory: stop that one first (if it is gone for good, delete the lock file)",
    );
  }
}

/** The lock could not be taken for another reason (a directory that cannot be written). */
export class RootDirectoryLockError extends Error {
  override readonly name = "RootDirectoryLockError";
}

const heldInThisProcess = new Set<string>();

function procBootId(): string | undefined {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

function procPidNamespace(): string | undefined {
  try {
    return readlinkSync("/proc/self/ns/pid");
  } catch {
    return undefined;
  }
}

function procStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/**
 * A lock file, ROOT/capstan/registry.lock, that says which process serves ROOT. No flock (Node
 * has none without a native module): the file is created atomically (written aside, then
 * hard-linked into place, so that it never exists half-written) and holds the holder's pid, host,
 * boot id, pid namespace and process start time. A process finding it decides whether the holder
 * lives:
 * - same machine and pid namespace (host, boot id and namespace equal): the pid is alive and
 *   started at the recorded time (a reused pid is not the holder);
 * - otherwise (another machine on a shared filesystem, another container): the holder refreshes
 *   the file's mtime every 5 s; a file not refreshed for 30 s is taken over.
 * A stale lock is taken over (moved aside, then a new one linked in; a mover that finds it moved a
 * fresh lock puts it back). The holder re-reads its lock at every refresh and stops the process
 * if the file names someone else: two takers racing cannot both keep serving. It is removed on a
 * clean stop and at process exit.
 */
export class RootDirectoryLock {
  static readonly refreshMs = 5_000;
  static readonly staleMs = 30_000;

  readonly file: string;
  private released = false;
  private readonly onExit = () => this.release();

  private constructor(
    readonly root: string,
    private readonly record: LockHolder,
    private readonly log: Logger,
  ) {
    this.file = lockFileOf(root);
    process.once("exit", this.onExit);
  }

  static acquire(root: string, o: { command: string; log: Logger }): RootDirectoryLock {
    const file = lockFileOf(root);
    if (heldInThisProcess.has(root)) {
      throw new RootDirectoryInUseError(root, file, readHolder(file), "this process serves it already");
    }
    try {
      mkdirSync(join(root, "capstan"), { recursive: true });
    } catch (e) {
      throw new RootDirectoryLockError(`registry root directory ${root}: cannot create ${join(root, "capstan")} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    const bootId = procBootId();
    const pidNamespace = procPidNamespace();
    const startTime = procStartTime(process.pid);
    const record: LockHolder = {
      pid: process.pid,
      host: hostname(),
      ...(bootId ? { bootId } : {}),
      ...(pidNamespace ? { pidNamespace } : {}),
      ...(startTime ? { startTime } : {}),
      command: o.command,
      since: new Date().toISOString(),
      token: randomBytes(12).toString("hex"),
    };
    for (let attempt = 0; attempt < 5; attempt++) {
      if (createLockFile(file, record)) {
        heldInThisProcess.add(root);
        return new RootDirectoryLock(root, record, o.log);
      }
      const holder = readHolder(file);
      let mtimeMs: number;
      try {
        mtimeMs = statSync(file).mtimeMs;
      } catch {
        continue; // gone meanwhile: try again
      }
      const verdict = holderState(holder, mtimeMs);
      if (verdict.alive) throw new RootDirectoryInUseError(root, file, holder, verdict.detail);
      // Stale: move it aside, and check that what was moved is what was judged.
      const aside = `${file}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
      try {
        renameSync(file, aside);
      } catch {
        continue;
      }
      const moved = readHolder(aside);
      if (holder !== undefined && moved?.token !== holder.token) {
        try {
          linkSync(aside, file); // someone's fresh lock: put it back
        } catch {
          // a third process linked its own meanwhile; that one stands
        }
        safeUnlink(aside);
        continue;
      }
      safeUnlink(aside);
      o.log.warn({ lockFile: file, holder, reason: verdict.detail }, "took over a stale registry root directory lock");
    }
    throw new RootDirectoryInUseError(root, file, readHolder(file), "the lock changed hands while this process tried to take it");
  }

  /** Refresh the lock; throws when it is no longer this process's. */
  refresh(): void {
    if (this.released) return;
    const now = readHolder(this.file);
    if (now === undefined) {
      if (createLockFile(this.file, this.record)) {
        this.log.warn({ lockFile: this.file }, "the registry root directory lock file was removed; created it again");
        return;
      }
      throw new Error(`lost the registry root directory lock ${this.file}: it was removed and another process created it`);
    }
    if (now.token !== this.record.token) {
      throw new Error(`lost the registry root directory lock ${this.file}: it now names pid ${now.pid} on host ${now.host} (${now.command})`);
    }
    const t = new Date();
    utimesSync(this.file, t, t);
  }

  /** Remove the lock file if it is still this process's. Idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    process.off("exit", this.onExit);
    heldInThisProcess.delete(this.root);
    if (readHolder(this.file)?.token === this.record.token) safeUnlink(this.file);
  }

  /** Refreshes the lock every refreshMs until stopped, then releases it; a lost lock fails the process. */
  runnable(): Runnable {
    return {
      name: "registry-root-lock",
      start: async (signal: AbortSignal) => {
        try {
          while (!signal.aborted) {
            await realClock.sleep(RootDirectoryLock.refreshMs, signal).catch(() => {});
            if (signal.aborted) break;
            this.refresh();
          }
        } finally {
          if (signal.aborted) this.release();
        }
      },
    };
  }
}

function lockFileOf(root: string): string {
  return join(root, "capstan", "registry.lock");
}

/** Write the record aside, then hard-link it into place: false when a lock file exists. */
function createLockFile(file: string, record: LockHolder): boolean {
  const tmp = `${file}.new-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    writeFileSync(tmp, JSON.stringify(record) + "\n", { mode: 0o644 });
  } catch (e) {
    throw new RootDirectoryLockError(`cannot write the registry root directory lock ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    linkSync(tmp, file);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code === "EPERM" || code === "ENOTSUP" || code === "EOPNOTSUPP") {
      // A filesystem without hard links: an exclusive create (a reader may see it empty briefly).
      try {
        writeFileSync(file, JSON.stringify(record) + "\n", { flag: "wx", mode: 0o644 });
        return true;
      } catch (e2) {
        if ((e2 as NodeJS.ErrnoException).code === "EEXIST") return false;
        throw e2;
      }
    }
    throw new RootDirectoryLockError(`cannot create the registry root directory lock ${file} (${code ?? (e as Error).message})`);
  } finally {
    safeUnlink(tmp);
  }
}

function readHolder(file: string): LockHolder | undefined {
  try {
    const v = JSON.parse(readFileSync(file, "utf8")) as LockHolder;
    return typeof v.pid === "number" && typeof v.host === "string" && typeof v.token === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

function safeUnlink(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

function holderState(holder: LockHolder | undefined, mtimeMs: number): { alive: boolean; detail: string } {
  const age = Date.now() - mtimeMs;
  const fresh = (what: string) =>
    age <= RootDirectoryLock.staleMs
      ? { alive: true, detail: `${what}: its lock was refreshed ${Math.max(0, Math.round(age / 1000))} s ago (taken over once not refreshed for ${RootDirectoryLock.staleMs / 1000} s)` }
      : { alive: false, detail: `${what}, not refreshed for ${Math.round(age / 1000)} s` };
  if (holder === undefined) return fresh("unreadable lock file");
  const bootId = procBootId();
  const pidNamespace = procPidNamespace();
  const sameMachine =
    holder.host === hostname() &&
    (holder.bootId !== undefined && bootId !== undefined ? holder.bootId === bootId : holder.bootId === bootId) &&
    (holder.pidNamespace !== undefined && pidNamespace !== undefined ? holder.pidNamespace === pidNamespace : holder.pidNamespace === pidNamespace);
  if (!sameMachine) return fresh("held from another machine or container");
  if (holder.pid === process.pid) return { alive: false, detail: "left by an earlier process with this pid" };
  try {
    process.kill(holder.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ESRCH") return { alive: false, detail: `pid ${holder.pid} is not running` };
  }
  const started = procStartTime(holder.pid);
  if (holder.startTime !== undefined && started !== undefined && started !== holder.startTime) {
    return { alive: false, detail: `pid ${holder.pid} is another process now` };
  }
  return { alive: true, detail: "" };
}
