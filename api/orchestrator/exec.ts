// GET /api/podgroups/exec (docs/api-reference.md, "GET /api/podgroups/exec"): a command run in a
// PodGroup instance's container, over a WebSocket. The wire protocol is Kubernetes' channel
// framing (exec-frames.ts).
//
// Everything is decided before the upgrade, so a refused request gets a normal JSON error answer:
// authenticate (401), refuse a cross-site request (403: an Origin whose host is not the Host), read
// the query (400 naming the parameter), find the group and the instance (404; 400 naming
// `instance` when it is needed), authorize "exec" on the group's app (403: a permission of its own,
// docs/security.md). Every attempt that got past authentication leaves an audit line naming the
// instance and the command (never what goes to stdin).
//
// After the upgrade the command runs in the instance's first container (Cluster.exec). Its output
// goes out as channels 1 and 2; when it ends, channel 3 says how and the server closes with 1000.
// When the client goes away first, the session is closed, which ends the process in the container.
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { upgradeWebSocket } from "@hono/node-server";
import type { Context, Hono, MiddlewareHandler } from "hono";
import type { WebSocket } from "ws";
import { z } from "zod";
import type { Cluster, ContainerRef, ExecSession } from "../../adapters/cluster/index.ts";
import { maxExecArgBytes, maxExecArgs } from "../../adapters/cluster/exec.ts";
import type { Logger } from "../../runtime/log.ts";
import { auditObject, describe, may, requireApp, type Gate, type Principal } from "../auth/index.ts";
import { whileAllowed } from "../auth/still-allowed.ts";
import { ApiError, badRequest, forbidden, invalid, notFound, parseQuery, queryBoolean, systemWallClock, type ErrorDetail, type WallClock } from "../http/index.ts";
import { Name, type PodGroupWithSpec } from "../resources/podgroup.ts";
import { channel, endFrame, frame, parseClientFrame, type ExecEnd } from "./exec-frames.ts";
import { instanceParam } from "./queries.ts";
import type { PodGroupReader } from "./records.ts";

export const execPath = "/api/podgroups/exec";

export const ExecQuery = z.object({
  name: Name.describe("PodGroup name"),
  instance: instanceParam.optional().describe("the instance (its instanceNo, from 1); absent: the group's only instance"),
  tty: queryBoolean.optional().describe("true: run the command on a terminal (one raw output stream; resize applies)"),
  stdin: queryBoolean.optional().describe("true: attach the command's standard input (channel 0, and 255 to close it)"),
});

export interface ExecRouteOptions {
  gate: Gate;
  reader: Pick<PodGroupReader, "get">;
  cluster: Cluster;
  log: Logger;
  /** Wall clock for the sessions' durations in the log (default the system's). */
  clock?: WallClock;
}

