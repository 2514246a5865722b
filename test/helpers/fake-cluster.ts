// An in-memory Cluster (adapters/cluster/cluster.ts) for tests of controllers: nodes, containers by
// name with labels and state, create/start/stop/remove/rename/inspect/listContainers/hasImage, and
// an event stream (a node event and a relist on subscribe and whenever a node comes back, then
// container events) that a real ContainerCache can follow. No engine, no timers of its own beyond
// setImmediate for event delivery; times come from `now`.
//
// Failure injection: every call is numbered (1, 2, ...; `calls` lists them). `interrupt()` runs a
// hook before or after the Nth call matching a filter: throw from it to fail the call (before:
// the call does nothing; after: the call took effect and its caller sees an error, as when an
// engine applies a write and the answer is lost), or use `crash()` to abort a reconcile there.
// `setReachable(node, false)` makes every call to the node fail with EngineUnavailableError and
// tells subscribers the node is unreachable; `true` brings it back with a relist.
import type {
  CallOptions,
  Cluster,
  ClusterEvent,
  ContainerDetails,
  ContainerRef,
  ContainerState,
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
} from "../../adapters/cluster/cluster.ts";
import { ConflictError, EngineUnavailableError, InvalidRequestError, NotFoundError } from "../../adapters/cluster/errors.ts";

export interface FakeNode {
  name: string;
  labels?: Record<string, string>;
  cpus?: number;
  memoryBytes?: number;
}

export interface FakeContainer {
  node: string;
  id: string;
  name: string;
  image: string;
  labels: Record<string, string>;
  state: ContainerState;
  exitCode: number | undefined;
  oomKilled: boolean;
  startedAt: number | undefined;
  finishedAt: number | undefined;
  created: number;
  spec: CreateSpec;
}

export type FakeMethod = "nodes" | "listContainers" | "create" | "start" | "stop" | "remove" | "rename" | "inspect" | "hasImage" | "pullImage";

/** Calls that change something on an engine. */
export const writeMethods: readonly FakeMethod[] = ["create", "start", "stop", "remove", "rename", "pullImage"];

export interface FakeCall {
  /** 1 for the first call made. */
  seq: number;
  method: FakeMethod;
  node: string | undefined;
  /** The container id or name the call names (the new name for create and rename). */
  ref: string | undefined;
}

export interface InterruptOptions {
  /** Count only calls of these methods (default: writeMethods). */
  methods?: readonly FakeMethod[];
  /** The Nth matching call, counted from when interrupt() is called (1 = the next one). */
  nth: number;
  /** Run the hook before the call (it then does nothing if the hook throws) or after it took effect. */
  when: "before" | "after";
  hook: (call: FakeCall) => void;
}

interface Subscriber {
  handler: EventHandler;
  options: SubscribeOptions | undefined;
}

interface Interrupt extends InterruptOptions {
  seen: number;
  done: boolean;
}

export interface FakeClusterOptions {
  nodes: (string | FakeNode)[];
  /** Wall clock for created/started/finished times (default Date.now). */
  now?: () => number;
  /** Images present on every node unless removeImage() says otherwise (default: any image). */
  images?: "any" | string[];
}

export class FakeCluster implements Cluster {
  readonly calls: FakeCall[] = [];
  private readonly nodeList: FakeNode[];
  private readonly reachable = new Map<string, boolean>();
  private readonly containers = new Map<string, Map<string, FakeContainer>>();
  private readonly images: Map<string, Set<string>> | undefined;
  private readonly subscribers = new Set<Subscriber>();
  private readonly interrupts: Interrupt[] = [];
  private readonly now: () => number;
  private seq = 0;
  private idSeq = 0;

  constructor(options: FakeClusterOptions) {
    this.nodeList = options.nodes.map((node) => (typeof node === "string" ? { name: node } : node));
    this.now = options.now ?? Date.now;
    for (const node of this.nodeList) {
      this.reachable.set(node.name, true);
      this.containers.set(node.name, new Map());
    }
    if (options.images !== undefined && options.images !== "any") {
      const images = options.images;
      this.images = new Map(this.nodeList.map((node) => [node.name, new Set(images)]));
    }
  }

