// The cluster contract: exactly the cluster-manager capabilities of docs/cluster.md, "Capabilities"
// (node resources; list containers with all/size/filters; create, start, stop with timeout, inspect,
// remove with force and volumes, rename; events subscribe/unsubscribe; network info; env patch, the
// latter a pure function in env.ts; image presence and pull), plus container logs and exec, addressed per
// node. Controllers program against this interface and these shapes, never against dockerode's
// types: one implementation (DockerCluster) speaks the Docker Engine API, and tests of pure logic
// can stand in their own.
//
// Every call is bounded: it takes an optional AbortSignal and the implementation applies its own
// per-call timeout on top (see DockerClusterOptions). Errors are the typed errors of errors.ts.
import type { LogFrame } from "./logs.ts";

export type { LogFrame, LogStreamName } from "./logs.ts";

/** A container on a node. `id` is the engine's container id or the container's name. */
export interface ContainerRef {
  node: string;
  id: string;
}

export type ContainerState = "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead";

export type NodeState = "ready" | "unreachable";

/** One node (Docker engine) with its resources, as its engine reports them. */
export interface NodeResources {
  name: string;
  endpoint: string;
  /** Address other hosts reach the node's published ports at: the tcp host, 127.0.0.1 for a unix socket. */
  address: string;
  state: NodeState;
  /** Engine labels (`dockerd --label k=v`), the `label:` placement filters match these. */
  labels: Record<string, string>;
  cpus: number;
  memoryBytes: number;
  /** Containers on the engine (all states), and how many of them run. */
  containers: number;
  containersRunning: number;
  engineVersion: string;
  /** Why the node is unreachable (only then). */
  error?: string;
}

export interface CallOptions {
  /** Aborts the call (and its wait for a write slot); the call rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface ListFilters {
  /** `key` (label present) or `key=value`; several are ANDed by the engine. */
  label?: string[];
  /** Substring match on the container name, as the engine does it. */
  name?: string[];
  status?: ContainerState[];
  id?: string[];
}

export interface ListOptions extends CallOptions {
  /** Include containers that are not running (default false, as in the engine). */
  all?: boolean;
  /** Report sizeRw and sizeRootFs (costs the engine a disk walk per container). */
  size?: boolean;
  filters?: ListFilters;
}

export interface PublishedPort {
  containerPort: number;
  protocol: "tcp" | "udp" | "sctp";
  /** Empty when the port is exposed but not published. */
  hostIp: string;
  hostPort: number | undefined;
}

export interface ContainerSummary extends ContainerRef {
  name: string;
  image: string;
  imageId: string;
  command: string;
  /** Creation time, milliseconds since the epoch. */
  created: number;
  state: ContainerState;
  /** The engine's human status line, e.g. "Up 3 minutes", "Exited (0) 2 seconds ago". */
  status: string;
  labels: Record<string, string>;
  networkMode: string;
  ports: PublishedPort[];
  /** Only with `size: true`. */
  sizeRw?: number;
  sizeRootFs?: number;
}

export interface PortRequest {
  containerPort: number;
  protocol?: "tcp" | "udp" | "sctp";
  /** Host port to publish on; omitted = the engine picks one. */
  hostPort?: number;
  hostIp?: string;
}

export interface RestartPolicy {
  name: "no" | "always" | "unless-stopped" | "on-failure";
  maximumRetryCount?: number;
}

/** What a container is created from. Maps onto the Docker create body (mapping.ts). */
export interface CreateSpec {
  image: string;
  cmd?: string[];
  entrypoint?: string[];
  /** `KEY=value` entries. */
  env?: string[];
  labels?: Record<string, string>;
  user?: string;
  workingDir?: string;
  hostname?: string;
  /** Memory limit in bytes (0 or absent = none). */
  memoryBytes?: number;
  /** CPU limit in 1e-9 CPUs (1e9 = one CPU; 0 or absent = none). */
  nanoCpus?: number;
  /** `host-path:container-path[:ro]` or `volume:container-path[:ro]`. */
  binds?: string[];
  /** Engine network mode; absent = the engine's default. Tests run with "none". */
  networkMode?: string;
  /**
   * Default `{name: "no"}`: the reconciler, not the engine, restarts Capstan's containers, so that
   * a crash is seen, counted and backed off in one place instead of racing the engine's own loop.
   */
  restartPolicy?: RestartPolicy;
  /** Ports to expose and publish. */
  expose?: PortRequest[];
  logConfig?: { type: string; config?: Record<string, string> };
  stopSignal?: string;
  /** Seconds the engine waits after stopSignal before SIGKILL when no stop timeout is given. */
  stopTimeoutSeconds?: number;
  /** Give the container a terminal: its stdout and stderr become one raw stream (see logs). */
  tty?: boolean;
}

