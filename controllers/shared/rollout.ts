// The rollout step, one pod at a time: the decision shared by the PodGroup controller (a pod per
// instance, docs/podgroup-controller.md, "Spec update, step by step") and the Dependency controller
// (a pod per slot, docs/dependencies.md). Pure: no I/O, no clock of its own; the caller observes,
// calls planRollout(), then acts on the plan.
//
// The protocol, for a key K (an instance number, a slot key):
//   1. pick a key whose pod is stale (`pickNext`: the controller's own rule);
//   2. persist {key, toVersion, phase: "removing", at: now} BEFORE the old pod is touched
//      (`persistFirst`);
//   3. remove the old pod, then record {phase: "removed", at: now} (`stepRemoved`);
//   4. once `updateWaitMs` has passed since `at`, the caller deploys the new pod;
//   5. the new pod must pass `check` (the caller's runtime check); then the step is cleared and
//      the next key is picked in the same decision.
// A crash between 2 and 3 is safe: the next decision finds the old pod gone with the phase still
// "removing" and records "removed" at its own `now`, so the wait is never shorter than updateWaitMs.

/** The persisted step: which key is being replaced, to which version, and how far it got. */
export interface RolloutStep<K> {
  key: K;
  toVersion: number;
  /** "removing": the old pod is being removed; "removed": it is gone since `at` (wait, then deploy). */
  phase: "removing" | "removed";
  /** Wall-clock ms of the last phase change. */
  at: number;
}

/**
 * What the caller sees of the step's key right now:
 * - "unreachable": its node cannot be reached (what happens then: `onUnreachable`);
 * - "stale": its pod is there and must be replaced (older version, or due for a restart);
 * - "absent": no pod (removed; the new one is not deployed yet);
 * - "current": the new pod is there; `check` says whether the step is done.
 */
export type RolloutTarget = "unreachable" | "stale" | "absent" | "current";

/** The caller's verdict on a current pod: done, or not yet (and when to look again, or why it failed). */
export interface RolloutCheck {
  done: boolean;
  wakeAt?: number;
  failure?: string;
}

export interface RolloutInput<K> {
  /** The stored step; the caller passes undefined when its key no longer exists (scaled away, reclaimed). */
  step: RolloutStep<K> | undefined;
  /** The version the rollout goes to (a step of another toVersion is carried over to this one). */
  version: number;
  now: number;
  updateWaitMs: number;
  target: (key: K) => RolloutTarget;
  check: (key: K) => RolloutCheck;
  /**
   * A step whose key is unreachable: "hold" keeps it and does nothing else this pass (PodGroup: the
   * node is waited for); "setAside" drops it and picks the next key (Dependency: taken up again
   * once the node is back, as it is still stale).
   */
  onUnreachable: "hold" | "setAside";
  /** The next key to replace, or undefined: none is stale, or the caller's rule says not yet. */
  pickNext: () => K | undefined;
}

export interface RolloutPlan<K> {
  /** The step to store (undefined: no step in progress). */
  step: RolloutStep<K> | undefined;
  /** The key whose old pod is removed in this pass, if any. */
  remove?: K;
  /** The step must be persisted before anything is removed (a new step, or a stale pod back again). */
  persistFirst: boolean;
  /** A new step began (for `remove`): callers reset per-version bookkeeping of that key. */
  started: boolean;
  /** A stored step dropped because its key is unreachable (onUnreachable "setAside"). */
  setAside?: K;
  /** When the caller should look again (update wait over, runtime check due). */
  wakeAt?: number;
  /** The current pod failed its check: the rollout halts at this key. */
  failure?: string;
}

/** Decide the rollout step for this pass. */
export function planRollout<K>(input: RolloutInput<K>): RolloutPlan<K> {
  const { version, now, updateWaitMs } = input;
  let step = input.step && input.step.toVersion !== input.version ? { ...input.step, toVersion: version } : input.step;
  let setAside: K | undefined;
  if (step) {
    const target = input.target(step.key);
    if (target === "unreachable") {
      if (input.onUnreachable === "hold") return { step, persistFirst: false, started: false };
      setAside = step.key;
      step = undefined;
    } else if (target === "stale") {
      // "removing": the intent was persisted by an earlier pass. "removed": the old pod is back
      // (re-created behind our back): removed again, the intent persisted first.
      if (step.phase === "removing") return { step, remove: step.key, persistFirst: false, started: false };
      return { step: { ...step, phase: "removing", at: now }, remove: step.key, persistFirst: true, started: false };
    } else if (target === "absent") {
      // Removed before a crash, or behind our back: the wait starts now (never shorter).
      if (step.phase === "removing") step = { ...step, phase: "removed", at: now };
      const until = step.at + updateWaitMs;
      return { step, persistFirst: false, started: false, ...(now < until && { wakeAt: until }) };
    } else {
      const check = input.check(step.key);
      if (!check.done) {
        return {
          step,
          persistFirst: false,
          started: false,
          ...(check.wakeAt !== undefined && { wakeAt: check.wakeAt }),
          ...(check.failure !== undefined && { failure: check.failure }),
        };
      }
      step = undefined; // this key is done
    }
  }
  const next = input.pickNext();
  if (next === undefined) return { step: undefined, persistFirst: false, started: false, ...(setAside !== undefined && { setAside }) };
  return {
    step: { key: next, toVersion: version, phase: "removing", at: now },
    remove: next,
    persistFirst: true,
    started: true,
    ...(setAside !== undefined && { setAside }),
  };
}

/**
 * After the pass removed the step's old pod (`plan.remove`): the step as stored from now on
 * ({phase: "removed", at: now}), and when the update wait is over. A step not in "removing" is
 * returned unchanged.
 */
export function stepRemoved<K>(step: RolloutStep<K>, now: number, updateWaitMs: number): { step: RolloutStep<K>; wakeAt: number } {
  if (step.phase !== "removing") return { step, wakeAt: step.at + updateWaitMs };
  return { step: { ...step, phase: "removed", at: now }, wakeAt: now + updateWaitMs };
}

