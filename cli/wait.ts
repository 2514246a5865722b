// `-wait`: poll GET until a group has converged to what the command asked for, or has failed, or
// the time is up, printing a progress line whenever the picture changes.
//
// Converged means what `kubectl rollout status` means: the server holds the requested spec, and
// exactly spec.numInstances pods exist, each running at the spec's version. The API answers from
// the store (the controller's status lags the spec it reads), so a stale picture never counts:
// old-version pods and a count that differs are "not yet", and a spec that does not yet match the
// request (the API's cache may lag its own write by a moment) is "not yet" too.
//
// Failed means no amount of waiting will help: the controller marked the group failed, or a pod at
// the current version failed, or one exited and its restart policy will not start it again.
import { isCurrentInstance, type PodGroupWithSpec, type PodSpec, type PodStatus, type RestartPolicy } from "../api/resources/podgroup.ts";
import type { OrchestratorClient } from "./client.ts";
import { ApiError } from "./http-errors.ts";
import { formatDuration } from "../runtime/duration.ts";
import { samePodSpec } from "./spec-match.ts";

export type WaitTarget =
  /** Running as requested; the fields given must match the server's spec. */
  | { kind: "converged"; name: string; numInstances?: number; restartPolicy?: RestartPolicy; pod?: PodSpec }
  /** Gone (GET answers 404). */
  | { kind: "deleted"; name: string };

export type Verdict = { status: "done" | "failed" | "progress"; message: string };

/** Where `group` (undefined: 404) stands with respect to `target`. Pure. */
export function assess(group: PodGroupWithSpec | undefined, target: WaitTarget): Verdict {
  const name = target.name;
  if (target.kind === "deleted") {
    if (!group) return { status: "done", message: `${name}: deleted` };
    return { status: "progress", message: `${name}: removing, ${plural(group.pods.length, "instance")} left` };
  }
  if (!group) return { status: "progress", message: `${name}: waiting for the server to record the group` };
  const spec = group.spec;
  if (spec.deleting || group.state === "removing") return { status: "failed", message: `${name}: the group is being deleted` };
  const recorded =
    (target.numInstances === undefined || spec.numInstances === target.numInstances) &&
    (target.restartPolicy === undefined || spec.restartPolicy === target.restartPolicy) &&
    (target.pod === undefined || samePodSpec(spec.pod, target.pod, spec.name));
  if (!recorded) return { status: "progress", message: `${name}: waiting for the server to record the change` };

  // Instances 1..desired are wanted; any other is on its way out (scale-down removes the highest first).
  const version = spec.pod.version;
  const desired = spec.numInstances;
  const wanted = group.pods.filter((p) => isCurrentInstance(p.instanceNo, desired));
  const failure = failureOf(group, wanted, spec.restartPolicy);
  if (failure) return { status: "failed", message: `${name}: failed: ${failure}` };

  const running = wanted.filter((p) => p.version === version && p.state === "running").length;
  if (running === desired && group.pods.length === desired) {
    return { status: "done", message: `${name}: ${desired}/${desired} running at version ${version}` };
  }
  const others = new Map<string, number>();
  const count = (label: string, n = 1) => others.set(label, (others.get(label) ?? 0) + n);
  for (const p of group.pods) {
    if (!isCurrentInstance(p.instanceNo, desired)) count("to remove");
    else if (p.version !== version) count(`${p.state} at old version ${p.version}`);
    else if (p.state !== "running") count(p.state);
  }
  if (desired > wanted.length) count("not created", desired - wanted.length);
  const parts = [`${running}/${desired} running`, ...[...others].map(([label, n]) => `${n} ${label}`)];
  return { status: "progress", message: `${name}: ${parts.join(", ")}${group.state ? ` (${group.state})` : ""}` };
}

function failureOf(group: PodGroupWithSpec, wanted: PodStatus[], policy: RestartPolicy): string | undefined {
  const version = group.spec.pod.version;
  const current = wanted.filter((p) => p.version === version);
  for (const p of current) {
    if (p.state === "failed") return `instance ${p.instanceNo}: ${p.lastError || "failed"}`;
    if (p.state === "exited") {
      const codes = p.containers.map((c) => c.exitCode ?? 0);
      const failedRun = codes.some((c) => c !== 0);
      // "onfail" restarts only a non-zero exit; "never" nothing. Such a pod stays down for good.
      if (policy === "never" || (policy === "onfail" && !failedRun)) {
        const how = `exited with code ${codes.join(",") || "?"}`;
        return `instance ${p.instanceNo} ${how} and restart policy "${policy}" does not restart it${p.lastError ? `: ${p.lastError}` : ""}`;
      }
    }
  }
  // A failed state carried over from pods of an older version is about those; the rollout may fix it.
  if (group.state === "failed" && group.pods.every((p) => p.version === version)) {
    const podError = current.find((p) => p.lastError)?.lastError;
    return group.lastError || podError || "the controller marked the group failed";
  }
  return undefined;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

export interface WaitOptions {
  timeoutMs: number;
  /** Between polls (default 1 s). */
  intervalMs?: number;
  /** Progress lines go here. */
  print: (line: string) => void;
}

/**
 * Poll until every target is done (true), one has failed or the time is up (false). Errors of a
 * poll (server restarting, a timeout) are shown and polling goes on: only the deadline ends a wait.
 */
export async function waitFor(client: OrchestratorClient, targets: WaitTarget[], opts: WaitOptions): Promise<boolean> {
  const deadline = Date.now() + opts.timeoutMs;
  const intervalMs = opts.intervalMs ?? 1_000;
  for (const target of targets) {
    let last = "";
    for (;;) {
      let line: string;
      let verdict: Verdict | undefined;
      try {
        verdict = assess(await fetchGroup(client, target.name), target);
        line = verdict.message;
      } catch (e) {
        line = `${target.name}: ${e instanceof ApiError ? e.describe() : (e as Error).message} (retrying)`;
      }
      if (line !== last) opts.print(line);
      last = line;
      if (verdict?.status === "done") break;
      if (verdict?.status === "failed") return false;
      if (Date.now() + intervalMs > deadline) {
        opts.print(`${target.name}: gave up after ${formatDuration(opts.timeoutMs)} (-timeout)`);
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
  return true;
}

async function fetchGroup(client: OrchestratorClient, name: string): Promise<PodGroupWithSpec | undefined> {
  try {
    return await client.getPodGroup(name);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}