export interface NetworkAttachment {
  name: string;
  networkId: string;
  ipAddress: string;
  ipPrefixLen: number;
  gateway: string;
  macAddress: string;
  aliases: string[];
}

/** A container's network view: the networks it is on and its ports. */
export interface NetworkInfo {
  networkMode: string;
  networks: NetworkAttachment[];
  /** Ports the engine actually published (empty while the container is not running). */
  ports: PublishedPort[];
  /** Port bindings the container was created with. */
  portBindings: PublishedPort[];
}

export interface ContainerStatus {
  state: ContainerState;
  running: boolean;
  paused: boolean;
  restarting: boolean;
  oomKilled: boolean;
  dead: boolean;
  pid: number;
  exitCode: number;
  error: string;
  /** Milliseconds since the epoch; undefined when it never started / never finished. */
  startedAt: number | undefined;
  finishedAt: number | undefined;
}

export interface ContainerDetails extends ContainerRef {
  name: string;
  image: string;
  imageId: string;
  created: number;
  status: ContainerStatus;
  restartCount: number;
  labels: Record<string, string>;
  env: string[];
  cmd: string[];
  entrypoint: string[];
  user: string;
  workingDir: string;
  memoryBytes: number;
  nanoCpus: number;
  binds: string[];
  restartPolicy: RestartPolicy;
  logConfig: { type: string; config: Record<string, string> };
  network: NetworkInfo;
}

export interface StopOptions extends CallOptions {
  /** Seconds to wait after the stop signal before SIGKILL; absent = the container's own default. */
  timeoutSeconds?: number;
}

export interface RemoveOptions extends CallOptions {
  /** Kill a running container first. */
  force?: boolean;
  /** Also remove the container's anonymous volumes. */
  volumes?: boolean;
}

/** A container event from an engine's event stream. */
export interface ContainerEvent {
  type: "container";
  node: string;
  /** Engine action: "create", "start", "die", "destroy", "rename", "exec_start: ...", ... */
  action: string;
  id: string;
  name: string;
  labels: Record<string, string>;
  /** On "die". */
  exitCode: number | undefined;
  /** Milliseconds since the epoch (engine clock). */
  time: number;
}

/**
 * Emitted after every (re)connect of a node's stream, before that stream's events: the node's
 * containers (all states, narrowed by the subscription's label filter) as they are now. Whatever
 * happened while the stream was down is visible here; consumers treat it as the truth for the node
 * and events as hints that something changed since.
 */
export interface RelistEvent {
  type: "relist";
  node: string;
  containers: ContainerSummary[];
}

/** The subscription's view of a node changed: its stream is up (ready) or it cannot be reached. */
export interface NodeStateEvent {
  type: "node";
  node: string;
  state: NodeState;
  error?: string;
}

export type ClusterEvent = ContainerEvent | RelistEvent | NodeStateEvent;

export interface EventFilters {
  /** `key` or `key=value`, e.g. "io.capstan.format" to see only Capstan's containers. */
  label?: string[];
  /** Actions to deliver, e.g. ["start", "die", "destroy"]; absent = all. */
  event?: string[];
}

export interface SubscribeOptions {
  filters?: EventFilters;
  /** Nodes to watch; absent = all. */
  nodes?: string[];
}

export interface Subscription {
  /** Stops every stream and reconnect; resolves once they are all down. Idempotent. */
  unsubscribe(): Promise<void>;
  /** Lines of the event streams that were not valid events (skipped, never fatal). */
  readonly badLines: number;
  /** Stream (re)connections made so far, over all nodes. */
  readonly connects: number;
}

export type EventHandler = (event: ClusterEvent) => void;

