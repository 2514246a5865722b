// Host access is an admin's decision (docs/security.md, "Host access"), in the manner of
// Kubernetes' Pod Security "baseline" level. A pure check of a PodSpec: which of its fields reach
// the host, and whether this caller may use them.
//
//   field                              non-admin                               admin
//   containers[].systemVolumes          exactly <allowed>/<namespace>, for an   any path
//     (host bind mounts)                allowed path of -allowed-host-paths
//   ... naming an engine socket (Docker  never                                   never
//     or containerd), a directory that
//     holds one, or anything in /proc
//     (/proc/1/root is the host's /)
//
// Why exactly <allowed>/<namespace> and nothing below it: the engine follows symlinks in a bind's
// source. A container that may write below an allowed directory can plant `x -> /` there, and a
// second bind of `<allowed>/<ns>/x` would mount the host's root. The app's own directory itself
// cannot be replaced from inside it, and one app never sees another's.
//   pod.network                         absent, "", none, bridge, default       any
//     (host, container:<id>, named networks reach the host or other tenants)
//   containers[].logConfig.type         absent, json-file, local, none          any
//     (syslog, journald, gelf, fluentd, ... make the engine write to the host or the network)
//
// Nothing else in a PodSpec reaches the host: Capstan has no privileged flag, capabilities,
// devices, host PID/IPC or sysctls to set, and named volumes are Docker volumes, never host paths.
import { posix } from "node:path";
import type { ErrorDetail } from "../http/index.ts";
import { forbidden } from "../http/index.ts";
import type { Principal } from "./principal.ts";

export interface HostAccessPolicy {
  /** Host directories a non-admin may bind-mount (and anything below them); normalised, absolute. */
  allowedHostPaths: readonly string[];
  /** Docker sockets no one may mount (the defaults plus every unix:// engine of -cluster). */
  dockerSockets: readonly string[];
}

/**
 * The sockets refused on every node, whatever -cluster says: Docker's, and containerd's (the
 * system one, and the one dockerd runs under /run/docker); either starts a root container on the
 * host.
 */
export const defaultDockerSockets = [
  "/var/run/docker.sock",
  "/run/docker.sock",
  "/var/run/containerd/containerd.sock",
  "/run/containerd/containerd.sock",
  "/var/run/docker/containerd/containerd.sock",
  "/run/docker/containerd/containerd.sock",
] as const;

/** Host trees no one mounts: /proc/<pid>/root reaches the host's root and its sockets. */
const neverTrees = ["/proc"];

export function hostAccessPolicy(allowedHostPaths: readonly string[] = [], extraSockets: readonly string[] = []): HostAccessPolicy {
  return {
    allowedHostPaths: allowedHostPaths.map((p) => normaliseHostPath(p)),
    dockerSockets: [...new Set([...defaultDockerSockets, ...extraSockets.map((p) => normaliseHostPath(p))])],
  };
}

/** "/data/" -> "/data", "/a//b/./c" -> "/a/b/c". Relative paths are not host paths. */
export function normaliseHostPath(path: string): string {
  if (!path.startsWith("/")) throw new RangeError(`host path ${JSON.stringify(path)} must be absolute`);
  const n = posix.normalize(path);
  return n.length > 1 && n.endsWith("/") ? n.slice(0, -1) : n;
}

/** `inner` is `outer` or below it, segment-wise ("/data2" is not under "/data"). */
export function isUnder(inner: string, outer: string): boolean {
  return inner === outer || outer === "/" || inner.startsWith(`${outer}/`);
}

const openNetworks = new Set(["", "none", "bridge", "default"]);
const openLogDrivers = new Set(["json-file", "local", "none"]);

interface PodShape {
  /** The app the pod belongs to: a non-admin's binds are <allowed>/<namespace>. */
  namespace: string;
  network?: string | undefined;
  containers: { systemVolumes?: string[] | undefined; logConfig?: { type: string } | undefined }[];
}

export interface HostAccessFinding extends ErrorDetail {
  /** Refused for everyone, admins included (the Docker socket). */
  never: boolean;
}

/** Every field of `pod` that reaches the host; `prefix` is where the pod sits in the body ("pod."). */
export function hostAccessOf(pod: PodShape, policy: HostAccessPolicy, prefix = ""): HostAccessFinding[] {
  const out: HostAccessFinding[] = [];
  if (pod.network !== undefined && !openNetworks.has(pod.network)) {
    out.push({ path: `${prefix}network`, message: `network ${JSON.stringify(pod.network)} reaches the host or other apps' containers`, never: false });
  }
  pod.containers.forEach((c, i) => {
    (c.systemVolumes ?? []).forEach((bind, j) => {
      const path = `${prefix}containers[${i}].systemVolumes[${j}]`;
      const host = normaliseHostPath(bind.slice(0, bind.indexOf(":")));
      const socket = policy.dockerSockets.find((s) => isUnder(s, host));
      const tree = neverTrees.find((t) => isUnder(host, t));
      if (socket !== undefined) {
        out.push({ path, message: `${host} ${host === socket ? "is" : "holds"} the engine socket ${socket}, which is never mountable`, never: true });
      } else if (tree !== undefined) {
        out.push({ path, message: `${host} is in ${tree}, which is never mountable (${tree}/1/root is the host's root)`, never: true });
      } else if (!policy.allowedHostPaths.some((allowed) => host === `${allowed}/${pod.namespace}`)) {
        const allowed =
          policy.allowedHostPaths.length > 0
            ? `not one of the host paths app ${pod.namespace} may mount (${policy.allowedHostPaths.map((a) => `${a}/${pod.namespace}`).join(", ")})`
            : "a host path, and no host path is allowed (-allowed-host-paths)";
        out.push({ path, message: `${host} is ${allowed}`, never: false });
      }
    });
    const driver = c.logConfig?.type;
    if (driver !== undefined && !openLogDrivers.has(driver)) {
      out.push({ path: `${prefix}containers[${i}].logConfig.type`, message: `log driver ${JSON.stringify(driver)} writes outside the container's own log`, never: false });
    }
  });
  return out;
}

/** Throws 403 naming every field `who` may not use; the Docker socket is refused even for an admin. */
export function requireHostAccess(who: Principal, pod: PodShape, policy: HostAccessPolicy, prefix = ""): void {
  const findings = hostAccessOf(pod, policy, prefix);
  const refused = who.role === "admin" ? findings.filter((f) => f.never) : findings;
  if (refused.length === 0) return;
  const details = refused.map(({ path, message }) => ({ path, message }));
  const first = refused[0]!;
  if (refused.every((f) => f.never)) throw forbidden(`${first.path}: ${first.message}`, "never allowed", details);
  throw forbidden(`host access is an admin's decision: ${first.path}: ${first.message}`, "admin (host access)", details);
}
