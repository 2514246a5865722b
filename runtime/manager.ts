// Manager: runs one process's informers, controllers and other runnables, elects a leader when
// asked to, and serves /healthz, /readyz and /metrics (plus whatever a component mounts on `app`).
//
// Start order (controller-runtime's; docs/runtime.md, "Manager"):
//   1. HTTP server (probes answer from the start; /readyz says 503 until ready);
//   2. informers, then wait until all have synced (cacheSyncTimeoutMs, default 2 min);
//   3. runnables that do not need leadership;
//   4. with an elector: campaign; leader-only runnables (controllers, the compactor) start when
//      elected. Followers keep their informers synced (warm standby), so a failover skips the
//      initial list. Without an elector, leader-only runnables start at once.
//
// Stop order (docs/runtime.md, "Manager"), stop() or SIGTERM/SIGINT under run():
//   1. stop accepting new work: /readyz turns 503 and every other request on `app` gets 503;
//   2. cancel leader-only runnables (controllers shut their queues and abort every in-flight
//      reconcile's signal), then the others; wait for them to finish, up to gracefulShutdownMs
//      (default 30 s) in total;
//   3. stop informers (close watches);
//   4. release leadership (revoke the lease: the key vanishes and a follower takes over at once
//      instead of after the TTL);
//   5. close the HTTP server.
//
// Loss of leadership: the elector has already aborted the leader-only runnables' signal (no
// grace: someone else may be leading). With the default elector (recampaign: false) the manager
// then stops and finished() reports exit code 1, so that a supervisor restarts the process with a
// clean slate (controller-runtime exits the same way). With `recampaign: true` on the elector the
// manager waits for the runnables to finish (all of them, with no time limit: a next term must not
// overlap this one) and stays up as a follower.
import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { Registry } from "prom-client";
import { onAbort } from "./abort-fanout.ts";
import { realClock, type Clock } from "./clock.ts";
import type { Informer } from "./informer.ts";
import { LeadershipLostError, type Elector, type StoppedLeading } from "./leaderelection.ts";
import { silentLogger, type Logger } from "./log.ts";

/** Something the manager runs until its signal aborts (a Controller, the StoreCompactor, ...). */
export interface Runnable {
  readonly name: string;
  /** Run until `signal` aborts, then resolve once fully stopped. A rejection fails the manager. */
  start(signal: AbortSignal): Promise<void>;
}

export interface ManagerOptions {
  /** Names the process in logs. */
  name: string;
  /** Serve probes, metrics and `app` here (port 0 = any free port). Omit to serve nothing. */
  http?: { host?: string; port: number };
  /** Serve HTTPS instead of HTTP with this certificate (its chain may follow) and key, PEM contents. */
  tls?: { cert: string; key: string };
  /**
   * Node's limit on receiving one whole request (default its own, 300 s). 0 turns it off: an image
   * registry takes multi-gigabyte uploads in one request; headers still must arrive in 60 s.
   */
  requestTimeoutMs?: number;
  /** Elect a leader before running leader-only runnables (a LeaderElector, on either store). */
  elector?: Elector;
  /** Total time stop() waits for runnables to finish (default 30 s). */
  gracefulShutdownMs?: number;
  /** How long start() waits for informers to sync (default 2 min). */
  cacheSyncTimeoutMs?: number;
  clock?: Clock;
  log?: Logger;
  /** Registry served at /metrics; pass the same one to informers and controllers. */
  registry?: Registry;
}

/** How a manager ended: 0 after a requested stop, 1 after a failure or a loss of leadership. */
export type ManagerExit = { code: 0 } | { code: 1; error: Error };

/** A condition of /readyz: true when it holds; false, or a string saying what it waits for, when not. */
export type ReadinessCheck = () => boolean | string;

interface Registered {
  runnable: Runnable;
  leaderOnly: boolean;
}

const probePaths = new Set(["/healthz", "/readyz", "/metrics"]);

export class Manager {
  readonly name: string;
  /** Mount component routes here; they are served on the manager's address. */
  readonly app: Hono;
  readonly registry: Registry;
  private readonly opts: ManagerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly gracefulShutdownMs: number;
  private readonly informers: Informer<unknown>[] = [];
  private readonly runnables: Registered[] = [];
  /** Further conditions of /readyz (addReadinessCheck), by name. */
  private readonly readinessChecks = new Map<string, ReadinessCheck>();
  /** Notes of /readyz (addReadinessDetail), by name. */
  private readonly readinessDetails = new Map<string, () => string | undefined>();

