// What one pass does for one slot's pod (the rows "refresh, ..." of the operations table in
// docs/dependencies.md), as a plain function of what is observed and remembered. No I/O.
//
//   node unreachable                          nothing (D4)
//   extras (duplicates, older copies)         removed first (D2)
//   the rollout's slot, in its update wait    nothing until the wait is over (D3)
//   no pod                                    deployed, unless a failed deploy's back-off runs
//   pod at the spec's version, incomplete     its missing containers created
//   pod running                               nothing; a back-off record is cleared (the failure
//                                             count only after resetAfterMs of running)
//   a container restarting or being removed   looked at again in a second
//   a container paused behind our back        reported, never unpaused
//   dead or exited                            restarted, always, after the back-off
import type { CachedContainer } from "../../adapters/cluster/container-cache.ts";
import type { RestartBackoff } from "../shared/backoff.ts";
import { pausedError, stoppedPod } from "../shared/containers.ts";
import { exitObservation } from "../shared/exit-observation.ts";
import { countExit } from "../shared/restart.ts";
import { podComplete, podContainers, podRunning, type SlotView } from "./observe.ts";
import type { RolloutStep, SlotMemory } from "./stored.ts";

/** The engine is busy with a container (restarting, removing): looked at again after this long. */
export const busyRecheckMs = 1_000;

export interface SlotInput {
  slot: string;
  /** The spec's version and how many containers its pod has. */
  version: number;
  podSize: number;
  /** Whether the slot's node is reachable. */
  reachable: boolean;
  /** The slot's containers as observed (undefined: none). */
  view: SlotView | undefined;
  /** The rollout step in force after this pass's rollout decision. */
  rollout: RolloutStep | undefined;
  /** The slot's restart and back-off record. */
  memory: SlotMemory;
  now: number;
  updateWaitMs: number;
  backoff: RestartBackoff;
}

export type SlotAction =
  | { kind: "none" }
  /** Nothing before `until` (a back-off, the engine busy). */
  | { kind: "wait"; until: number }
  /** Create (or adopt) containers `indexes`, then start the pod. */
  | { kind: "deploy"; indexes: number[] }
  /** Start the pod's stopped containers; on success the record becomes `started`. */
  | { kind: "start"; restart: boolean; started: SlotMemory };

export interface SlotPlan {
  /** Containers removed before anything else (D2). */
  removeExtras: CachedContainer[];
  /** The slot's record from now on, when it changes before the action. */
  memory?: SlotMemory;
  action: SlotAction;
}

const nothing: SlotAction = { kind: "none" };

export function planSlot(input: SlotInput): SlotPlan {
  const { view, memory, now } = input;
  if (!input.reachable) return { removeExtras: [], action: nothing }; // D4
  const removeExtras = (view?.extras ?? []).map((extra) => extra.container);
  const kept = view?.kept;
  const step = input.rollout;
  if (step?.slot === input.slot && !kept && now < step.at + input.updateWaitMs) return { removeExtras, action: nothing }; // D3: the wait
  const all = Array.from({ length: input.podSize }, (_, index) => index);
  if (!kept) {
    if (memory.nextDeployAt !== undefined && now < memory.nextDeployAt) return { removeExtras, action: { kind: "wait", until: memory.nextDeployAt } };
    return { removeExtras, action: { kind: "deploy", indexes: all } };
  }
  if (kept.version === input.version && !podComplete(kept, input.podSize)) {
    return { removeExtras, action: { kind: "deploy", indexes: all.filter((index) => !kept.containers.has(index)) } };
  }
  if (podRunning(kept)) {
    if (!(memory.lastError !== undefined || memory.failures > 0 || memory.nextAttemptAt !== undefined)) return { removeExtras, action: nothing };
    // Running again: the back-off starts over only after a long enough run (resetAfterMs).
    const since = Math.max(...podContainers(kept).map((observed) => observed.container.startedAt ?? now));
    const ranLongEnough = now - since >= input.backoff.resetAfterMs;
    const { lastError: _error, nextAttemptAt: _attempt, nextDeployAt: _deploy, ...rest } = memory;
    return { removeExtras, memory: ranLongEnough ? { ...rest, failures: 0 } : rest, action: nothing };
  }
  const { blocked, lastStopped } = stoppedPod(podContainers(kept).map((observed) => observed.container));
  if (blocked === "busy") return { removeExtras, action: { kind: "wait", until: now + busyRecheckMs } };
  if (blocked === "paused") return { removeExtras, memory: { ...memory, lastError: pausedError }, action: nothing };
  // Dead or exited: restarted, always (a dependency has no restart policy), with back-off.
  const next = lastStopped ? countExit(memory, exitObservation(lastStopped, memory.restarts), "always", now, input.backoff) : memory;
  const changed = next !== memory ? { memory: next } : {};
  if (next.nextAttemptAt !== undefined && now < next.nextAttemptAt) return { removeExtras, ...changed, action: { kind: "wait", until: next.nextAttemptAt } };
  const restart = lastStopped !== undefined;
  return { removeExtras, ...changed, action: { kind: "start", restart, started: { ...next, restarts: next.restarts + (restart ? 1 : 0) } } };
}
