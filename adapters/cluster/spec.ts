// The `-cluster` option: one or more Docker endpoints, comma-separated, each optionally named
// (`n1=unix:///var/run/docker.sock,n2=tcp://10.0.0.2:2375`). Each endpoint is one node. Unnamed
// endpoints are named by their position (`node1`, `node2`, ...), so the same option always yields
// the same names: node names end up in container placement and in status, they must be stable.

export class ClusterSpecError extends Error {
  override readonly name = "ClusterSpecError";
}

export type Transport =
  | { kind: "unix"; socketPath: string }
  | { kind: "tcp"; host: string; port: number };

export interface ClusterEndpoint {
  /** Node name, unique within the cluster. */
  name: string;
  /** The endpoint as normalized: `unix:///path` or `tcp://host:port`. */
  endpoint: string;
  transport: Transport;
}

const nodeName = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const namedEntry = /^([^=/:]+)=(.*)$/;
const defaultTcpPort = 2375;

export function parseClusterSpec(spec: string): ClusterEndpoint[] {
  if (spec.trim() === "") throw new ClusterSpecError("cluster spec is empty: give at least one Docker endpoint");
  const entries = spec.split(",").map((e) => e.trim());
  const out: ClusterEndpoint[] = [];
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    const where = `cluster spec entry ${i + 1} (${JSON.stringify(entry)})`;
    if (entry === "") throw new ClusterSpecError(`${where} is empty (stray comma?)`);
    const named = namedEntry.exec(entry);
    const name = named ? named[1]!.trim() : `node${i + 1}`;
    const raw = named ? named[2]!.trim() : entry;
    if (!nodeName.test(name)) {
      throw new ClusterSpecError(`${where}: node name ${JSON.stringify(name)} must match ${nodeName.source}`);
    }
    if (seen.has(name)) throw new ClusterSpecError(`${where}: node name ${JSON.stringify(name)} is used twice`);
    seen.add(name);
    const transport = parseEndpoint(raw, where);
    out.push({ name, endpoint: formatTransport(transport), transport });
  });
  return out;
}

function parseEndpoint(raw: string, where: string): Transport {
  if (raw === "") throw new ClusterSpecError(`${where}: endpoint is empty`);
  const scheme = /^([a-z0-9+.-]+):\/\//i.exec(raw)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    throw new ClusterSpecError(`${where}: endpoint needs a scheme, unix:///path/to/docker.sock or tcp://host:port`);
  }
  if (scheme === "unix") {
    const socketPath = raw.slice("unix://".length);
    if (!socketPath.startsWith("/")) {
      throw new ClusterSpecError(`${where}: unix endpoint needs an absolute socket path (unix:///var/run/docker.sock)`);
    }
    return { kind: "unix", socketPath };
  }
  if (scheme === "tcp" || scheme === "http") {
    let url: URL;
    try {
      url = new URL(`http://${raw.slice(scheme.length + 3)}`);
    } catch {
      throw new ClusterSpecError(`${where}: ${JSON.stringify(raw)} is not a valid tcp://host:port address`);
    }
    if (url.hostname === "" || (url.pathname !== "/" && url.pathname !== "") || url.search || url.username) {
      throw new ClusterSpecError(`${where}: tcp endpoint must be just tcp://host:port`);
    }
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    return { kind: "tcp", host, port: url.port === "" ? defaultTcpPort : Number(url.port) };
  }
  if (scheme === "https" || scheme === "ssh" || scheme === "npipe") {
    throw new ClusterSpecError(`${where}: ${scheme}:// endpoints are not supported; use unix:// or tcp://`);
  }
  throw new ClusterSpecError(`${where}: unknown scheme ${scheme}://; use unix:// or tcp://`);
}

function formatTransport(t: Transport): string {
  if (t.kind === "unix") return `unix://${t.socketPath}`;
  return `tcp://${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port}`;
}
