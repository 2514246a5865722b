// What a controller reports and decides from a cached container, the same for every kind of pod.
// Pure.
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import type { ContainerStatus } from "../../api/resources/podgroup.ts";
import { currentFormat } from "./format.ts";

/** Data an inspect still has to fill in for this container (events carry no limits, ip or times). */
export function needsDetails(c: CachedContainer): boolean {
  if (c.limits === undefined || c.ip === undefined) return true;
  if (c.state === "running") return c.startedAt === undefined;
  if (c.state === "exited" || c.state === "dead") return c.exitCode === undefined || c.finishedAt === undefined;
  return false;
}

/** The status entry of one container; `format` is its io.capstan.format (shown only when older). */
export function containerStatus(c: CachedContainer, nodeIp: string, format: string): ContainerStatus {
  const s: ContainerStatus = { id: c.id, name: c.name, node: c.node, nodeIp, ip: c.ip ?? "", status: c.state };
  const port = c.ports.find((p) => p.hostPort !== undefined);
  if (port) {
    s.containerPort = port.containerPort;
    s.hostPort = port.hostPort;
  }
  if (c.state !== "running" && c.exitCode !== undefined) s.exitCode = c.exitCode;
  if (c.startedAt !== undefined) s.startedAt = new Date(c.startedAt).toISOString();
  if (format !== currentFormat) s.format = format;
  return s;
}

export type PodContainersState = "running" | "failed" | "exited" | "pending";

/** The state of a pod from its containers: all running; a failure; a clean exit; else pending (created, restarting, removing). */
export function podContainersState(cs: readonly CachedContainer[]): PodContainersState {
  if (cs.every((c) => c.state === "running")) return "running";
  if (cs.some((c) => c.state === "paused" || c.state === "dead" || (c.state === "exited" && c.exitCode !== 0))) return "failed";
  if (cs.some((c) => c.state === "exited")) return "exited";
  return "pending";
}

/** The lastError of a pod with a container paused behind Capstan's back (never unpaused for the user). */
export const pausedError = "paused behind Capstan's back; unpause it (docker unpause)";

/**
 * Why a pod that is not running cannot be (re)started now, if so: "busy" (the engine is restarting
 * or removing a container: look again in a second) or "paused" (pausedError); and its most recently
 * stopped (exited or dead) container, whose exit a restart back-off counts.
 */
export function stoppedPod(cs: readonly CachedContainer[]): { blocked?: "busy" | "paused"; lastStopped?: CachedContainer } {
  if (cs.some((c) => c.state === "restarting" || c.state === "removing")) return { blocked: "busy" };
  if (cs.some((c) => c.state === "paused")) return { blocked: "paused" };
  const stopped = cs.filter((c) => c.state === "exited" || c.state === "dead");
  if (stopped.length === 0) return {};
  return { lastStopped: stopped.reduce((a, b) => ((a.finishedAt ?? 0) >= (b.finishedAt ?? 0) ? a : b)) };
}