  // ---- test controls ----------------------------------------------------------------------------

  /** Run `hook` before or after the Nth matching call from now on. */
  interrupt(options: InterruptOptions): void {
    this.interrupts.push({ ...options, seen: 0, done: false });
  }

  /** Clear every pending interrupt. */
  clearInterrupts(): void {
    this.interrupts.length = 0;
  }

  /** A hook for interrupt(): aborts `controller` (the reconcile's signal) and throws its reason, as a process dying there. */
  static crash(controller: AbortController): (call: FakeCall) => never {
    return (call) => {
      const reason = new Error(`crash at call ${call.seq} (${call.method} ${call.ref ?? ""} on ${call.node ?? "all nodes"})`);
      controller.abort(reason);
      throw reason;
    };
  }

  /** Every container on `node`, or on every node. */
  list(node?: string): FakeContainer[] {
    const nodes = node === undefined ? this.nodeList.map((nodeItem) => nodeItem.name) : [node];
    return nodes.flatMap((name) => [...(this.containers.get(name)?.values() ?? [])]);
  }

  /** A container by node and id or name. */
  find(node: string, ref: string): FakeContainer | undefined {
    const onNode = this.containers.get(node);
    if (!onNode) return undefined;
    return onNode.get(ref) ?? [...onNode.values()].find((container) => container.name === ref);
  }

  /**
   * Put a container there directly (made behind the controller's back), with its create (and
   * start) event unless `silent`: then only a list or inspect shows it, as when an event is lost.
   */
  add(node: string, name: string, over: Partial<Omit<FakeContainer, "node" | "name">> = {}, silent = false): FakeContainer {
    const container: FakeContainer = {
      node,
      id: over.id ?? this.newId(),
      name,
      image: over.image ?? "img",
      labels: over.labels ?? {},
      state: over.state ?? "created",
      exitCode: over.exitCode,
      oomKilled: over.oomKilled ?? false,
      startedAt: over.startedAt,
      finishedAt: over.finishedAt,
      created: over.created ?? this.now(),
      spec: over.spec ?? { image: over.image ?? "img", labels: over.labels ?? {} },
    };
    this.nodeMap(node).set(container.id, container);
    if (silent) return container;
    this.emitContainer(container, "create");
    if (container.state === "running") this.emitContainer(container, "start");
    return container;
  }

  /** The container's process ends (exit code), as a crash or a finished job: a die event. */
  exit(node: string, ref: string, exitCode: number): void {
    const container = this.mustFind(node, ref, "exit");
    container.state = "exited";
    container.exitCode = exitCode;
    container.finishedAt = this.now();
    this.emitContainer(container, "die", exitCode);
  }

  /** Remove a container behind the controller's back (docker rm -f): a destroy event. */
  destroy(node: string, ref: string): void {
    const container = this.mustFind(node, ref, "destroy");
    this.nodeMap(node).delete(container.id);
    this.emitContainer(container, "destroy");
  }

  /** Cut or restore a node: unreachable calls fail; subscribers see the node's state (and a relist when it is back). */
  setReachable(node: string, reachable: boolean): void {
    this.reachable.set(node, reachable);
    for (const subscriber of this.subscribers) {
      if (subscriber.options?.nodes && !subscriber.options.nodes.includes(node)) continue;
      this.deliver(subscriber, { type: "node", node, state: reachable ? "ready" : "unreachable" });
      if (reachable) this.deliver(subscriber, { type: "relist", node, containers: this.summaries(node, subscriber.options?.filters?.label) });
    }
  }

  /** The image is no longer on the node (only with an explicit image list). */
  removeImage(node: string, image: string): void {
    this.images?.get(node)?.delete(image);
  }

  // ---- Cluster ----------------------------------------------------------------------------------

  get nodeNames(): string[] {
    return this.nodeList.map((node) => node.name);
  }

