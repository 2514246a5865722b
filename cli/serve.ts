// One long-running Capstan process, the part every server command shares (`capstan up`,
// `capstan orchestrator`, `capstan secrets`, `capstan console`): open the store and the cluster
// (when the command drives Docker engines), on the embedded store take the role's OS lock (one
// process per role and SQLite file), elect a leader (a fenced lease on either store), compact the
// store's history (one compactor per store, under its own key), serve probes and metrics, let the
// command install its components, and run until SIGTERM/SIGINT or a failure.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Registry } from "prom-client";
import { ClusterSpecError, DockerCluster, type Cluster } from "../adapters/cluster/index.ts";
import { openStore, StoreUrlError, type StoreConnection } from "../adapters/store/open.ts";
import { acquireRoleLock, RoleLockFileError, StoreRoleLockedError, type RoleLock } from "../adapters/store/sqlite-role-lock.ts";
import { SqliteStore } from "../adapters/store/sqlite.ts";
import type { Store } from "../adapters/store/store.ts";
import { auditWrites, hostAccessPolicy, openGate, tokenGate, TokenVerifier, type ApiAccess } from "../api/auth/index.ts";
import { ElectedCompactor } from "../runtime/compactor.ts";
import { ElectedRunnables } from "../runtime/elected.ts";
import { LeaderElector, type Elector, type Fence } from "../runtime/leaderelection.ts";
import type { Logger } from "../runtime/log.ts";
import { Manager, type Runnable } from "../runtime/manager.ts";
import { checkAuthListener, isLoopbackHost, type AuthSettings } from "./auth-options.ts";
import { parseListenAddress } from "./listen.ts";
import { UsageError, type OptionDef } from "./options.ts";

// Options every server command takes.
// Loopback by default: a listener other machines can reach is an operator's choice (-web :9000 or
// HOST:PORT), and should come with -tls-cert/-tls-key (docs/security.md).
export const webOption: OptionDef = { name: "web", type: "string", help: "listen address for the HTTP APIs and probes (:PORT for every interface)", default: "127.0.0.1:9000" };
export const clusterOption: OptionDef = {
  name: "cluster",
  type: "string",
  help: "Docker engines: [NAME=]unix:///path.sock, tcp://host:port or https://host:port, comma-separated (non-loopback tcp needs -docker-tls-*)",
  default: "unix:///var/run/docker.sock",
};
export const storeOption: OptionDef = { name: "store", type: "string", help: "store URL: sqlite://PATH, etcd://HOST:PORT[,HOST:PORT] or etcds://HOST:PORT[,...] (TLS, see -store-ca)", default: "sqlite://./capstan-data/state.db" };
export const historyOption: OptionDef = { name: "history", type: "duration", help: "store history kept for watches to resume from", default: "10m" };

export interface ServeOptions {
  /** Names the manager in logs. */
  name: string;
  web: string;
  storeUrl: string;
  /** TLS material and etcd user for the store (-store-ca/-cert/-key/-user/-password-file, from storeConnectionFromOptions). */
  storeConnection?: StoreConnection;
  /** Docker engines (-cluster); absent for a component that never calls Docker (the console). */
  cluster?: string;
  /** Mutual TLS to tcp:// engines (-docker-tls-*: PEM contents, from dockerTlsFromOptions). */
  clusterTls?: { ca: string; cert: string; key: string } | undefined;
  /** Serve HTTPS with this certificate and key (-tls-cert, -tls-key: PEM contents, from tlsFromOptions). */
  tls?: { cert: string; key: string } | undefined;
  /** Node's whole-request limit for this process's listener (Manager's requestTimeoutMs); 0 = none. */
  requestTimeoutMs?: number;
  historyMs: number;
  /** Who may call (-auth, -allowed-host-paths). */
  auth: AuthSettings;
  /** The leader key; every process running the same controllers must share it. */
  leaderKey: string;
  /** The leader election's lease TTL and timings (-lease-duration); the elector's defaults when absent. */
  lease?: { ttlSeconds: number; renewDeadlineMs: number; retryPeriodMs: number };
  log: Logger;
}

/** What a command's components are built from. */
export interface ServeContext {
  store: Store;
  /** Undefined when ServeOptions.cluster was not given. */
  cluster: Cluster | undefined;
  manager: Manager;
  /** Leader-only writers fence their store writes with `() => elector.fence()`. */
  elector: Elector;
  /**
   * Leader-only work under `key` rather than under the process's own leader key, for work every
   * process sharing the store must run once in all (docs/runtime.md, "Work under its own leader
   * key"): the process's own election when `key` is its leader key, else an election of its own
   * (runtime/elected.ts), one per key and process. Its writes are fenced with the scope's fence().
   */
  underLeaderKey(key: string): LeaderScope;
  log: Logger;
  /** Every API's gate and host-access rules. */
  access: ApiAccess;
  /** The token checker behind the gate (the console tells it to forget after a change). */
  verifier: TokenVerifier;
}

/** Where leader-only work runs, and the fence its writes compare. */
export interface LeaderScope {
  add(runnable: Runnable): void;
  fence(): Fence | null;
}

/**
 * Run the process until it is stopped; answers its exit code (0 stopped, 1 failed). `install` may
 * be async (a component that must read or seed the store before it serves, like the console's
 * first admin token); a failure there ends the process before it listens.
 */