/** Mounts GET /api/podgroups/exec on `app` (the PodGroup API, when it has a cluster). */
export function mountExec(app: Hono, opts: ExecRouteOptions): void {
  const { gate, reader, cluster } = opts;
  const clock = opts.clock ?? systemWallClock;
  const log = opts.log.child({ exec: true });
  app.use(execPath, answerRefusedUpgrade);
  app.get(execPath, async (c) => {
    const who = await gate.authenticate(c);
    const raw = c.req.queries("cmd") ?? [];
    auditObject(c.req.raw, auditName(c.req.query("name") ?? "", c.req.query("instance"), raw));
    requireSameOrigin(c);
    const q = parseExecQuery(c, raw);
    const group = await reader.get(q.name);
    if (group === null) throw notFound(`podgroup ${q.name} not found`);
    const target = execTarget(group, q.instance);
    if ("notFound" in target) throw notFound(target.notFound);
    if ("choose" in target) throw invalid("query parameters", [{ path: "instance", message: target.choose }]);
    auditObject(c.req.raw, auditName(q.name, String(target.instance), q.cmd));
    requireApp(who, "exec", group.spec.namespace);
    if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
      throw badRequest(`${execPath} is a WebSocket: send the request as a WebSocket upgrade (Upgrade: websocket)`, [{ path: "Upgrade", message: "must be websocket" }]);
    }
    // A session can be quiet for hours: TCP keep-alive notices a client that vanished without closing.
    socketOf(c)?.setKeepAlive(true, 30_000);
    const bridge = new ExecBridge(cluster, target.ref, { cmd: q.cmd, tty: q.tty === true, stdin: q.stdin === true }, log.child({ podgroup: q.name, instance: target.instance, tokenId: who.tokenId }), who, clock);
    // A session lasts: its caller's token and exec grant are checked again as they change (a
    // revoked token, a maintainer removed from the app), and the session ends when they go.
    const namespace = group.spec.namespace;
    const stopRechecks = whileAllowed(
      // A session over (or never opened) stops the checks: "not allowed" then ends nothing more.
      async () => !bridge.over && may(await gate.authenticate(c), "exec", namespace),
      () => bridge.revoke("the caller's token or grants no longer allow exec into this app"),
    );
    return upgradeWebSocket(c, {
      onOpen: (_evt, ws) => bridge.open(ws.raw as unknown as WebSocket),
      onMessage: (evt) => bridge.message(evt.data),
      onClose: () => {
        stopRechecks();
        bridge.clientGone();
      },
      onError: () => {
        stopRechecks();
        bridge.clientGone();
      },
    });
  });
}

/** The query, `cmd` (repeated, one argument each) included; a 400 names every bad parameter. */
function parseExecQuery(c: Context, cmd: string[]): z.output<typeof ExecQuery> & { cmd: string[] } {
  const details: ErrorDetail[] = [];
  let q: z.output<typeof ExecQuery> | undefined;
  try {
    q = parseQuery(c, ExecQuery);
  } catch (e) {
    if (!(e instanceof ApiError) || e.body.code !== "BadRequest") throw e;
    details.push(...e.body.details);
  }
  const problem = commandProblem(cmd);
  if (problem !== undefined) details.push({ path: "cmd", message: problem });
  if (details.length > 0 || q === undefined) throw invalid("query parameters", details);
  return { ...q, cmd };
}

function commandProblem(cmd: string[]): string | undefined {
  if (cmd.length === 0 || cmd[0] === "") return "required: the command, then each argument as one more cmd parameter (cmd=sh&cmd=-c&cmd=ls)";
  if (cmd.length > maxExecArgs) return `at most ${maxExecArgs} arguments`;
  if (cmd.some((a) => a.includes("\0"))) return "an argument contains a NUL character";
  if (cmd.reduce((n, a) => n + Buffer.byteLength(a), 0) > maxExecArgBytes) return `the arguments exceed ${maxExecArgBytes} bytes`;
  return undefined;
}

/**
 * Which container: the given instance's first one; without `instance`, that of the group's only
 * instance. Or why not: no such instance or no container (404), or an instance must be chosen (400).
 */
export function execTarget(group: PodGroupWithSpec, instance: number | undefined): { instance: number; ref: ContainerRef } | { notFound: string } | { choose: string } {
  const name = group.spec.name;
  const pods = [...group.pods].sort((a, b) => a.instanceNo - b.instanceNo);
  const known = pods.map((p) => p.instanceNo).join(", ");
  let pod = pods[0];
  if (instance === undefined) {
    if (pods.length !== 1) {
      return { choose: pods.length === 0 ? `podgroup ${name} has no instance yet` : `podgroup ${name} has ${pods.length} instances (${known}): choose one` };
    }
  } else {
    pod = pods.find((p) => p.instanceNo === instance);
    if (pod === undefined) return { notFound: `podgroup ${name} has no instance ${instance} (${known === "" ? "it has none yet" : `instances: ${known}`})` };
  }
  const first = pod!.containers.find((c) => c.id !== "" && !/-c\d{1,3}$/.test(c.name)) ?? pod!.containers.find((c) => c.id !== "");
  if (first === undefined) return { notFound: `instance ${pod!.instanceNo} of podgroup ${name} has no container (state ${pod!.state})` };
  return { instance: pod!.instanceNo, ref: { node: first.node, id: first.id } };
}

