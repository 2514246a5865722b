// The Cluster over real Docker engines, one dockerode client per node (engine.ts). Nodes are
// independent: calls to different nodes run in parallel, writes to one node share its write slots,
// and every call is bounded by a timeout (DockerClusterOptions) and the caller's signal.
import type { IncomingMessage } from "node:http";
import { createSecureContext } from "node:tls";
import type { Readable } from "node:stream";
import type Docker from "dockerode";
import type { Logger } from "../../runtime/log.ts";
import type {
  CallOptions,
  Cluster,
  ContainerDetails,
  ContainerRef,
  ContainerSummary,
  CreateSpec,
  EventHandler,
  ExecOptions,
  ExecSession,
  ListOptions,
  LogOptions,
  LogStream,
  NetworkInfo,
  NodeResources,
  PullOptions,
  RemoveOptions,
  StopOptions,
  SubscribeOptions,
  Subscription,
} from "./cluster.ts";
import { ClusterError, EngineError, InvalidRequestError, NotFoundError, NotModifiedError } from "./errors.ts";
import { Engine, tlsFailure, toClusterError, type EngineLimits, type EngineTls } from "./engine.ts";
import { watchEvents, type EventSource, type EventStreamOptions } from "./events.ts";
import { openExec } from "./exec.ts";
import { dialLogs, LogCall, logQuery } from "./log-stream.ts";
import {
  checkContainerName,
  toCreateBody,
  toDetails,
  toDockerFilters,
  toNetworkInfo,
  toNodeResources,
  toSummary,
  unreachableNode,
  type EngineInfo,
} from "./mapping.ts";
import { noopNetworkManager, type NetworkManager } from "./network.ts";
import { followPull, pullReference, PullTracker } from "./pull.ts";
import { checkTransport, ClusterSpecError, parseClusterSpec, type ClusterEndpoint } from "./spec.ts";

export interface DockerClusterOptions extends Partial<EngineLimits> {
  /** Grace period stop() allows for when the caller gives none, seconds (the engine's default). */
  defaultStopSeconds?: number;
  /** Timeout of an image pull once it holds a write slot, ms (default 10 min: pulls are long). */
  pullTimeoutMs?: number;
  /**
   * Timeout of a whole log read without follow, ms (default 60 s: a long log to a slow reader takes
   * longer than a read's 10 s). Opening any log read is bounded by readTimeoutMs; a follow stream
   * has no overall timeout.
   */
  logsTimeoutMs?: number;
  networkManager?: NetworkManager;
  /** Event stream tuning (connect timeout, back-off, line limit, clock, logger). */
  events?: EventStreamOptions;
  logger?: Logger;
  /**
   * Mutual TLS to remote engines (PEM text: CA, client certificate, its key). With it, every
   * tcp:// endpoint uses TLS (https://); without it, only plain tcp:// to a loopback address works.
   */
  tls?: EngineTls;
}

/**
 * Fails at once, rather than at the first call to each engine, when the material cannot make a TLS
 * client: not PEM, or a key that does not belong to the certificate.
 */
function checkTlsMaterial(tls: EngineTls): void {
  for (const part of ["ca", "cert", "key"] as const) {
    if (typeof tls[part] !== "string" || !tls[part].includes("-----BEGIN ")) {
      throw new ClusterSpecError(`TLS ${part} for the Docker engines is not PEM text (give the file's contents, not its path)`);
    }
  }
  try {
    createSecureContext({ ca: tls.ca, cert: tls.cert, key: tls.key });
  } catch (err) {
    throw new ClusterSpecError(`TLS material for the Docker engines is not usable: ${(err as Error).message}`);
  }
}

interface InfoWithOptions {
  info(options: { abortSignal: AbortSignal }): Promise<EngineInfo>;
}

export const defaultEngineLimits: EngineLimits = {
  writeConcurrency: 8,
  readTimeoutMs: 10_000,
  writeTimeoutMs: 30_000,
};

export const defaultPullTimeoutMs = 600_000;

export const defaultLogsTimeoutMs = 60_000;

export class DockerCluster implements Cluster {
  private readonly engines = new Map<string, Engine>();
  private readonly networkManager: NetworkManager;
  private readonly defaultStopSeconds: number;
  private readonly pullTimeoutMs: number;
  private readonly logsTimeoutMs: number;
  private readonly eventOptions: EventStreamOptions;