export async function serve(opts: ServeOptions, install: (ctx: ServeContext) => void | Promise<void>): Promise<number> {
  const { log } = opts;
  let listen: { host: string; port: number };
  let store: Store;
  let cluster: DockerCluster | undefined;
  try {
    listen = parseListenAddress(opts.web);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  checkAuthListener(opts.auth, listen.host);
  try {
    cluster = opts.cluster === undefined ? undefined : DockerCluster.fromSpec(opts.cluster, { logger: log, tls: opts.clusterTls });
    store = openStore(opts.storeUrl, opts.storeConnection);
  } catch (e) {
    if (e instanceof StoreUrlError || e instanceof ClusterSpecError) throw new UsageError(e.message);
    throw e;
  }

  const identity = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  // The embedded store: one process per role and file, proven by an OS lock (docs/store.md, "One
  // process per role"). A second one fails here at once, naming the holder. The lock also proves
  // that every earlier holder is gone, so a leader key left by one that was killed is taken over
  // at once rather than after its lease (-lease-duration).
  let roleLock: RoleLock | undefined;
  if (store instanceof SqliteStore && store.path !== ":memory:") {
    try {
      roleLock = acquireRoleLock(store.path, roleOf(opts.leaderKey), identity);
    } catch (e) {
      await store.close();
      if (!(e instanceof StoreRoleLockedError) && !(e instanceof RoleLockFileError)) throw e;
      log.error({ lockFile: e.lockFile, ...(e instanceof StoreRoleLockedError && { holderPid: e.holderPid }) }, e.message);
      process.stderr.write(`capstan: ${e.message}\n`);
      return 1;
    }
  }
  const goneHolders = roleLock?.previousHolders;
  const registry = new Registry();
  // A real lease on either store, so writes are fenced exactly as on etcd. On etcd, after a crash
  // the next process leads once the dead one's lease expires (-lease-duration, 15 s by default); a
  // clean stop revokes it, so a restart leads at once. On the embedded store, at once either way.
  const elector: Elector = new LeaderElector({ store, key: opts.leaderKey, identity, log, registry, ...opts.lease, ...(goneHolders && { goneHolders }) });
  const manager = new Manager({
    name: opts.name,
    http: listen,
    tls: opts.tls,
    ...(opts.requestTimeoutMs !== undefined ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
    log,
    registry,
    elector,
  });
  // One compactor per store, elected among every process on it (runtime/compactor.ts).
  manager.add(new ElectedCompactor({ store, identity, retentionMs: opts.historyMs, log, registry, ...(opts.lease && { lease: opts.lease }), ...(goneHolders && { goneHolders }) }), { leaderOnly: false });
  const scopes = new Map<string, LeaderScope>();
  const underLeaderKey = (key: string): LeaderScope => {
    if (key === opts.leaderKey) return { add: (r) => manager.add(r, { leaderOnly: true }), fence: () => elector.fence() };
    let scope = scopes.get(key);
    if (scope === undefined) {
      // goneHolders still holds: an identity the role lock proves dead holds no key of any kind.
      const elected = new ElectedRunnables({ store, key, identity, log, registry, ...(opts.lease && { lease: opts.lease }), ...(goneHolders && { goneHolders }) });
      manager.add(elected, { leaderOnly: false });
      scope = elected;
      scopes.set(key, scope);
    }
    return scope;
  };
  // Tokens are checked from the store every process shares (docs/security.md); the audit line of
  // every authenticated write is written here, in front of every API of the process.
  const verifier = new TokenVerifier({ store });
  const access: ApiAccess = {
    gate: opts.auth.mode === "none" ? openGate : tokenGate(verifier),
    hostAccess: hostAccessPolicy(opts.auth.allowedHostPaths, unixSockets(opts.cluster)),
  };
  manager.app.use("*", auditWrites(log));
  if (opts.auth.mode === "none") log.warn({ address: opts.web }, "authentication is off (-auth none): every caller is an admin");
  if (opts.tls === undefined && !isLoopbackHost(listen.host)) {
    log.warn({ address: opts.web }, "serving plain HTTP on an address other machines can reach: access tokens cross the network in clear; give -tls-cert and -tls-key");
  }
  try {
    await install({ store, cluster, manager, elector, underLeaderKey, log, access, verifier });
  } catch (e) {
    await store.close();
    roleLock?.release();
    throw e;
  }

  for (const node of cluster ? await cluster.nodes() : []) {
    log.info(
      { node: node.name, endpoint: node.endpoint, state: node.state, cpus: node.cpus, memoryBytes: node.memoryBytes, error: node.error },
      "cluster node",
    );
  }
  const onSignal = (signal: NodeJS.Signals) => {
    log.info({ signal }, "shutting down");
    void manager.stop();
  };
  // `once`: a second signal takes Node's default action and ends the process at once.
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  try {
    await manager.start();
    log.info({ address: manager.address(), store: store.description }, `${opts.name} is up`);
  } catch {
    // finished() carries the error; the manager has stopped what it started.
  }
  const exit = await manager.finished();
  await store.close();
  roleLock?.release();
  if (exit.code !== 0) log.error({ err: exit.error }, `${opts.name} stopped on a failure`);
  // Everything is closed, so the event loop should drain and the process end with this code. If a
  // library left a handle open, end it anyway rather than hang a supervisor's stop.
  setTimeout(() => {
    log.warn("handles still open 5 s after shutdown; exiting");
    process.exit(exit.code);
  }, 5_000).unref();
  return exit.code;
}

/** The role a leader key stands for, as a file-name part: /platform/secret-sync/leader -> secret-sync. */
export function roleOf(leaderKey: string): string {
  return leaderKey.replace(/^\/platform\//, "").replace(/\/leader$/, "").replace(/[^a-z0-9-]+/gi, "-").toLowerCase() || "leader";
}

/** The unix:// socket paths of a -cluster value: never mountable, with the default ones. */
function unixSockets(cluster: string | undefined): string[] {
  return [...(cluster ?? "").matchAll(/unix:\/\/(\/[^,]+)/g)].map((m) => m[1]!.trim());
}
