// Translation between Capstan's cluster shapes (cluster.ts) and Docker Engine API bodies. Pure
// functions: the only place that knows Docker's field names, so the rest of the code base never
// sees a dockerode type. Input checks live here too, so that bad input fails before any call.
import type Docker from "dockerode";
import type {
  ContainerDetails,
  ContainerState,
  ContainerSummary,
  CreateSpec,
  ListFilters,
  NetworkInfo,
  NodeResources,
  PublishedPort,
  RestartPolicy,
} from "./cluster.ts";
import { InvalidRequestError } from "./errors.ts";
import type { ClusterEndpoint } from "./spec.ts";

/** Docker's own rule for container names (daemon/names.go); at least two characters. */
const containerName = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

export function checkContainerName(node: string, name: string, op: string): void {
  if (!containerName.test(name)) {
    throw new InvalidRequestError(
      `container name ${JSON.stringify(name)} must match ${containerName.source}`,
      node,
      name,
      op,
    );
  }
}

const protocols = new Set(["tcp", "udp", "sctp"]);

/** The Docker create body for `spec` (the name travels in the query, not here). */
export function toCreateBody(node: string, name: string, spec: CreateSpec): Docker.ContainerCreateOptions {
  const bad = (what: string) => new InvalidRequestError(`create ${name}: ${what}`, node, name, "create");
  if (typeof spec.image !== "string" || spec.image.trim() === "") throw bad("image is required");
  for (const [field, v] of [
    ["memoryBytes", spec.memoryBytes],
    ["nanoCpus", spec.nanoCpus],
    ["stopTimeoutSeconds", spec.stopTimeoutSeconds],
  ] as const) {
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 0)) throw bad(`${field} must be a non-negative integer`);
  }
  for (const e of spec.env ?? []) {
    if (typeof e !== "string" || e === "" || e.startsWith("=")) throw bad(`env entry ${JSON.stringify(e)} is not KEY=value`);
  }
  for (const [k, v] of Object.entries(spec.labels ?? {})) {
    if (k === "" || typeof v !== "string") throw bad(`label ${JSON.stringify(k)} needs a non-empty key and a string value`);
  }

  const exposed: Record<string, object> = {};
  const bindings: Record<string, { HostIp?: string; HostPort?: string }[]> = {};
  for (const p of spec.expose ?? []) {
    const protocol = p.protocol ?? "tcp";
    if (!isPort(p.containerPort)) throw bad(`containerPort ${p.containerPort} is not a port number`);
    if (p.hostPort !== undefined && !isPort(p.hostPort)) throw bad(`hostPort ${p.hostPort} is not a port number`);
    if (!protocols.has(protocol)) throw bad(`protocol ${JSON.stringify(protocol)} is not tcp, udp or sctp`);
    const key = `${p.containerPort}/${protocol}`;
    exposed[key] = {};
    (bindings[key] ??= []).push({
      HostIp: p.hostIp ?? "",
      HostPort: p.hostPort === undefined ? "" : String(p.hostPort),
    });
  }

  const restart = spec.restartPolicy ?? { name: "no" };
  const hostConfig: Docker.HostConfig = {
    RestartPolicy: { Name: restart.name, MaximumRetryCount: restart.maximumRetryCount ?? 0 },
  };
  if (spec.memoryBytes) hostConfig.Memory = spec.memoryBytes;
  if (spec.nanoCpus) hostConfig.NanoCpus = spec.nanoCpus;
  if (spec.binds?.length) hostConfig.Binds = [...spec.binds];
  if (spec.networkMode !== undefined) hostConfig.NetworkMode = spec.networkMode;
  if (spec.expose?.length) hostConfig.PortBindings = bindings;
  if (spec.logConfig) hostConfig.LogConfig = { Type: spec.logConfig.type, Config: { ...spec.logConfig.config } };

  const body: Docker.ContainerCreateOptions = { Image: spec.image, HostConfig: hostConfig };
  if (spec.cmd) body.Cmd = [...spec.cmd];
  if (spec.entrypoint) body.Entrypoint = [...spec.entrypoint];
  if (spec.env) body.Env = [...spec.env];
  if (spec.labels) body.Labels = { ...spec.labels };
  if (spec.user !== undefined) body.User = spec.user;
  if (spec.workingDir !== undefined) body.WorkingDir = spec.workingDir;
  if (spec.hostname !== undefined) body.Hostname = spec.hostname;
  if (spec.stopSignal !== undefined) body.StopSignal = spec.stopSignal;
  if (spec.stopTimeoutSeconds !== undefined) body.StopTimeout = spec.stopTimeoutSeconds;
  if (spec.expose?.length) body.ExposedPorts = exposed;
  if (spec.tty) body.Tty = true;
  return body;
}