  private server: ServerType | undefined;
  /** The open WebSockets; ended with the server's other connections on stop. */
  private readonly webSockets = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });
  private serverAddress: { host: string; port: number } | undefined;
  private started = false;
  private draining = false;
  private stopping: Promise<void> | undefined;
  private exit: ManagerExit | undefined;
  private resolveFinished!: (exit: ManagerExit) => void;
  private readonly finishedPromise: Promise<ManagerExit>;
  /** Aborts the non-leader runnables. */
  private readonly generalAbort = new AbortController();
  /** Aborts the current leadership term's runnables (set while leading). */
  private termAbort: AbortController | undefined;
  private termRuns: Promise<void>[] = [];
  private generalRuns: Promise<void>[] = [];

  constructor(opts: ManagerOptions) {
    if (!opts.name) throw new TypeError("manager: name is required");
    this.opts = opts;
    this.name = opts.name;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.log ?? silentLogger).child({ manager: opts.name });
    this.registry = opts.registry ?? new Registry();
    this.gracefulShutdownMs = opts.gracefulShutdownMs ?? 30_000;
    this.finishedPromise = new Promise((resolve) => (this.resolveFinished = resolve));
    this.app = new Hono();
    // First middleware, so it also covers routes that components mount later.
    this.app.use("*", async (c, next) => {
      if (this.draining && !probePaths.has(c.req.path)) {
        return c.json({ code: "Unavailable", message: "shutting down" }, 503);
      }
      await next();
    });
    this.app.get("/healthz", (c) => c.text("ok"));
    this.app.get("/readyz", (c) => {
      const checks = this.readiness();
      // Only `true` passes: a check's string is why it does not pass yet.
      const ready = Object.values(checks).every((value) => value === true);
      const details: Record<string, string> = {};
      for (const [name, detail] of this.readinessDetails) {
        const note = detail();
        if (note !== undefined) details[name] = note;
      }
      return c.json({ status: ready ? "ok" : "unavailable", checks, ...(Object.keys(details).length > 0 && { details }) }, ready ? 200 : 503);
    });
    this.app.get("/metrics", async (c) => {
      const text = await this.registry.metrics();
      return c.body(text, 200, { "content-type": this.registry.contentType });
    });
  }

  /** Informers start before everything else and must sync before any runnable starts. */
  addInformer<T>(informer: Informer<T>): this {
    this.assertNotStarted();
    this.informers.push(informer as Informer<unknown>);
    return this;
  }

  /**
   * Add a runnable. Leader-only runnables (the default: controllers, the compactor) run only while
   * this process leads; others (e.g. a Docker events cache every replica needs) always run.
   */
  add(runnable: Runnable, options: { leaderOnly?: boolean } = {}): this {
    this.assertNotStarted();
    this.runnables.push({ runnable, leaderOnly: options.leaderOnly ?? true });
    return this;
  }

  /**
   * One more condition /readyz requires, shown under `name` in its checks: a component whose
   * answers need more than synced informers (the orchestrator's node records) says so here. It
   * must be cheap and synchronous: /readyz calls it on every probe. It answers true when the
   * condition holds, and false, or a string saying what it waits for (shown as the check's value,
   * e.g. "waiting for node records: n2"), when it does not.
   */
  addReadinessCheck(name: string, check: ReadinessCheck): this {
    this.readinessChecks.set(name, check);
    return this;
  }

  /**
   * A note /readyz shows under `details` without changing readiness (the secrets service's seal:
   * the process serves, and unsealing needs it reachable). The function answers the note, or
   * undefined when there is nothing to say; cheap and synchronous like a readiness check.
   */
  addReadinessDetail(name: string, detail: () => string | undefined): this {
    this.readinessDetails.set(name, detail);
    return this;
  }

  /** Where the HTTP server listens (after start()). */
  address(): { host: string; port: number } | undefined {
    return this.serverAddress;
  }

  /**
   * Start everything in order and resolve once informers have synced and the elector (if any)
   * is campaigning. Rejects (after stopping what it started) when informers do not sync in time.
   */
  async start(): Promise<void> {
    this.assertNotStarted();
    this.started = true;
    try {
      if (this.opts.http) await this.listen(this.opts.http);
      for (const informer of this.informers) informer.start();
      const timeoutMs = this.opts.cacheSyncTimeoutMs ?? 120_000;
      await Promise.all(this.informers.map((i) => i.waitForSync(this.generalAbort.signal, timeoutMs)));
      this.log.info({ informers: this.informers.length }, "informers synced");
      for (const r of this.runnables.filter((x) => !x.leaderOnly)) {
        this.generalRuns.push(this.supervise(r.runnable, this.generalAbort.signal));
      }
      if (this.opts.elector) {
        this.opts.elector.start({
          onStartedLeading: (signal) => this.startTerm(signal),
          onStoppedLeading: (info) => this.endTerm(info),
        });
      } else {
        this.startTerm(this.generalAbort.signal);
      }
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      this.log.error({ err: error }, "start failed");
      await this.stop(error);
      throw error;
    }
  }

  /** Stop everything in the documented order. Idempotent; concurrent calls share one stop. */
  stop(failure?: Error): Promise<void> {
    this.stopping ??= this.shutdown(failure);
    return this.stopping;
  }

  /** Resolves when the manager has stopped, with the exit code it should end the process with. */
  finished(): Promise<ManagerExit> {
    return this.finishedPromise;
  }

  /**
   * For a process main: start, stop on SIGTERM/SIGINT (a second signal exits at once), and end
   * the process with finished()'s code.
   */
  async run(): Promise<never> {
    const onSignal = (sig: NodeJS.Signals) => {
      if (this.stopping) {
        this.log.warn({ signal: sig }, "second signal; exiting now");
        process.exit(1);
      }
      this.log.info({ signal: sig }, "shutting down");
      void this.stop();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    try {
      await this.start();
    } catch {
      // finished() carries the error.
    }
    const exit = await this.finished();
    process.exit(exit.code);
  }

  private readiness(): Record<string, boolean | string> {
    const checks: Record<string, boolean | string> = { accepting: !this.draining && this.started };
    for (const i of this.informers) checks[`informer:${i.name}`] = i.hasSynced();
    for (const [name, check] of this.readinessChecks) checks[name] = check();
    if (this.opts.elector) {
      const state = this.opts.elector.state();
      checks["leader-election"] = state === "leading" || state === "following";
    }
    return checks;
  }

  private startTerm(leadership: AbortSignal): void {
    if (this.draining) return;
    const abort = new AbortController();
    this.termAbort = abort;
    const forward = () => abort.abort(leadership.reason);
    if (leadership.aborted) forward();
    else leadership.addEventListener("abort", forward, { once: true });
    const leaderOnly = this.runnables.filter((x) => x.leaderOnly);
    this.log.info({ runnables: leaderOnly.map((x) => x.runnable.name) }, "starting leader-only runnables");
    this.termRuns = leaderOnly.map((r) => this.supervise(r.runnable, abort.signal));
  }

  private async endTerm(info: StoppedLeading): Promise<void> {
    // The elector has aborted the term's signal already; wait for the runnables to wind down.
    this.termAbort?.abort(new LeadershipLostError(info.reason));
    const recampaigning = info.kind === "lost" && this.opts.elector?.state() !== "stopped";
    if (recampaigning) {
      // The elector campaigns again only after this returns, so waiting here for *every* runnable,
      // however long it takes, is what keeps a next term from overlapping this one (a controller
      // started twice, or a straggler writing under the next term's fence). Only a manager stop
      // cuts the wait short: shutdown bounds it with its own grace period.
      await untilSettledOrAborted(this.termRuns, this.generalAbort.signal);
    } else {
      await this.settle(this.termRuns, this.gracefulShutdownMs);
    }
    this.termRuns = [];
    if (info.kind !== "lost") return;
    if (!recampaigning) {
      this.log.error({ reason: info.reason }, "leadership lost; stopping");
      // Not awaited: stop() waits for the elector, which is waiting for this callback.
      void this.stop(new LeadershipLostError(info.reason));
    } else {
      this.log.warn({ reason: info.reason }, "leadership lost; campaigning again");
    }
  }

  /**
   * Run one runnable; a rejection before stop fails the whole manager. Each runnable gets a signal
   * of its own that follows `signal` (through one shared listener, runtime/abort-fanout.ts), so
   * the listeners it adds stay on its own signal: a term with a dozen runnables, each waiting on
   * its signal, is not a dozen listeners on one AbortSignal.
   */
  private async supervise(runnable: Runnable, signal: AbortSignal): Promise<void> {
    const own = new AbortController();
    if (signal.aborted) own.abort(signal.reason);
    const unsubscribe = onAbort(signal, () => own.abort(signal.reason));
    try {
      await runnable.start(own.signal);
    } catch (e) {
      if (signal.aborted) {
        this.log.warn({ err: e, runnable: runnable.name }, "runnable failed while stopping");
        return;
      }
      const error = e instanceof Error ? e : new Error(String(e));
      this.log.error({ err: error, runnable: runnable.name }, "runnable failed; stopping the manager");
      void this.stop(error);
    } finally {
      unsubscribe();
    }
  }

  private async shutdown(failure?: Error): Promise<void> {
    this.exit = failure ? { code: 1, error: failure } : { code: 0 };
    const startedAt = this.clock.now();
    const remaining = () => Math.max(0, this.gracefulShutdownMs - (this.clock.now() - startedAt));
    this.log.info({ failure: failure?.message }, "stopping: no new work");
    // 1. no new work
    this.draining = true;
    // 2. cancel leader-only runnables (reconciles see their signals abort), then the others
    this.termAbort?.abort(failure ?? new Error("manager stopping"));
    await this.settle(this.termRuns, remaining());
    this.generalAbort.abort(failure ?? new Error("manager stopping"));
    await this.settle(this.generalRuns, remaining());
    // 3. informers
    this.log.info("stopping informers");
    await Promise.all(this.informers.map((i) => i.stop()));
    // 4. leadership
    if (this.opts.elector) {
      this.log.info("releasing leadership");
      await this.opts.elector.stop();
    }
    // 5. HTTP
    await this.closeServer();
    this.log.info({ code: this.exit.code }, "stopped");
    this.resolveFinished(this.exit);
  }

  /** Wait for `runs` to settle, but no longer than `ms`. */
  private async settle(runs: Promise<void>[], ms: number): Promise<void> {
    if (runs.length === 0) return;
    const timeout = new AbortController();
    const late = this.clock.sleep(ms, timeout.signal).then(
      () => true,
      () => false,
    );
    const overran = await Promise.race([Promise.all(runs).then(() => false), late]);
    timeout.abort();
    if (overran) this.log.warn({ graceMs: ms }, "runnables did not finish within the grace period; continuing shutdown");
  }

  private listen(http: { host?: string; port: number }): Promise<void> {
    const hostname = http.host ?? "127.0.0.1";
    return new Promise((resolve, reject) => {
      const tls = this.opts.tls;
      // WebSocket upgrades (GET /api/podgroups/exec) go through `app` like any request; the route
      // that accepts one hands the connection to this server (@hono/node-server's upgradeWebSocket).
      const base = { fetch: this.app.fetch, hostname, port: http.port, websocket: { server: this.webSockets } };
      const limits = this.opts.requestTimeoutMs === undefined ? {} : { requestTimeout: this.opts.requestTimeoutMs, headersTimeout: 60_000 };
      const options = tls
        ? { ...base, createServer: createHttpsServer, serverOptions: { cert: tls.cert, key: tls.key, ...limits } }
        : { ...base, serverOptions: limits };
      const server = serve(options, (info: AddressInfo) => {
        this.serverAddress = { host: hostname, port: info.port };
        this.log.info({ ...this.serverAddress, scheme: tls ? "https" : "http" }, "serving");
        resolve();
      });
      server.once("error", reject);
      this.server = server;
    });
  }

  private async closeServer(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Idle keep-alive connections would hold close() open; in-flight requests get 1 s more.
      if ("closeIdleConnections" in server) server.closeIdleConnections();
      const t = setTimeout(() => {
        if ("closeAllConnections" in server) server.closeAllConnections();
        for (const ws of this.webSockets.clients) ws.terminate();
      }, 1_000);
      t.unref();
    });
  }

  private assertNotStarted(): void {
    if (this.started) throw new Error(`manager ${this.name} is already started`);
  }
}

/** Resolves once every run has settled or `signal` has aborted, whichever comes first. */
function untilSettledOrAborted(runs: Promise<void>[], signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    void Promise.all(runs).then(done);
  });
}