  async nodes(options?: CallOptions): Promise<NodeResources[]> {
    return this.call("nodes", undefined, undefined, options, () =>
      this.nodeList.map((node) => {
        const up = this.reachable.get(node.name) === true;
        const all = this.list(node.name);
        return {
          name: node.name,
          endpoint: `fake://${node.name}`,
          address: "127.0.0.1",
          state: up ? "ready" : "unreachable",
          labels: { ...(node.labels ?? {}) },
          cpus: node.cpus ?? 8,
          memoryBytes: node.memoryBytes ?? 16 * 2 ** 30,
          containers: all.length,
          containersRunning: all.filter((container) => container.state === "running").length,
          engineVersion: "fake",
          ...(!up && { error: "unreachable (fake)" }),
        } satisfies NodeResources;
      }),
    );
  }

  async listContainers(node?: string, options?: ListOptions): Promise<ContainerSummary[]> {
    return this.call("listContainers", node, undefined, options, () => {
      const nodes = node === undefined ? this.nodeList.map((nodeItem) => nodeItem.name) : [node];
      for (const name of nodes) this.checkNode(name, "listContainers", undefined);
      return nodes.flatMap((name) =>
        this.summaries(name, options?.filters?.label).filter(
          (container) =>
            (options?.all === true || container.state === "running") &&
            (options?.filters?.name === undefined || options.filters.name.some((part) => container.name.includes(part))) &&
            (options?.filters?.status === undefined || options.filters.status.includes(container.state)) &&
            (options?.filters?.id === undefined || options.filters.id.some((id) => container.id.startsWith(id))),
        ),
      );
    });
  }

  async create(node: string, name: string, spec: CreateSpec, options?: CallOptions): Promise<ContainerRef> {
    return this.call("create", node, name, options, () => {
      this.checkNode(node, "create", name);
      if (!this.imagePresent(node, spec.image)) throw new NotFoundError(`no such image: ${spec.image}`, node, name, "create", "image");
      if (this.find(node, name)) throw new ConflictError(`the container name "/${name}" is already in use`, node, name, "create");
      const container: FakeContainer = {
        node,
        id: this.newId(),
        name,
        image: spec.image,
        labels: { ...(spec.labels ?? {}) },
        state: "created",
        exitCode: undefined,
        oomKilled: false,
        startedAt: undefined,
        finishedAt: undefined,
        created: this.now(),
        spec,
      };
      this.nodeMap(node).set(container.id, container);
      this.emitContainer(container, "create");
      return { node, id: container.id };
    });
  }

  async start(ref: ContainerRef, options?: CallOptions): Promise<void> {
    return this.call("start", ref.node, ref.id, options, () => {
      const container = this.mustFind(ref.node, ref.id, "start");
      if (container.state === "running") return;
      container.state = "running";
      container.exitCode = undefined;
      container.startedAt = this.now();
      container.finishedAt = undefined;
      this.emitContainer(container, "start");
    });
  }

  async stop(ref: ContainerRef, options?: StopOptions): Promise<void> {
    return this.call("stop", ref.node, ref.id, options, () => {
      const container = this.mustFind(ref.node, ref.id, "stop");
      if (container.state !== "running" && container.state !== "paused" && container.state !== "restarting") return;
      container.state = "exited";
      container.exitCode = 137;
      container.finishedAt = this.now();
      this.emitContainer(container, "die", 137);
    });
  }

  async inspect(ref: ContainerRef, options?: CallOptions): Promise<ContainerDetails> {
    return this.call("inspect", ref.node, ref.id, options, () => this.details(this.mustFind(ref.node, ref.id, "inspect")));
  }

  async remove(ref: ContainerRef, options?: RemoveOptions): Promise<void> {
    return this.call("remove", ref.node, ref.id, options, () => {
      const container = this.mustFind(ref.node, ref.id, "remove");
      if (container.state === "running" && options?.force !== true) {
        throw new ConflictError(`cannot remove a running container ${container.name}`, ref.node, ref.id, "remove");
      }
      if (container.state === "running") {
        container.state = "exited";
        container.exitCode = 137;
        container.finishedAt = this.now();
        this.emitContainer(container, "die", 137);
      }
      this.nodeMap(ref.node).delete(container.id);
      this.emitContainer(container, "destroy");
    });
  }