  constructor(endpoints: ClusterEndpoint[], options: DockerClusterOptions = {}) {
    if (endpoints.length === 0) throw new RangeError("a cluster needs at least one endpoint");
    const limits: EngineLimits = {
      writeConcurrency: options.writeConcurrency ?? defaultEngineLimits.writeConcurrency,
      readTimeoutMs: options.readTimeoutMs ?? defaultEngineLimits.readTimeoutMs,
      writeTimeoutMs: options.writeTimeoutMs ?? defaultEngineLimits.writeTimeoutMs,
    };
    if (!(Number.isInteger(limits.writeConcurrency) && limits.writeConcurrency >= 1)) {
      throw new RangeError(`writeConcurrency must be an integer >= 1 (got ${limits.writeConcurrency})`);
    }
    if (options.tls !== undefined) checkTlsMaterial(options.tls);
    for (const ep of endpoints) {
      if (this.engines.has(ep.name)) throw new RangeError(`node name ${ep.name} is used twice`);
      checkTransport(ep.transport, options.tls !== undefined, `node ${ep.name}`);
      this.engines.set(ep.name, new Engine(ep, limits, options.tls));
    }
    this.networkManager = options.networkManager ?? noopNetworkManager;
    this.defaultStopSeconds = options.defaultStopSeconds ?? 10;
    this.pullTimeoutMs = options.pullTimeoutMs ?? defaultPullTimeoutMs;
    if (!(this.pullTimeoutMs > 0)) throw new RangeError(`pullTimeoutMs must be > 0 (got ${this.pullTimeoutMs})`);
    this.logsTimeoutMs = options.logsTimeoutMs ?? defaultLogsTimeoutMs;
    if (!(this.logsTimeoutMs > 0)) throw new RangeError(`logsTimeoutMs must be > 0 (got ${this.logsTimeoutMs})`);
    this.eventOptions = { logger: options.logger, ...options.events };
  }

  /** From the `-cluster` option text, e.g. "n1=unix:///var/run/docker.sock,n2=tcp://10.0.0.2:2376" (TLS with options.tls). */
  static fromSpec(spec: string, options?: DockerClusterOptions): DockerCluster {
    return new DockerCluster(parseClusterSpec(spec, { tls: options?.tls !== undefined }), options);
  }

  /** Node names in spec order, from the spec (no engine call). */
  get nodeNames(): string[] {
    return [...this.engines.keys()];
  }

  async nodes(options: CallOptions = {}): Promise<NodeResources[]> {
    return Promise.all(
      [...this.engines.values()].map(async (engine) => {
        try {
          const info = await engine.read<EngineInfo>({
            op: "nodes",
            signal: options.signal,
            // dockerode's info() takes options at runtime; its type declarations omit them.
            run: (d, signal) => (d as unknown as InfoWithOptions).info({ abortSignal: signal }),
          });
          return toNodeResources(engine.endpoint, info);
        } catch (err) {
          if (!(err instanceof ClusterError)) throw err;
          return unreachableNode(engine.endpoint, err.message);
        }
      }),
    );
  }

  async listContainers(node?: string, options: ListOptions = {}): Promise<ContainerSummary[]> {
    const engines = node === undefined ? [...this.engines.values()] : [this.engine(node, "listContainers")];
    const filters = toDockerFilters(options.filters);
    const lists = await Promise.all(
      engines.map((engine) =>
        engine.read({
          op: "listContainers",
          signal: options.signal,
          run: async (d, signal) => {
            const size = options.size ?? false;
            const raw = await d.listContainers({ all: options.all ?? false, size, filters, abortSignal: signal });
            return raw.map((c) => toSummary(engine.node, c, size));
          },
        }),
      ),
    );
    return lists.flat();
  }

  async create(node: string, name: string, spec: CreateSpec, options: CallOptions = {}): Promise<ContainerRef> {
    const engine = this.engine(node, "create");
    checkContainerName(node, name, "create");
    const body = toCreateBody(node, name, await this.networkManager.prepare(node, name, spec));
    return engine.write({
      op: "create",
      ref: name,
      signal: options.signal,
      run: async (d, signal) => {
        // The name goes in the query and the spec only in the body (docker-modem's _query/_body).
        // By default dockerode also copies the whole body into the URL, which puts env values
        // (secrets) where engines and proxies log request lines, and can exceed URL limits.
        const c = await d.createContainer({ _query: { name }, _body: body, abortSignal: signal } as Docker.ContainerCreateOptions);
        return { node, id: c.id };
      },
    });
  }

  async start(ref: ContainerRef, options: CallOptions = {}): Promise<void> {
    const engine = this.engine(ref.node, "start");
    try {
      await engine.write({
        op: "start",
        ref: ref.id,
        signal: options.signal,
        run: (d, signal) => d.getContainer(ref.id).start({ abortSignal: signal }),
      });
    } catch (err) {
      if (!(err instanceof NotModifiedError)) throw err; // already running: start is idempotent
    }
  }

