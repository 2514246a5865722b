// The spec-update step of a PodGroup (R2, R3; docs/podgroup-controller.md, "Spec update, step by
// step" and "Rolling restart"): the shared protocol of controllers/shared/rollout.ts with the
// PodGroup's own rules plugged in: a step whose node is unreachable waits for it (R5); the runtime
// check; the next instance is the lowest stale one (the highest while a pod of the group is
// numbered from 0: see pickNext), taken only when it is down anyway or every other instance runs
// (R3); a step that replaces a pod of the current version is a restart (its halt says so). Pure:
// the pass persists the step when `persistFirst` says so, then removes `remove`.
import { instanceNumbers, isCurrentInstance } from "../../api/resources/podgroup.ts";
import { planRollout, stepRemoved, type RolloutCheck } from "../shared/rollout.ts";
import type { DriftMove, RolloutStep, StoredPodGroup } from "./stored.ts";
import { numberedFromZero } from "./naming.ts";
import { podComplete, podContainers, podRunning, type GroupView, type PodCandidate } from "./observe.ts";

/** Shortest run that counts as "started" in a spec update's runtime check. */
export const runtimeCheckMinMs = 1_000;

export interface PodGroupRolloutInput {
  spec: StoredPodGroup;
  view: GroupView;
  /** The stored step (status.internal.rollout). */
  step: RolloutStep | undefined;
  /** Instances moving for a drift task: never picked. */
  moving: ReadonlyMap<number, DriftMove>;
  reachable: (node: string) => boolean;
  now: number;
  updateWaitMs: number;
}

export interface PodGroupRolloutPlan {
  /** The step to store in status.internal.rollout. */
  step: RolloutStep | undefined;
  /** The instance whose old pod is removed (and kept as the previous one) in this pass. */
  remove?: number;
  /** R2: write the status (with `step`) before removing anything. */
  persistFirst: boolean;
  /** A new step began at `remove`: its instance record starts over (restarts and back-off are per version). */
  started: boolean;
  wakeAt?: number;
  /** The rollout halted: the group's lastError. */
  halted?: string;
}

/**
 * A pod is current when it runs the spec's version and was created under the spec's restartedAt,
 * and none of its containers reads its instance from its name (a container of the 0-based
 * numbering without an instance label: it is never renamed, so it holds the name of the instance
 * one below its own; docs/podgroup-controller.md, "Instance numbers").
 */
export function podCurrent(spec: StoredPodGroup, pod: PodCandidate): boolean {
  if (podContainers(pod).some((observed) => observed.id.instanceFromName)) return false;
  return pod.version === spec.pod.version && pod.restartedAt === (spec.restartedAt ?? "");
}

/** Whether any pod of the group was created under the 0-based numbering (numberedFromZero of its labels). */
export function anyNumberedFromZero(view: GroupView): boolean {
  for (const instanceView of view.instances.values()) {
    if (instanceView.kept && podContainers(instanceView.kept).some((observed) => numberedFromZero(observed.c.labels))) return true;
  }
  return false;
}