  async rename(ref: ContainerRef, newName: string, options?: CallOptions): Promise<void> {
    return this.call("rename", ref.node, newName, options, () => {
      const container = this.mustFind(ref.node, ref.id, "rename");
      const taken = this.find(ref.node, newName);
      if (taken && taken !== container) throw new ConflictError(`the container name "/${newName}" is already in use`, ref.node, ref.id, "rename");
      container.name = newName;
      this.emitContainer(container, "rename");
    });
  }

  subscribe(handler: EventHandler, options?: SubscribeOptions): Subscription {
    const subscriber: Subscriber = { handler, options };
    this.subscribers.add(subscriber);
    for (const node of this.nodeList) {
      if (options?.nodes && !options.nodes.includes(node.name)) continue;
      const up = this.reachable.get(node.name) === true;
      this.deliver(subscriber, { type: "node", node: node.name, state: up ? "ready" : "unreachable" });
      if (up) this.deliver(subscriber, { type: "relist", node: node.name, containers: this.summaries(node.name, options?.filters?.label) });
    }
    return {
      unsubscribe: async () => {
        this.subscribers.delete(subscriber);
      },
      badLines: 0,
      connects: 1,
    };
  }

  async networkInfo(ref: ContainerRef, options?: CallOptions): Promise<NetworkInfo> {
    this.mustFind(ref.node, ref.id, "networkInfo");
    options?.signal?.throwIfAborted();
    return { networkMode: "none", networks: [], ports: [], portBindings: [] };
  }

  async putArchive(ref: ContainerRef): Promise<void> {
    this.mustFind(ref.node, ref.id, "putArchive");
  }

  async hasImage(node: string, image: string, options?: CallOptions): Promise<boolean> {
    return this.call("hasImage", node, image, options, () => {
      this.checkNode(node, "hasImage", image);
      return this.imagePresent(node, image);
    });
  }

  async pullImage(node: string, image: string, options?: PullOptions): Promise<void> {
    return this.call("pullImage", node, image, options, () => {
      this.checkNode(node, "pullImage", image);
      this.images?.get(node)?.add(image);
    });
  }

  async logs(ref: ContainerRef, _options?: LogOptions): Promise<LogStream> {
    throw new InvalidRequestError("logs are not faked", ref.node, ref.id, "logs");
  }

  async exec(ref: ContainerRef, _options: ExecOptions): Promise<ExecSession> {
    throw new InvalidRequestError("exec is not faked", ref.node, ref.id, "exec");
  }

  // ---- internals --------------------------------------------------------------------------------

  private async call<T>(method: FakeMethod, node: string | undefined, ref: string | undefined, options: CallOptions | undefined, body: () => T): Promise<T> {
    options?.signal?.throwIfAborted();
    const call: FakeCall = { seq: ++this.seq, method, node, ref };
    this.calls.push(call);
    // Count the call for every interrupt it matches; the Nth one is the interrupt's call.
    const mine: Interrupt[] = [];
    for (const interrupt of this.interrupts) {
      if (interrupt.done || !(interrupt.methods ?? writeMethods).includes(method)) continue;
      if (++interrupt.seen === interrupt.nth) mine.push(interrupt);
    }
    for (const interrupt of mine) {
      if (interrupt.when !== "before") continue;
      interrupt.done = true;
      interrupt.hook(call);
    }
    const result = body();
    await Promise.resolve();
    for (const interrupt of mine) {
      if (interrupt.when !== "after") continue;
      interrupt.done = true;
      interrupt.hook(call);
    }
    return result;
  }

  private newId(): string {
    return `fake${String(++this.idSeq).padStart(8, "0")}`;
  }

  private nodeMap(node: string): Map<string, FakeContainer> {
    const onNode = this.containers.get(node);
    if (!onNode) throw new NotFoundError(`no node ${node}`, node, undefined, "node", "node");
    return onNode;
  }