/**
 * Registry credentials for a pull, as the engine takes them (its X-Registry-Auth header): a
 * registry bearer token only. The engine sends it as `Authorization: Bearer` to the registry itself
 * and never to a token realm (docker's `registrytoken`), so whoever answers at the registry's
 * address (on a remote engine, `127.0.0.1:5000` is that node's own loopback) can at most see a
 * short-lived token that pulls one repository. A username and password are not accepted, on
 * purpose: the engine would send them to whatever realm a 401 from the registry's address names.
 */
export interface RegistryAuth {
  /** A registry JWT (distribution's token auth), scoped to pull the image's repository. */
  registrytoken: string;
  /** The registry, `host[:port]`, e.g. "127.0.0.1:5000". */
  serveraddress: string;
}

/** How far a pull has come, summed over the image's layers as the engine reports them. */
export interface PullProgress {
  /** Bytes downloaded so far, over the layers whose size the engine reported. */
  currentBytes: number;
  /** Their total size (0 until the engine reported one: then no percentage can be told). */
  totalBytes: number;
  /** Layers the engine named, and those done (downloaded, or already there). */
  layers: number;
  layersDone: number;
  /** The engine's last status line, e.g. "Downloading", "Extracting", "Pulling fs layer". */
  status: string;
}

export interface PullOptions extends CallOptions {
  /** Credentials for the image's registry; absent = an anonymous pull. */
  auth?: RegistryAuth;
  /** Called on every progress line of the engine (often: keep it cheap). */
  onProgress?: (progress: PullProgress) => void;
  /** Overrides the pull timeout (DockerClusterOptions.pullTimeoutMs). */
  timeoutMs?: number;
}

export interface LogOptions extends CallOptions {
  /**
   * Keep the stream open and deliver new output as it is written, until the container stops or the
   * signal aborts. Such a stream has no overall timeout; only opening it is bounded.
   */
  follow?: boolean;
  /** Only the last `tail` lines the engine holds (stdout and stderr together); absent = all. */
  tail?: number;
  /** Only output written at or after this time: milliseconds since the epoch (fractions kept to the microsecond). */
  since?: number;
  /** Only output written before this time: milliseconds since the epoch (the engine's `until`). */
  until?: number;
  /**
   * Each message starts with the engine's time of it and a space: RFC 3339 in UTC with nine
   * fractional digits ("2026-11-23T01:05:11.768123456Z "). Without a TTY every frame is one message.
   */
  timestamps?: boolean;
  /** Which streams to read (default both; at least one). */
  stdout?: boolean;
  stderr?: boolean;
  /** Overrides the whole-read timeout of a stream without follow (DockerClusterOptions.logsTimeoutMs). */
  timeoutMs?: number;
}

/**
 * A container's log, read once: each item is the frames of one chunk the engine sent. Iterate it
 * to the end, break out of the loop, or abort the call's signal: each of them closes the engine's
 * stream (a follow stream stays open otherwise). Breaking out or aborting ends it at once, even
 * while a follow stream is waiting for output. A failure while reading is a typed error of
 * errors.ts (an abort rejects with the signal's reason).
 */
export interface LogStream extends AsyncIterable<LogFrame[]> {
  /** The container has a TTY: one raw stream, every frame "stdout", chunk boundaries arbitrary. */
  readonly tty: boolean;
}

export interface ExecOptions extends CallOptions {
  /** The command and its arguments, run as given (no shell); at least the command. */
  cmd: string[];
  /** Run it on a terminal (a pseudo-TTY): its output is one raw stream, and resize() applies. */
  tty?: boolean;
  /** Attach its standard input: write() and end() reach it. */
  stdin?: boolean;
  /** The user (name or uid[:gid]) to run it as; the container's own user when absent. */
  user?: string;
}

/**
 * A command running in a container (Cluster.exec), over one connection to its engine. Read the
 * output to its end for the exit code. close() when done or when the client goes: it ends the
 * connection and makes sure the process (and what it started) no longer runs.
 */