  async stop(ref: ContainerRef, options: StopOptions = {}): Promise<void> {
    const engine = this.engine(ref.node, "stop");
    const t = options.timeoutSeconds;
    if (t !== undefined && !(Number.isInteger(t) && t >= 0)) {
      throw new InvalidRequestError(`stop timeout must be a whole number of seconds >= 0 (got ${t})`, ref.node, ref.id, "stop");
    }
    try {
      await engine.write({
        op: "stop",
        ref: ref.id,
        signal: options.signal,
        // The engine answers only once the container is down: allow for its grace period.
        timeoutMs: engine.limits.writeTimeoutMs + (t ?? this.defaultStopSeconds) * 1000,
        run: (d, signal) => d.getContainer(ref.id).stop({ ...(t === undefined ? {} : { t }), abortSignal: signal }),
      });
    } catch (err) {
      if (!(err instanceof NotModifiedError)) throw err; // already stopped: stop is idempotent
    }
  }

  async inspect(ref: ContainerRef, options: CallOptions = {}): Promise<ContainerDetails> {
    return toDetails(ref.node, await this.inspectRaw(ref, "inspect", options));
  }

  async networkInfo(ref: ContainerRef, options: CallOptions = {}): Promise<NetworkInfo> {
    return toNetworkInfo(await this.inspectRaw(ref, "networkInfo", options));
  }

  async remove(ref: ContainerRef, options: RemoveOptions = {}): Promise<void> {
    const engine = this.engine(ref.node, "remove");
    await engine.write({
      op: "remove",
      ref: ref.id,
      signal: options.signal,
      run: (d, signal) =>
        d.getContainer(ref.id).remove({ force: options.force ?? false, v: options.volumes ?? false, abortSignal: signal } as Docker.ContainerRemoveOptions),
    });
    await this.networkManager.release(ref);
  }

  async rename(ref: ContainerRef, newName: string, options: CallOptions = {}): Promise<void> {
    const engine = this.engine(ref.node, "rename");
    checkContainerName(ref.node, newName, "rename");
    await engine.write({
      op: "rename",
      ref: ref.id,
      signal: options.signal,
      run: (d, signal) => d.getContainer(ref.id).rename({ name: newName, abortSignal: signal }),
    });
  }

  async putArchive(ref: ContainerRef, path: string, archive: Buffer, options: CallOptions = {}): Promise<void> {
    const engine = this.engine(ref.node, "putArchive");
    if (!path.startsWith("/")) {
      throw new InvalidRequestError(`archive target must be an absolute path (got ${JSON.stringify(path)})`, ref.node, ref.id, "putArchive");
    }
    await engine.write({
      op: "putArchive",
      ref: ref.id,
      signal: options.signal,
      // noOverwriteDirNonDir: a file entry must never replace an existing directory (the engine
      // would delete the whole tree first); the engine answers 400 instead.
      run: (d, signal) => d.getContainer(ref.id).putArchive(archive, { path, noOverwriteDirNonDir: true, abortSignal: signal }),
    });
  }

  async hasImage(node: string, image: string, options: CallOptions = {}): Promise<boolean> {
    const engine = this.engine(node, "hasImage");
    checkImageReference(node, image, "hasImage");
    try {
      await engine.read({
        op: "hasImage",
        ref: image,
        signal: options.signal,
        missing: "image",
        run: (d, signal) => d.getImage(image).inspect({ abortSignal: signal } as Docker.ImageInspectOptions),
      });
      return true;
    } catch (err) {
      if (err instanceof NotFoundError && err.resource === "image") return false;
      throw err;
    }
  }

  async pullImage(node: string, image: string, options: PullOptions = {}): Promise<void> {
    const engine = this.engine(node, "pullImage");
    checkImageReference(node, image, "pullImage");
    const { fromImage, tag } = pullReference(image);
    const timeoutMs = options.timeoutMs ?? this.pullTimeoutMs;
    await engine.write({
      op: "pullImage",
      ref: image,
      signal: options.signal,
      timeoutMs,
      // A 404 of a pull is the registry's "no such repository or tag": an image, never a container.
      missing: "image",
      run: async (d, signal) => {
        // The credentials travel in the X-Registry-Auth header (docker-modem: base64url of the JSON),
        // never in the URL. Built field by field: only the bearer token and the registry reach the
        // engine, whatever else the object given holds (a `key` or `base64` field would replace
        // the header's value in docker-modem; a password would go to the realm of any 401).
        const authconfig = options.auth && { registrytoken: options.auth.registrytoken, serveraddress: options.auth.serveraddress };
        const opts = { fromImage, tag, abortSignal: signal, ...(authconfig && { authconfig }) };
        const stream = (await d.createImage(opts)) as Readable;
        const tracker = new PullTracker();
        await followPull(stream, signal, tracker, options.onProgress, (message) => new EngineError(`pullImage ${image} on ${node}: ${message}`, node, image, "pullImage", 500));
      },
    });
  }

