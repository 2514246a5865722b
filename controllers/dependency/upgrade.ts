// The upgrade step of one pass (D3; docs/dependencies.md, the UpdateSpec row and "A pod whose node
// is unreachable"): the shared one-at-a-time protocol (controllers/shared/rollout.ts) with the
// Dependency controller's rules. No I/O.
//
// - A pod needs the step when it runs another version than the spec's or an older data format.
// - A step whose slot is gone from the records or is being reclaimed is dropped.
// - A step whose node is unreachable is set aside: the next pod is upgraded meanwhile, and the
//   set-aside one is taken up again once its node is back (it is still stale, or missing).
// - The new pod is done once complete and running.
// - The next pod is chosen among the reachable stale pods in slot key order, a pod that is down
//   first (replacing it costs no availability).
import { planRollout, stepRemoved, type RolloutPlan, type RolloutStep as SharedStep } from "../shared/rollout.ts";
import { parseSlotKey } from "./naming.ts";
import { podComplete, podRunning, podStale, type DependencyView } from "./observe.ts";
import type { RolloutStep } from "./stored.ts";

export interface UpgradeInput {
  /** The stored step. */
  step: RolloutStep | undefined;
  version: number;
  podSize: number;
  /** The slots the pass keeps a record of, in key order. */
  slots: readonly string[];
  /** Slots being reclaimed in this pass. */
  reclaiming: ReadonlySet<string>;
  view: DependencyView;
  reachable: (node: string) => boolean;
  now: number;
  updateWaitMs: number;
}

export interface UpgradePlan {
  /** The step to keep from now on (undefined: none in progress). */
  step: RolloutStep | undefined;
  /** The slot whose old pod this pass removes. */
  remove?: string;
  /** Write the status (the step) before anything is removed. */
  persistFirst: boolean;
  /** A new step began at `remove`: its restart record starts over. */
  started: boolean;
  /** The stored step's slot, dropped because its node is unreachable. */
  setAside?: string;
  /** When to look again (the update wait is over). */
  wakeAt?: number;
}

export function planUpgrade(input: UpgradeInput): UpgradePlan {
  const { version, view, reachable } = input;
  const stored = input.step;
  const kept = (slot: string) => view.slots.get(slot)?.kept;
  const live = stored && input.slots.includes(stored.slot) && !input.reclaiming.has(stored.slot) ? stored : undefined;
  const plan: RolloutPlan<string> = planRollout<string>({
    step: live && toShared(live),
    version,
    now: input.now,
    updateWaitMs: input.updateWaitMs,
    target: (slot) => {
      if (!reachable(parseSlotKey(slot).node)) return "unreachable";
      const pod = kept(slot);
      if (!pod) return "absent";
      return podStale(pod, version) ? "stale" : "current";
    },
    check: (slot) => {
      const pod = kept(slot)!;
      return { done: podRunning(pod) && podComplete(pod, input.podSize) };
    },
    onUnreachable: "setAside",
    pickNext: () => {
      const stale = input.slots.filter((slot) => {
        const pod = kept(slot);
        return !input.reclaiming.has(slot) && pod !== undefined && podStale(pod, version) && reachable(parseSlotKey(slot).node);
      });
      // A pod that is down anyway goes first: replacing it costs no availability.
      return stale.find((slot) => !podRunning(kept(slot)!)) ?? stale[0];
    },
  });
  return {
    step: plan.step && fromShared(plan.step),
    persistFirst: plan.persistFirst,
    started: plan.started,
    ...(plan.remove !== undefined && { remove: plan.remove }),
    ...(plan.setAside !== undefined && { setAside: plan.setAside }),
    ...(plan.wakeAt !== undefined && { wakeAt: plan.wakeAt }),
  };
}

/**
 * After the pass removed the old pod of `step` (D3): the step as stored from now on ({phase:
 * "removed", at: now}) and when the update wait is over.
 */
export function upgradeStepRemoved(step: RolloutStep, now: number, updateWaitMs: number): { step: RolloutStep; wakeAt: number } {
  const removed = stepRemoved(toShared(step), now, updateWaitMs);
  return { step: fromShared(removed.step), wakeAt: removed.wakeAt };
}

/** The stored step names its key `slot` (status.internal.rollout.slot); the shared protocol's is `key`. */
function toShared(step: RolloutStep): SharedStep<string> {
  return { key: step.slot, toVersion: step.toVersion, phase: step.phase, at: step.at };
}

function fromShared(step: SharedStep<string>): RolloutStep {
  return { slot: step.key, toVersion: step.toVersion, phase: step.phase, at: step.at };
}