export interface ExecSession {
  /** The engine's exec id. */
  readonly id: string;
  readonly tty: boolean;
  /**
   * The process's output as the engine sends it: stdout and stderr apart without a TTY, one raw
   * "stdout" with one. Read once; it ends when the process has closed its output. A failure is a
   * typed error of errors.ts; after close() it ends quietly.
   */
  readonly output: AsyncIterable<LogFrame[]>;
  /** Writes to the process's stdin (only with `stdin`); resolves once handed to the connection. */
  write(data: Uint8Array): Promise<void>;
  /** Closes the process's stdin (with a TTY: types the terminal's EOF, Ctrl-D). Idempotent. */
  end(): Promise<void>;
  /** Sets the terminal's size (only with `tty`; otherwise nothing happens). */
  resize(cols: number, rows: number, options?: CallOptions): Promise<void>;
  /** The exit code: once the output has ended and the engine reports the process gone. */
  readonly exitCode: Promise<number>;
  /**
   * Ends the session: closes the connection, and if the process still runs, kills it and every
   * process it started; resolves once the engine reports it gone (rejects when that could not be
   * made sure). Idempotent.
   */
  close(): Promise<void>;
}

export interface Cluster {
  /** The nodes' names, in cluster spec order: from the spec, no engine call. */
  readonly nodeNames: readonly string[];
  /** Node resources of every node, in cluster spec order; an unreachable node is reported as such. */
  nodes(options?: CallOptions): Promise<NodeResources[]>;
  /**
   * Containers of one node, or of every node (in spec order) when `node` is absent; each summary
   * names its node. Across nodes, fails with the first node's error if any node fails: a partial
   * list would read as "those containers are gone". Callers that tolerate a down node list per node.
   */
  listContainers(node?: string, options?: ListOptions): Promise<ContainerSummary[]>;
  /** Creates (does not start) a container named `name`; ConflictError if the name is taken. */
  create(node: string, name: string, spec: CreateSpec, options?: CallOptions): Promise<ContainerRef>;
  /** Starts; already running counts as success. */
  start(ref: ContainerRef, options?: CallOptions): Promise<void>;
  /** Stops; already stopped counts as success. */
  stop(ref: ContainerRef, options?: StopOptions): Promise<void>;
  inspect(ref: ContainerRef, options?: CallOptions): Promise<ContainerDetails>;
  remove(ref: ContainerRef, options?: RemoveOptions): Promise<void>;
  rename(ref: ContainerRef, newName: string, options?: CallOptions): Promise<void>;
  /** Watches the nodes' container events; see RelistEvent for what a consumer can rely on. */
  subscribe(handler: EventHandler, options?: SubscribeOptions): Subscription;
  networkInfo(ref: ContainerRef, options?: CallOptions): Promise<NetworkInfo>;
  /**
   * Extracts a tar archive into the container's filesystem at directory `path` (which must exist
   * in the container), created or running alike (the engine's PUT /containers/{id}/archive).
   * Entries are owned by root unless the archive's ids are mapped; missing parent directories of
   * an entry are created by the engine (root, 0755); an existing file is replaced, an existing
   * directory never is (InvalidRequestError).
   */
  putArchive(ref: ContainerRef, path: string, archive: Buffer, options?: CallOptions): Promise<void>;
  /** Whether the node's engine has `image` (a reference as a create names it); a read. */
  hasImage(node: string, image: string, options?: CallOptions): Promise<boolean>;
  /**
   * Pulls `image` onto the node (the engine's POST /images/create), always: callers check
   * hasImage first. A pull is a write: it holds one of the node's write slots for its whole
   * length, and is bounded by the pull timeout (long: minutes) and the caller's signal. A
   * reference without a tag or digest pulls `:latest`, never every tag. The registry's refusal
   * (unknown repository or tag, unauthorized) is the error's message, with the image and node.
   */
  pullImage(node: string, image: string, options?: PullOptions): Promise<void>;
  /**
   * Opens the container's log (the engine's GET /containers/{id}/logs): resolves once the engine
   * answered, within the read timeout, with its frames demultiplexed (stdout and stderr told apart
   * unless the container has a TTY). NotFoundError when there is no such container. Without
   * `follow`, the whole read is bounded by the logs timeout; with it, only the opening is, and the
   * stream lasts until the container stops, the consumer stops, or the signal aborts.
   */
  logs(ref: ContainerRef, options?: LogOptions): Promise<LogStream>;
  /**
   * Runs a command in a running container (the engine's exec): resolves once it started, with its
   * session. NotFoundError when there is no such container, ConflictError when it is not running.
   * Creating and starting are bounded by the write timeout; the session lasts until the command
   * ends or close().
   */
  exec(ref: ContainerRef, options: ExecOptions): Promise<ExecSession>;
}