/** The rollout step of this pass: what to persist, which instance's old pod to remove, when to look again, a halt. */
export function planPodGroupRollout(input: PodGroupRolloutInput): PodGroupRolloutPlan {
  const { spec, view, moving, reachable, now } = input;
  const numInstances = spec.numInstances;
  const version = spec.pod.version;
  const stored = input.step && isCurrentInstance(input.step.instance, numInstances) ? input.step : undefined;
  const kept = (instance: number) => view.instances.get(instance)?.kept;
  const available = (instance: number): boolean => {
    const pod = kept(instance);
    return pod !== undefined && podRunning(pod) && podComplete(pod, pod.version === version ? spec.pod.containers.length : pod.containers.size);
  };
  const plan = planRollout<number>({
    step: stored && { key: stored.instance, toVersion: stored.toVersion, phase: stored.phase, at: stored.at },
    version,
    now,
    updateWaitMs: input.updateWaitMs,
    onUnreachable: "hold", // R5: wait for the node
    target: (instance) => {
      const pod = kept(instance);
      if (!pod) return "absent";
      if (!reachable(pod.node)) return "unreachable";
      return podCurrent(spec, pod) ? "current" : "stale";
    },
    check: (instance) => runtimeCheck(spec, kept(instance)!, now),
    pickNext: () => {
      // A pod of the 0-based numbering keeps the CAPSTAN_INSTANCE_NO it was started with, its
      // number - 1, and one named from it holds the name of the instance below (naming.ts). Replaced
      // highest first, no new pod sees the value of an old one still running (new k gets k, old
      // ones below it k-2 at most), and the name each new pod needs was freed by the step before.
      const fromZero = anyNumberedFromZero(view);
      const stale = [...view.instances.values()]
        .filter(
          (instanceView) =>
            isCurrentInstance(instanceView.instance, numInstances) &&
            instanceView.kept &&
            !podCurrent(spec, instanceView.kept) &&
            reachable(instanceView.kept.node) &&
            !moving.has(instanceView.instance),
        )
        .map((instanceView) => instanceView.instance)
        .sort((a, b) => (fromZero ? b - a : a - b));
      if (stale.length === 0) return undefined;
      // R3: a pod that is down anyway first; otherwise only when every other instance runs.
      const down = stale.find((i) => !available(i));
      if (down !== undefined) return down;
      const othersUp = instanceNumbers(numInstances).every((i) => i === stale[0] || available(i));
      return othersUp ? stale[0] : undefined; // an event wakes us when they are
    },
  });
  let step: RolloutStep | undefined;
  if (plan.step) {
    // A restart step replaces a pod of the current version created under another restartedAt (not
    // one replaced only for its 0-based name, podCurrent); the flag goes when the version moves on.
    const replaced = kept(plan.step.key);
    const restart = plan.started
      ? replaced?.version === version && replaced.restartedAt !== (spec.restartedAt ?? "")
      : stored?.restart === true && stored.toVersion === version;
    step = { instance: plan.step.key, toVersion: plan.step.toVersion, phase: plan.step.phase, at: plan.step.at, ...(restart && { restart: true }) };
  }
  let halted: string | undefined;
  if (plan.failure !== undefined && step) {
    halted = step.restart
      ? `restart requested at ${spec.restartedAt ?? ""} halted at instance ${step.instance}: ${plan.failure}`
      : `update to version ${version} halted at instance ${step.instance}: ${plan.failure}`;
  }
  return {
    step,
    persistFirst: plan.persistFirst,
    started: plan.started,
    ...(plan.remove !== undefined && { remove: plan.remove }),
    ...(plan.wakeAt !== undefined && { wakeAt: plan.wakeAt }),
    ...(halted !== undefined && { halted }),
  };
}

/**
 * The runtime check of a step's new pod: every container running for the pod's setupTime, and at
 * least runtimeCheckMinMs, so that a version that dies right after its start is not taken for a
 * good one and rolled out to the next instance.
 */
export function runtimeCheck(spec: StoredPodGroup, pod: PodCandidate, now: number): RolloutCheck {
  const setupMs = Math.max((spec.pod.setupTime ?? 0) * 1000, runtimeCheckMinMs);
  const containers = podContainers(pod).map((observed) => observed.c);
  if (!podComplete(pod, spec.pod.containers.length)) return { done: false };
  if (containers.every((container) => container.state === "running")) {
    const since = Math.max(...containers.map((container) => container.startedAt ?? now));
    if (now - since >= setupMs) return { done: true };
    return { done: false, wakeAt: since + setupMs };
  }
  if (spec.restartPolicy === "never" && containers.every((container) => container.state === "exited" && container.exitCode === 0)) return { done: true };
  const bad = containers.find((container) => container.state !== "running" && container.state !== "created");
  // Created (being started, or waiting for its secret files, R10): not a failure, and the setup
  // time is counted from the start, so the wait for secrets does not eat into it.
  if (!bad) return { done: false };
  return { done: false, failure: `${bad.name} ${bad.state}${bad.exitCode !== undefined ? ` with code ${bad.exitCode}` : ""}` };
}

/**
 * Whether the step holds back deploying instance `instance`: its old pod is being removed, or it
 * has no pod and the update wait is not over.
 */
export function rolloutHoldsDeploy(step: RolloutStep | undefined, instance: number, hasPod: boolean, now: number, updateWaitMs: number): boolean {
  return step?.instance === instance && (step.phase === "removing" || (!hasPod && now < step.at + updateWaitMs));
}

/** The step once its old pod is removed (phase "removed" from `now`), and when the update wait is over. */
export function rolloutStepRemoved(step: RolloutStep, now: number, updateWaitMs: number): { step: RolloutStep; wakeAt: number } {
  const removed = stepRemoved({ key: step.instance, toVersion: step.toVersion, phase: step.phase, at: step.at }, now, updateWaitMs);
  return { step: { ...step, phase: removed.step.phase, at: removed.step.at }, wakeAt: removed.wakeAt };
}