function isPort(n: unknown): n is number {
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 65535;
}

/** Docker list filters: a map of name to values (the modem JSON-encodes it into the query). */
export function toDockerFilters(f: ListFilters | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (f?.label?.length) out.label = [...f.label];
  if (f?.name?.length) out.name = [...f.name];
  if (f?.status?.length) out.status = [...f.status];
  if (f?.id?.length) out.id = [...f.id];
  return out;
}

/** `sized`: the list asked for sizes (the engine omits a zero size, we report it as 0). */
export function toSummary(
  node: string,
  c: Docker.ContainerInfo & { SizeRw?: number; SizeRootFs?: number },
  sized = false,
): ContainerSummary {
  const s: ContainerSummary = {
    node,
    id: c.Id,
    name: stripSlash(c.Names?.[0] ?? ""),
    image: c.Image,
    imageId: c.ImageID,
    command: c.Command,
    created: c.Created * 1000,
    state: c.State as ContainerState,
    status: c.Status,
    labels: c.Labels ?? {},
    networkMode: c.HostConfig?.NetworkMode ?? "",
    ports: (c.Ports ?? []).map((p) => ({
      containerPort: p.PrivatePort,
      protocol: p.Type as PublishedPort["protocol"],
      hostIp: p.IP ?? "",
      hostPort: p.PublicPort || undefined,
    })),
  };
  if (sized) {
    s.sizeRw = c.SizeRw ?? 0;
    s.sizeRootFs = c.SizeRootFs ?? 0;
  }
  return s;
}

export function toDetails(node: string, i: Docker.ContainerInspectInfo): ContainerDetails {
  const hc = i.HostConfig ?? {};
  const entrypoint = i.Config.Entrypoint;
  return {
    node,
    id: i.Id,
    name: stripSlash(i.Name),
    image: i.Config.Image,
    imageId: i.Image,
    created: Date.parse(i.Created),
    status: {
      state: i.State.Status as ContainerState,
      running: i.State.Running,
      paused: i.State.Paused,
      restarting: i.State.Restarting,
      oomKilled: i.State.OOMKilled,
      dead: i.State.Dead,
      pid: i.State.Pid,
      exitCode: i.State.ExitCode,
      error: i.State.Error,
      startedAt: engineTime(i.State.StartedAt),
      finishedAt: engineTime(i.State.FinishedAt),
    },
    restartCount: i.RestartCount,
    labels: i.Config.Labels ?? {},
    env: i.Config.Env ?? [],
    cmd: i.Config.Cmd ?? [],
    entrypoint: entrypoint === undefined || entrypoint === null ? [] : typeof entrypoint === "string" ? [entrypoint] : entrypoint,
    user: i.Config.User ?? "",
    workingDir: i.Config.WorkingDir ?? "",
    memoryBytes: hc.Memory ?? 0,
    nanoCpus: hc.NanoCpus ?? 0,
    binds: hc.Binds ?? [],
    restartPolicy: {
      name: (hc.RestartPolicy?.Name || "no") as RestartPolicy["name"],
      maximumRetryCount: hc.RestartPolicy?.MaximumRetryCount ?? 0,
    },
    logConfig: { type: hc.LogConfig?.Type ?? "", config: hc.LogConfig?.Config ?? {} },
    network: toNetworkInfo(i),
  };
}

