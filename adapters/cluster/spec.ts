// The `-cluster` option: one or more Docker endpoints, comma-separated, each optionally named
// (`n1=unix:///var/run/docker.sock,n2=tcp://10.0.0.2:2376`). Each endpoint is one node. Unnamed
// endpoints are named by their position (`node1`, `node2`, ...), so the same option always yields
// the same names: node names end up in container placement and in status, they must be stable.
//
// Remote engines speak mutual TLS. When TLS client material is given (DockerClusterOptions.tls, the
// CLI's -docker-tls-ca/-cert/-key), every `tcp://` endpoint uses it (default port 2376);
// `https://host[:port]` asks for TLS explicitly and `http://host[:port]` for plain TCP on that one
// node. Plain TCP (no encryption, no authentication: anyone who reaches the port owns the engine)
// is accepted only to a loopback address (127.0.0.0/8, ::1, localhost).
import { isLoopbackHost } from "../../runtime/loopback.ts";

export class ClusterSpecError extends Error {
  override readonly name = "ClusterSpecError";
}

export type Transport =
  | { kind: "unix"; socketPath: string }
  | { kind: "tcp"; host: string; port: number; tls: boolean };

export interface ClusterSpecOptions {
  /** TLS client material is available: `tcp://` endpoints use TLS. Default false. */
  tls?: boolean;
}

export interface ClusterEndpoint {
  /** Node name, unique within the cluster. */
  name: string;
  /** The endpoint as normalized: `unix:///path`, `tcp://host:port` (plain) or `https://host:port` (TLS). */
  endpoint: string;
  transport: Transport;
}

const nodeName = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const namedEntry = /^([^=/:]+)=(.*)$/;
const defaultTcpPort = 2375;
const defaultTlsPort = 2376;
const tlsOptionsHint = "give -docker-tls-ca, -docker-tls-cert and -docker-tls-key (DockerClusterOptions.tls) to use mutual TLS";

export function parseClusterSpec(spec: string, options: ClusterSpecOptions = {}): ClusterEndpoint[] {
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
    const transport = parseEndpoint(raw, where, options.tls ?? false);
    checkTransport(transport, options.tls ?? false, where);
    out.push({ name, endpoint: formatTransport(transport), transport });
  });
  return out;
}

function parseEndpoint(raw: string, where: string, tlsAvailable: boolean): Transport {
  if (raw === "") throw new ClusterSpecError(`${where}: endpoint is empty`);
  const scheme = /^([a-z0-9+.-]+):\/\//i.exec(raw)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    throw new ClusterSpecError(`${where}: endpoint needs a scheme, unix:///path/to/docker.sock, tcp://host:port or https://host:port`);
  }
  if (scheme === "unix") {
    const socketPath = raw.slice("unix://".length);
    if (!socketPath.startsWith("/")) {
      throw new ClusterSpecError(`${where}: unix endpoint needs an absolute socket path (unix:///var/run/docker.sock)`);
    }
    return { kind: "unix", socketPath };
  }
  if (scheme === "tcp" || scheme === "http" || scheme === "https") {
    // tcp:// follows the TLS material; http:// is plain and https:// is TLS whatever is given.
    const tls = scheme === "https" || (scheme === "tcp" && tlsAvailable);
    const authority = raw.slice(scheme.length + 3);
    let url: URL;
    try {
      url = new URL(`http://${authority}`);
    } catch {
      throw new ClusterSpecError(`${where}: ${JSON.stringify(raw)} is not a valid tcp://host:port address`);
    }
    if (url.hostname === "" || (url.pathname !== "/" && url.pathname !== "") || url.search || url.hash || url.username || url.password) {
      throw new ClusterSpecError(`${where}: tcp endpoint must be just tcp://host:port`);
    }
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    // URL drops an explicit :80 (http's default port): take it back from the text.
    const explicitPort = url.port !== "" ? url.port : /:(\d+)\/?$/.exec(authority)?.[1];
    const port = explicitPort === undefined ? (tls ? defaultTlsPort : defaultTcpPort) : Number(explicitPort);
    return { kind: "tcp", host, port, tls };
  }
  if (scheme === "ssh" || scheme === "npipe") {
    throw new ClusterSpecError(`${where}: ${scheme}:// endpoints are not supported; use unix://, tcp:// or https://`);
  }
  throw new ClusterSpecError(`${where}: unknown scheme ${scheme}://; use unix://, tcp:// or https://`);
}

/**
 * The security rules of an endpoint: a TLS endpoint needs the TLS material, and plain TCP is only
 * for a loopback address. `where` starts the message. Also checked when a DockerCluster is built
 * from endpoints made by hand.
 */
export function checkTransport(t: Transport, tlsAvailable: boolean, where: string): void {
  if (t.kind !== "tcp") return;
  if (t.tls && !tlsAvailable) {
    throw new ClusterSpecError(`${where}: ${formatTransport(t)} is a TLS endpoint but no TLS client material was given; ${tlsOptionsHint}`);
  }
  if (!t.tls && !isLoopbackHost(t.host)) {
    throw new ClusterSpecError(
      `${where}: plain tcp:// to ${t.host} is refused: an unencrypted, unauthenticated Docker API is only accepted on a loopback address ` +
        `(127.0.0.0/8, ::1, localhost); ${tlsOptionsHint}`,
    );
  }
}

function formatTransport(t: Transport): string {
  if (t.kind === "unix") return `unix://${t.socketPath}`;
  return `${t.tls ? "https" : "tcp"}://${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port}`;
}