  async logs(ref: ContainerRef, options: LogOptions = {}): Promise<LogStream> {
    const engine = this.engine(ref.node, "logs");
    const query = logQuery(ref, options);
    const timeoutMs = options.follow ? undefined : (options.timeoutMs ?? this.logsTimeoutMs);
    if (timeoutMs !== undefined && !(timeoutMs > 0)) {
      throw new InvalidRequestError(`logs timeout must be > 0 ms (got ${timeoutMs})`, ref.node, ref.id, "logs");
    }
    const call = new LogCall(ref, options.signal, timeoutMs);
    // Opening (both requests, up to the engine's answer) is one read's time, not two.
    const openBy = Date.now() + engine.limits.readTimeoutMs;
    try {
      // The engine's answer does not say whether it is multiplexed (API 1.42 adds a content type;
      // engines before it do not), the container's TTY setting does.
      const info = await engine.read({
        op: "logs",
        ref: ref.id,
        signal: call.signal,
        missing: "container",
        run: (d, signal) => d.getContainer(ref.id).inspect({ abortSignal: signal }),
      });
      const body = await engine.read({
        op: "logs",
        ref: ref.id,
        signal: call.signal,
        missing: "container",
        timeoutMs: Math.max(1, openBy - Date.now()),
        run: (d, signal) => dialLogs(d, ref.id, query, signal),
      });
      return call.stream(body, info.Config?.Tty === true);
    } catch (err) {
      const failure = call.failure(err);
      call.close();
      throw failure;
    }
  }

  /** exec.ts: create, start hijacked, and a session that kills what is left on close(). */
  async exec(ref: ContainerRef, options: ExecOptions): Promise<ExecSession> {
    const engine = this.engine(ref.node, "exec");
    const { readTimeoutMs, writeTimeoutMs } = engine.limits;
    return openExec(engine, ref, options, { openTimeoutMs: writeTimeoutMs, callTimeoutMs: readTimeoutMs, killWaitMs: writeTimeoutMs });
  }

  subscribe(handler: EventHandler, options: SubscribeOptions = {}): Subscription {
    const names = options.nodes ?? this.nodeNames;
    const sources = names.map((n) => this.eventSource(this.engine(n, "subscribe")));
    return watchEvents(sources, handler, options.filters ?? {}, this.eventOptions);
  }

  private eventSource(engine: Engine): EventSource {
    return {
      node: engine.node,
      open: async ({ filters }, signal) => {
        const f: Record<string, string[]> = { type: ["container"] };
        if (filters.label?.length) f.label = [...filters.label];
        if (filters.event?.length) f.event = [...filters.event];
        let stream: Readable;
        try {
          stream = (await engine.docker.getEvents({ filters: f, abortSignal: signal } as Docker.GetEventsOptions)) as Readable;
        } catch (err) {
          // A certificate problem is said in words (the node's state error); the rest as it was.
          throw tlsFailure(err) === undefined ? err : toClusterError(err, engine.node, undefined, "subscribe");
        }
        // An idle event stream carries no bytes for hours; TCP keep-alive is what notices a peer
        // that vanished without closing (unix sockets close with the engine).
        (stream as IncomingMessage).socket?.setKeepAlive?.(true, 30_000);
        return stream;
      },
      list: (label, signal) => this.listContainers(engine.node, { all: true, filters: label ? { label } : {}, signal }),
    };
  }

  private inspectRaw(ref: ContainerRef, op: string, options: CallOptions): Promise<Docker.ContainerInspectInfo> {
    return this.engine(ref.node, op).read({
      op,
      ref: ref.id,
      signal: options.signal,
      run: (d, signal) => d.getContainer(ref.id).inspect({ abortSignal: signal }),
    });
  }

  private engine(node: string, op: string): Engine {
    const e = this.engines.get(node);
    if (!e) throw new NotFoundError(`unknown node ${JSON.stringify(node)} (known: ${this.nodeNames.join(", ")})`, node, undefined, op, "node");
    return e;
  }
}

/** An image reference the engine can be asked about: not empty, no blanks, no query or path tricks. */
function checkImageReference(node: string, image: string, op: string): void {
  if (image === "" || /[\s?#]/.test(image) || image.startsWith("/") || image.includes("..")) {
    throw new InvalidRequestError(`not an image reference: ${JSON.stringify(image)}`, node, image, op);
  }
}