  private checkNode(node: string, op: string, ref: string | undefined): void {
    if (!this.containers.has(node)) throw new NotFoundError(`no node ${node}`, node, ref, op, "node");
    if (this.reachable.get(node) !== true) throw new EngineUnavailableError(`node ${node} is unreachable (fake)`, node, ref, op, false);
  }

  private mustFind(node: string, ref: string, op: string): FakeContainer {
    this.checkNode(node, op, ref);
    const container = this.find(node, ref);
    if (!container) throw new NotFoundError(`no such container: ${ref}`, node, ref, op, "container");
    return container;
  }

  private imagePresent(node: string, image: string): boolean {
    return this.images === undefined || this.images.get(node)?.has(image) === true;
  }

  private summaries(node: string, labelFilter: string[] | undefined): ContainerSummary[] {
    return this.list(node)
      .filter((container) => matchesLabels(container.labels, labelFilter))
      .map((container) => ({
        node: container.node,
        id: container.id,
        name: container.name,
        image: container.image,
        imageId: `sha256:${container.image}`,
        command: "",
        created: container.created,
        state: container.state,
        status: container.state === "exited" ? `Exited (${container.exitCode ?? 0}) 1 second ago` : container.state === "running" ? "Up 1 second" : "Created",
        labels: { ...container.labels },
        networkMode: "none",
        ports: [],
      }));
  }

  private details(container: FakeContainer): ContainerDetails {
    return {
      node: container.node,
      id: container.id,
      name: container.name,
      image: container.image,
      imageId: `sha256:${container.image}`,
      created: container.created,
      status: {
        state: container.state,
        running: container.state === "running",
        paused: container.state === "paused",
        restarting: container.state === "restarting",
        oomKilled: container.oomKilled,
        dead: container.state === "dead",
        pid: container.state === "running" ? 1 : 0,
        exitCode: container.exitCode ?? 0,
        error: "",
        startedAt: container.startedAt,
        finishedAt: container.finishedAt,
      },
      restartCount: 0,
      labels: { ...container.labels },
      env: [...(container.spec.env ?? [])],
      cmd: [...(container.spec.cmd ?? [])],
      entrypoint: [...(container.spec.entrypoint ?? [])],
      user: container.spec.user ?? "",
      workingDir: container.spec.workingDir ?? "",
      memoryBytes: container.spec.memoryBytes ?? 0,
      nanoCpus: container.spec.nanoCpus ?? 0,
      binds: [...(container.spec.binds ?? [])],
      restartPolicy: container.spec.restartPolicy ?? { name: "no" },
      logConfig: { type: container.spec.logConfig?.type ?? "json-file", config: { ...(container.spec.logConfig?.config ?? {}) } },
      network: { networkMode: "none", networks: [], ports: [], portBindings: [] },
    };
  }

  private emitContainer(container: FakeContainer, action: string, exitCode?: number): void {
    if (this.reachable.get(container.node) !== true) return;
    const event: ClusterEvent = { type: "container", node: container.node, action, id: container.id, name: container.name, labels: { ...container.labels }, exitCode, time: this.now() };
    for (const subscriber of this.subscribers) {
      if (subscriber.options?.nodes && !subscriber.options.nodes.includes(container.node)) continue;
      if (!matchesLabels(container.labels, subscriber.options?.filters?.label)) continue;
      if (subscriber.options?.filters?.event && !subscriber.options.filters.event.includes(action)) continue;
      this.deliver(subscriber, event);
    }
  }

  /** Events arrive after the call that caused them has answered, as from a real event stream. */
  private deliver(subscriber: Subscriber, event: ClusterEvent): void {
    setImmediate(() => {
      if (this.subscribers.has(subscriber)) subscriber.handler(event);
    });
  }
}

function matchesLabels(labels: Record<string, string>, filter: readonly string[] | undefined): boolean {
  if (!filter) return true;
  return filter.every((entry) => {
    const eq = entry.indexOf("=");
    if (eq < 0) return labels[entry] !== undefined;
    return labels[entry.slice(0, eq)] === entry.slice(eq + 1);
  });
}