export function toNetworkInfo(i: Docker.ContainerInspectInfo): NetworkInfo {
  return {
    networkMode: i.HostConfig?.NetworkMode ?? "",
    networks: Object.entries(i.NetworkSettings?.Networks ?? {}).map(([name, n]) => ({
      name,
      networkId: n.NetworkID ?? "",
      ipAddress: n.IPAddress ?? "",
      ipPrefixLen: n.IPPrefixLen ?? 0,
      gateway: n.Gateway ?? "",
      macAddress: n.MacAddress ?? "",
      aliases: (n.Aliases as string[] | null) ?? [],
    })),
    ports: fromPortMap(i.NetworkSettings?.Ports),
    portBindings: fromPortMap(i.HostConfig?.PortBindings as Docker.PortMap | undefined),
  };
}

/** `{"8080/tcp": [{HostIp, HostPort}]}` (null value = exposed, not published) to a flat list. */
function fromPortMap(map: Record<string, { HostIp?: string; HostPort?: string }[] | null> | undefined): PublishedPort[] {
  const out: PublishedPort[] = [];
  for (const [key, binds] of Object.entries(map ?? {})) {
    const [port, proto] = key.split("/");
    const base = { containerPort: Number(port), protocol: (proto ?? "tcp") as PublishedPort["protocol"] };
    if (!binds?.length) {
      out.push({ ...base, hostIp: "", hostPort: undefined });
      continue;
    }
    for (const b of binds) {
      out.push({ ...base, hostIp: b.HostIp ?? "", hostPort: b.HostPort ? Number(b.HostPort) : undefined });
    }
  }
  return out;
}

/** The subset of GET /info the adapter reads. */
export interface EngineInfo {
  NCPU?: number;
  MemTotal?: number;
  Containers?: number;
  ContainersRunning?: number;
  ServerVersion?: string;
  Labels?: string[];
}

export function toNodeResources(ep: ClusterEndpoint, info: EngineInfo): NodeResources {
  return {
    name: ep.name,
    endpoint: ep.endpoint,
    address: nodeAddress(ep),
    state: "ready",
    labels: parseEngineLabels(info.Labels ?? []),
    cpus: info.NCPU ?? 0,
    memoryBytes: info.MemTotal ?? 0,
    containers: info.Containers ?? 0,
    containersRunning: info.ContainersRunning ?? 0,
    engineVersion: info.ServerVersion ?? "",
  };
}

export function unreachableNode(ep: ClusterEndpoint, error: string): NodeResources {
  return {
    name: ep.name,
    endpoint: ep.endpoint,
    address: nodeAddress(ep),
    state: "unreachable",
    labels: {},
    cpus: 0,
    memoryBytes: 0,
    containers: 0,
    containersRunning: 0,
    engineVersion: "",
    error,
  };
}

/** A unix socket means the engine runs on this host. */
function nodeAddress(ep: ClusterEndpoint): string {
  return ep.transport.kind === "tcp" ? ep.transport.host : "127.0.0.1";
}

/** Engine labels come as `k=v` strings; a bare `k` is a label with an empty value. */
function parseEngineLabels(list: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const l of list) {
    const eq = l.indexOf("=");
    if (eq < 0) out[l] = "";
    else out[l.slice(0, eq)] = l.slice(eq + 1);
  }
  return out;
}

function stripSlash(name: string): string {
  return name.startsWith("/") ? name.slice(1) : name;
}

/** Docker's zero time ("0001-01-01T00:00:00Z") means "never". */
function engineTime(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const t = Date.parse(s);
  return Number.isNaN(t) || t <= 0 ? undefined : t;
}