/**
 * A browser sends Origin with a WebSocket handshake, and cookies with it: a page of another site
 * must not run commands with its visitor's credentials. Clients other than browsers send no Origin.
 */
function requireSameOrigin(c: Context): void {
  const origin = c.req.header("origin");
  if (origin === undefined) return;
  const host = c.req.header("host") ?? "";
  let same = false;
  try {
    const o = new URL(origin);
    same = (o.protocol === "http:" || o.protocol === "https:") && o.host === new URL(`${o.protocol}//${host}`).host;
  } catch {
    same = false;
  }
  if (!same) {
    throw forbidden(`exec answers requests from its own origin only: Origin ${JSON.stringify(origin.slice(0, 200))} is not host ${JSON.stringify(host.slice(0, 200))}`, "a same-origin request");
  }
}

/** "podgroup/shop.web/1 exec [\"sh\",\"-c\",\"ls\"]": what the audit line names; tokens typed into the command are not written down. */
function auditName(name: string, instance: string | undefined, cmd: string[]): string {
  const shown = JSON.stringify(cmd.slice(0, 64).map((a) => a.slice(0, 1000).replace(/cst_[0-9a-f]{12}_[A-Za-z0-9_-]*/g, "<redacted>")));
  return `podgroup/${name.slice(0, 200)}/${instance?.slice(0, 20) ?? "-"} exec ${shown}${cmd.length > 64 ? ` (+${cmd.length - 64} arguments)` : ""}`;
}

function socketOf(c: Context): Duplex & { setKeepAlive(on: boolean, ms: number): void } | undefined {
  return (c.env as { incoming?: { socket?: Duplex & { setKeepAlive(on: boolean, ms: number): void } } } | undefined)?.incoming?.socket;
}

/**
 * A refused WebSocket handshake gets the answer a plain request would: its status, headers and
 * JSON body. (The server's own refusal of an upgrade sends the status alone, without a body.)
 */
export const answerRefusedUpgrade: MiddlewareHandler = async (c, next) => {
  await next();
  const socket = socketOf(c);
  // An upgrade the server hands over has no response object: the socket is ours to answer on.
  const handedOver = c.req.header("upgrade")?.toLowerCase() === "websocket" && (c.env as { outgoing?: unknown } | undefined)?.outgoing === undefined;
  if (!handedOver || c.res.status < 400 || socket === undefined || socket.destroyed) return;
  const body = Buffer.from(await c.res.clone().arrayBuffer());
  const head = [`HTTP/1.1 ${c.res.status} ${STATUS_CODES[c.res.status] ?? ""}`, "connection: close", `content-length: ${body.length}`];
  c.res.headers.forEach((value, key) => {
    if (!["connection", "content-length", "transfer-encoding", "upgrade"].includes(key.toLowerCase())) head.push(`${key}: ${value}`);
  });
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 5_000);
    socket.once("error", () => undefined);
    socket.end(Buffer.concat([Buffer.from(`${head.join("\r\n")}\r\n\r\n`), body]), () => {
      clearTimeout(timer);
      resolve();
    });
  });
  // Destroyed, the server knows the answer was given and writes none of its own.
  socket.destroy();
};

/** The most client frames held while earlier ones are still being handed to the engine. */
const maxPendingFrames = 64;

/** One WebSocket and the exec session behind it. */
class ExecBridge {
  private ws: WebSocket | undefined;
  private opening: Promise<ExecSession | undefined> = Promise.resolve(undefined);
  private inbox: Promise<void> = Promise.resolve();
  private pending = 0;
  private gone = false;
  private ended = false;
  private readonly started: number;

  constructor(
    private readonly cluster: Cluster,
    private readonly ref: ContainerRef,
    private readonly request: { cmd: string[]; tty: boolean; stdin: boolean },
    private readonly log: Logger,
    private readonly who: Principal,
    private readonly clock: WallClock,
  ) {
    this.started = clock.now();
  }

  open(ws: WebSocket): void {
    this.ws = ws;
    this.log.debug({ user: describe(this.who), tty: this.request.tty, stdin: this.request.stdin }, "exec started");
    this.opening = this.cluster.exec(this.ref, this.request).then(
      (session) => {
        if (this.gone) {
          this.closeSession(session);
          return undefined;
        }
        void this.pump(session);
        return session;
      },
      (err: unknown) => {
        this.finish({ error: messageOf(err) });
        return undefined;
      },
    );
  }

  message(data: unknown): void {
    if (this.ended) return;
    if (!(data instanceof ArrayBuffer)) {
      this.finish({ error: "the client sent a text frame: every frame is binary, its first byte the channel" });
      return;
    }
    const parsed = parseClientFrame(Buffer.from(data));
    if ("error" in parsed) {
      this.finish({ error: parsed.error });
      return;
    }
    // In order, one at a time: a resize completes before the input after it reaches the terminal.
    if (++this.pending > maxPendingFrames) this.ws?.pause();
    this.inbox = this.inbox.then(async () => {
      try {
        const session = await this.opening;
        if (session === undefined || this.ended) return;
        if (parsed.kind === "stdin") {
          if (this.request.stdin && parsed.data.length > 0) await session.write(parsed.data);
        } else if (parsed.kind === "resize") {
          await session.resize(parsed.cols, parsed.rows);
        } else {
          await session.end();
        }
      } catch (err) {
        // The command may have ended meanwhile; its end is reported by the output's side.
        this.log.debug({ err, frame: parsed.kind }, "exec: a client frame was not delivered");
      } finally {
        if (--this.pending < maxPendingFrames / 4) this.ws?.resume();
      }
    });
  }

  /** Ended, or its client gone. */
  get over(): boolean {
    return this.ended || this.gone;
  }

  /** The caller may no longer exec: the end frame says why, and the command is ended. */
  revoke(message: string): void {
    this.finish({ error: message });
  }

  clientGone(): void {
    if (this.gone) return;
    this.gone = true;
    if (!this.ended) this.log.info({ ms: this.clock.now() - this.started }, "exec: the client went away; ending the command");
    this.ended = true;
    void this.opening.then((session) => session && this.closeSession(session));
  }

  private async pump(session: ExecSession): Promise<void> {
    let end: ExecEnd;
    try {
      for await (const frames of session.output) {
        for (const f of frames) {
          if (f.data.length > 0 && !this.gone) await this.send(frame(f.stream === "stdout" ? channel.stdout : channel.stderr, f.data));
        }
      }
      end = { exitCode: await session.exitCode };
    } catch (err) {
      if (this.gone) return;
      end = { error: messageOf(err) };
    }
    this.finish(end);
  }

  /** Channel 3, then close 1000; and make sure nothing is left running. */
  private finish(end: ExecEnd): void {
    if (this.ended) return;
    this.ended = true;
    this.log.info({ ...end, ms: this.clock.now() - this.started }, "exec ended");
    const ws = this.ws;
    if (ws !== undefined && ws.readyState === ws.OPEN) {
      ws.send(endFrame(end));
      ws.close(1000);
    }
    void this.opening.then((session) => session && this.closeSession(session));
  }

  private closeSession(session: ExecSession): void {
    session.close().catch((err: unknown) => this.log.warn({ err, execId: session.id }, "exec: could not make sure the command ended"));
  }

  /** Resolves once the frame is handed to the connection: output is read no faster than it goes out. */
  private send(data: Buffer): Promise<void> {
    const ws = this.ws;
    if (ws === undefined || ws.readyState !== ws.OPEN) return Promise.resolve();
    return new Promise((resolve) => ws.send(data, { binary: true }, () => resolve()));
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
