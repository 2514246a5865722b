// The rollout step decision (R2, R3, R5; docs/podgroup-controller.md, "Spec update, step by step",
// "Rolling restart"): the generic protocol of controllers/shared/rollout.ts, and the PodGroup's
// rules on top of it (plan-rollout.ts), on a fake clock.
import { describe, expect, it } from "vitest";
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { planRollout, stepRemoved, type RolloutStep, type RolloutTarget } from "../../../controllers/shared/rollout.ts";
import {
  planPodGroupRollout,
  podCurrent,
  rolloutHoldsDeploy,
  rolloutStepRemoved,
  runtimeCheck,
  type PodGroupRolloutPlan,
} from "../../../controllers/podgroup/plan-rollout.ts";
import type { DriftMove, RolloutStep as StoredStep, StoredPodGroup } from "../../../controllers/podgroup/stored.ts";
import { FakeClock } from "../../../runtime/clock.ts";
import { container, down, group, reachable, viewOf } from "./plan-fixtures.ts";

const wait = 10_000;

/** Each key of `want` as given; a key given as undefined must be absent or undefined. */
function expectPlan(actual: object, want: object): void {
  for (const [key, value] of Object.entries(want)) {
    if (value === undefined) expect((actual as Record<string, unknown>)[key], key).toBeUndefined();
    else if (typeof value === "object" && value !== null) expect((actual as Record<string, unknown>)[key], key).toMatchObject(value);
    else expect((actual as Record<string, unknown>)[key], key).toBe(value);
  }
}
const clock = new FakeClock(100_000);
const now = clock.now();

describe("planRollout (controllers/shared/rollout.ts), generic over the key", () => {
  const base = { version: 2, now, updateWaitMs: wait, check: () => ({ done: true }) };
  const step = (over: Partial<RolloutStep<string>> = {}): RolloutStep<string> => ({ key: "a", toVersion: 2, phase: "removing", at: now - 5, ...over });

  const rows: {
    name: string;
    step: RolloutStep<string> | undefined;
    target: RolloutTarget;
    onUnreachable?: "hold" | "setAside";
    next?: string;
    check?: { done: boolean; wakeAt?: number; failure?: string };
    want: Partial<ReturnType<typeof planRollout<string>>>;
  }[] = [
    { name: "no step, nothing stale: idle", step: undefined, target: "current", want: { step: undefined, persistFirst: false, started: false } },
    {
      name: "no step, a stale key: a new step, persisted first (R2)",
      step: undefined,
      target: "current",
      next: "b",
      want: { step: { key: "b", toVersion: 2, phase: "removing", at: now }, remove: "b", persistFirst: true, started: true },
    },
    {
      name: "removing, old pod still there: removed again, no new write (intent persisted already)",
      step: step(),
      target: "stale",
      want: { step: step(), remove: "a", persistFirst: false, started: false },
    },
    {
      name: "removed, old pod back: removing again, persisted first",
      step: step({ phase: "removed" }),
      target: "stale",
      want: { step: step({ phase: "removing", at: now }), remove: "a", persistFirst: true, started: false },
    },
    {
      name: "removing, old pod gone (crash between intent and record): removed at now, full wait",
      step: step(),
      target: "absent",
      want: { step: step({ phase: "removed", at: now }), persistFirst: false, wakeAt: now + wait },
    },
    {
      name: "removed, in the update wait: wake at its end",
      step: step({ phase: "removed", at: now - 1_000 }),
      target: "absent",
      want: { step: step({ phase: "removed", at: now - 1_000 }), wakeAt: now - 1_000 + wait },
    },
    {
      name: "removed, wait over: the step stays (the caller deploys), no wake",
      step: step({ phase: "removed", at: now - wait }),
      target: "absent",
      want: { step: step({ phase: "removed", at: now - wait }), wakeAt: undefined, remove: undefined },
    },
    {
      name: "new pod in its check: wait for the check",
      step: step({ phase: "removed" }),
      target: "current",
      check: { done: false, wakeAt: now + 500 },
      next: "b",
      want: { step: step({ phase: "removed" }), wakeAt: now + 500, remove: undefined },
    },
    {
      name: "new pod failed its check: halted at the key",
      step: step({ phase: "removed" }),
      target: "current",
      check: { done: false, failure: "x exited with code 3" },
      next: "b",
      want: { step: step({ phase: "removed" }), failure: "x exited with code 3", remove: undefined },
    },
    {
      name: "check done: the next key in the same decision",
      step: step({ phase: "removed" }),
      target: "current",
      next: "b",
      want: { step: { key: "b", toVersion: 2, phase: "removing", at: now }, remove: "b", persistFirst: true, started: true },
    },
    {
      name: "unreachable, hold (PodGroup R5): nothing else happens",
      step: step(),
      target: "unreachable",
      onUnreachable: "hold",
      next: "b",
      want: { step: step(), remove: undefined, persistFirst: false },
    },
    {
      name: "unreachable, set aside (Dependency): the next key is taken",
      step: step(),
      target: "unreachable",
      onUnreachable: "setAside",
      next: "b",
      want: { setAside: "a", remove: "b", started: true },
    },
    {
      name: "a step of an older toVersion is carried over to the new version",
      step: step({ toVersion: 1 }),
      target: "stale",
      want: { step: step({ toVersion: 2 }), remove: "a" },
    },
  ];
  it.each(rows)("$name", (row) => {
    const plan = planRollout<string>({
      ...base,
      step: row.step,
      target: () => row.target,
      onUnreachable: row.onUnreachable ?? "hold",
      pickNext: () => row.next,
      ...(row.check && { check: () => row.check! }),
    });
    expectPlan(plan, row.want);
  });

  it("pickNext is asked only when no step holds the rollout", () => {
    let asked = 0;
    planRollout<string>({ ...base, step: step(), target: () => "stale", onUnreachable: "hold", pickNext: () => (asked++, "b") });
    planRollout<string>({ ...base, step: step({ phase: "removed" }), target: () => "absent", onUnreachable: "hold", pickNext: () => (asked++, "b") });
    expect(asked).toBe(0);
  });

  it("stepRemoved: removing -> removed at the time the removal finished; the wait runs from there", () => {
    expect(stepRemoved(step(), now + 3, wait)).toEqual({ step: step({ phase: "removed", at: now + 3 }), wakeAt: now + 3 + wait });
    expect(stepRemoved(step({ phase: "removed", at: now }), now + 3, wait).step.at).toBe(now);
  });
});

// ---- the PodGroup's rules -------------------------------------------------------------------------

function plan(spec: StoredPodGroup, containers: CachedContainer[], step?: StoredStep, moving: Map<number, DriftMove> = new Map(), at = now): PodGroupRolloutPlan {
  return planPodGroupRollout({ spec, view: viewOf(spec, containers), step, moving, reachable, now: at, updateWaitMs: wait });
}
const running = (instance: number, version: number, over: Partial<CachedContainer> = {}, node = "n1") => container({ instance, version, node }, over);
const exited = (code: number) => ({ state: "exited" as const, exitCode: code, finishedAt: now - 10 });

describe("planPodGroupRollout (R2, R3, R5)", () => {
  const v2 = group(3, 2);
  const rows: {
    name: string;
    spec?: StoredPodGroup;
    pods: CachedContainer[];
    step?: StoredStep;
    moving?: number[];
    want: Partial<Omit<PodGroupRolloutPlan, "step">> & { step?: Partial<StoredStep> };
    /** The step exactly as given in `want.step`, with no other key (e.g. no leftover `restart`). */
    exactStep?: boolean;
  }[] = [
    {
      name: "R3: every instance runs: the lowest stale one is picked, its intent persisted first (R2)",
      pods: [running(1, 1), running(2, 1), running(3, 1)],
      want: { step: { instance: 1, toVersion: 2, phase: "removing", at: now }, remove: 1, persistFirst: true, started: true },
    },
    {
      name: "R3: a stale instance that is down anyway is replaced first, though not every other one runs (no second one goes down)",
      pods: [running(1, 1), running(2, 1, exited(3)), running(3, 2)],
      want: { step: { instance: 2, toVersion: 2, phase: "removing", at: now }, remove: 2 },
    },
    {
      name: "R3: a current instance is down, the stale ones run: wait",
      pods: [running(1, 1), running(2, 1), running(3, 2, exited(3))],
      want: { step: undefined, persistFirst: false, started: false },
    },
    {
      name: "R3: a missing instance counts as down: wait",
      pods: [running(1, 1), running(2, 2)],
      want: { step: undefined, remove: undefined },
    },
    {
      name: "R5: a stale pod on an unreachable node is not picked (the next stale one is)",
      pods: [running(1, 1, {}, down), running(2, 1), running(3, 2)],
      want: { remove: 2, step: { instance: 2 } },
    },
    {
      name: "R5: the step's pod is on an unreachable node: held, nothing else",
      pods: [running(1, 1, {}, down), running(2, 1), running(3, 2)],
      step: { instance: 1, toVersion: 2, phase: "removing", at: now - 5 },
      want: { step: { instance: 1, toVersion: 2, phase: "removing", at: now - 5 }, remove: undefined, persistFirst: false },
    },
    {
      name: "a moving instance (drift) is not picked",
      pods: [running(1, 1), running(2, 1), running(3, 2)],
      moving: [1],
      want: { remove: 2 },
    },
    {
      name: "R2: removing, old pod still there (crash before the removal): removed, no second write",
      pods: [running(1, 1), running(2, 1), running(3, 1)],
      step: { instance: 1, toVersion: 2, phase: "removing", at: now - 5 },
      want: { remove: 1, persistFirst: false, started: false },
    },
    {
      name: "R2: removing, old pod gone (crash after the removal): removed at now, the full wait",
      pods: [running(2, 1), running(3, 1)],
      step: { instance: 1, toVersion: 2, phase: "removing", at: now - 5 },
      want: { step: { instance: 1, toVersion: 2, phase: "removed", at: now }, wakeAt: now + wait, remove: undefined },
    },
    {
      name: "the step's instance was scaled away: dropped",
      spec: group(1, 2),
      pods: [running(1, 2)],
      step: { instance: 3, toVersion: 2, phase: "removed", at: now - 5 },
      want: { step: undefined },
    },
    {
      name: "a spec update during a restart step: carried over, no longer a restart",
      pods: [running(2, 1), running(3, 1)],
      step: { instance: 1, toVersion: 1, phase: "removed", at: now - 5, restart: true },
      want: { step: { instance: 1, toVersion: 2, phase: "removed", at: now - 5 } },
      exactStep: true,
    },
    {
      name: "runtime check passed: the step ends and the next one starts",
      pods: [running(1, 2, { startedAt: now - 1_000 }), running(2, 1), running(3, 1)],
      step: { instance: 1, toVersion: 2, phase: "removed", at: now - 20_000 },
      want: { step: { instance: 2, toVersion: 2, phase: "removing", at: now }, remove: 2 },
    },
    {
      name: "runtime check failed: the rollout halts with the container's exit",
      pods: [running(1, 2, exited(3)), running(2, 1), running(3, 1)],
      step: { instance: 1, toVersion: 2, phase: "removed", at: now - 20_000 },
      want: { halted: "update to version 2 halted at instance 1: web.v2-i1-d0 exited with code 3", remove: undefined },
    },
  ];
  it.each(rows)("$name", (row) => {
    const result = plan(row.spec ?? v2, row.pods, row.step, new Map((row.moving ?? []).map((i) => [i, { task: "t", from: "n1", drift: 1 }])));
    expectPlan(result, row.want);
    if (row.exactStep) expect(result.step).toEqual(row.want.step);
  });

  it("rolling restart: a pod created under another restartedAt is stale; the step is a restart and its halt says so", () => {
    const spec = group(2, 1, { restartedAt: "T2" });
    const pods = [container({ instance: 1, restartedAt: "T1" }), container({ instance: 2, restartedAt: "T1" })];
    const first = plan(spec, pods);
    expect(first).toMatchObject({ step: { instance: 1, restart: true }, remove: 1, persistFirst: true });
    const failing = [container({ instance: 1, restartedAt: "T2" }, exited(3)), container({ instance: 2, restartedAt: "T1" })];
    expect(plan(spec, failing, { ...first.step!, phase: "removed", at: now - 20_000 }).halted).toBe(
      "restart requested at T2 halted at instance 1: web.v1-i1-d0 exited with code 3",
    );
  });

  describe("pods of the 0-based numbering (docs/podgroup-controller.md, \"Instance numbers\")", () => {
    /** A container made by a 0-based release for (1-based) `instance`: labelled instance - 1, no io.capstan.numbering. */
    const zeroBased = (instance: number, version: number) => {
      const c = container({ instance, version });
      const labels: Record<string, string> = { ...c.labels, "io.capstan.instance": String(instance - 1) };
      delete labels["io.capstan.numbering"];
      return { ...c, labels };
    };
    const nameOnly = (instance: number) => container({ instance }, { name: `web.v1-i${instance - 1}-d0`, labels: { "io.capstan.podgroup": "web", "io.capstan.version": "1" } });

    it("while any pod is numbered from 0, the highest stale instance is picked first (no two pods see one CAPSTAN_INSTANCE_NO)", () => {
      expect(plan(v2, [zeroBased(1, 1), zeroBased(2, 1), zeroBased(3, 1)])).toMatchObject({ step: { instance: 3 }, remove: 3 });
      // Instance 3 replaced already (numbered from 1): instance 2 next, while 1 is still 0-based.
      expect(plan(v2, [zeroBased(1, 1), zeroBased(2, 1), running(3, 2)])).toMatchObject({ step: { instance: 2 }, remove: 2 });
      // R3 still holds: a down instance first.
      expect(plan(v2, [zeroBased(1, 1), { ...zeroBased(2, 1), ...exited(3) }, zeroBased(3, 1)])).toMatchObject({ step: { instance: 2 } });
      // None numbered from 0: the lowest first, as before.
      expect(plan(v2, [running(1, 1), running(2, 1), running(3, 1)])).toMatchObject({ step: { instance: 1 } });
    });

    it("a pod whose instance is read from its name is stale at the current version and restartedAt", () => {
      const spec = group(3, 1);
      const view = viewOf(spec, [nameOnly(1)]);
      expect(podCurrent(spec, view.instances.get(1)!.kept!)).toBe(false);
      const first = plan(spec, [nameOnly(1), nameOnly(2), nameOnly(3)]);
      expect(first).toMatchObject({ step: { instance: 3 }, remove: 3 });
      expect(first.step?.restart).toBeUndefined(); // replaced for its name, not restarted
    });
  });

  it("specs without restartedAt and containers without the label are current: nothing restarts", () => {
    expect(plan(group(2, 1), [container({ instance: 1 }), container({ instance: 2 })]).step).toBeUndefined();
  });

  it("a whole rollout on the fake clock: one instance at a time, the wait, the check, then the next", () => {
    const spec = group(2, 2);
    const fake = new FakeClock(0);
    let pods = [running(1, 1), running(2, 1)];
    let step: StoredStep | undefined;
    const decide = () => planPodGroupRollout({ spec, view: viewOf(spec, pods), step, moving: new Map(), reachable, now: fake.now(), updateWaitMs: wait });
    let p = decide();
    expect(p).toMatchObject({ remove: 1, persistFirst: true });
    step = p.step;
    pods = [running(2, 1)]; // the pass removed it
    step = rolloutStepRemoved(step!, fake.now(), wait).step;
    fake.advance(wait - 1);
    expect(rolloutHoldsDeploy(step, 1, false, fake.now(), wait)).toBe(true);
    fake.advance(1);
    expect(rolloutHoldsDeploy(step, 1, false, fake.now(), wait)).toBe(false);
    pods = [running(1, 2, { startedAt: fake.now() }), running(2, 1)];
    p = decide();
    expectPlan(p, { wakeAt: fake.now() + 1_000, remove: undefined });
    fake.advance(1_000);
    p = decide();
    expect(p).toMatchObject({ remove: 2, step: { instance: 2, phase: "removing" } });
  });
});

describe("runtimeCheck", () => {
  const spec = group(1, 2, {}, { setupTime: 5 });
  const rows: { name: string; over: Partial<CachedContainer>; spec?: StoredPodGroup; want: ReturnType<typeof runtimeCheck> }[] = [
    { name: "running for setupTime: done", over: { startedAt: now - 5_000 }, want: { done: true } },
    { name: "running, setupTime not over: wake when it is", over: { startedAt: now - 1_000 }, want: { done: false, wakeAt: now + 4_000 } },
    { name: "the 1 s floor without setupTime", over: { startedAt: now - 500 }, spec: group(1, 2), want: { done: false, wakeAt: now + 500 } },
    { name: "created (being started, or waiting for secrets, R10): not a failure", over: { state: "created", startedAt: undefined }, want: { done: false } },
    { name: "exited non-zero: failure", over: exited(3), want: { done: false, failure: "web.v2-i1-d0 exited with code 3" } },
    { name: "policy never, exited 0: done", over: exited(0), spec: group(1, 2, { restartPolicy: "never" }), want: { done: true } },
  ];
  it.each(rows)("$name", (row) => {
    const s = row.spec ?? spec;
    const pod = viewOf(s, [container({ instance: 1, version: 2 }, row.over)]).instances.get(1)!.kept!;
    expect(runtimeCheck(s, pod, now)).toEqual(row.want);
  });

  it("an incomplete pod is not done", () => {
    const two = group(1, 2, {}, { containers: [{ image: "a" }, { image: "b" }] });
    const pod = viewOf(two, [container({ instance: 1, version: 2 }, { startedAt: 0 })]).instances.get(1)!.kept!;
    expect(runtimeCheck(two, pod, now)).toEqual({ done: false });
  });
});

describe("rolloutHoldsDeploy", () => {
  const step: StoredStep = { instance: 1, toVersion: 2, phase: "removed", at: now };
  it.each([
    { name: "another instance", step, instance: 2, hasPod: false, at: now, want: false },
    { name: "removing", step: { ...step, phase: "removing" as const }, instance: 1, hasPod: true, at: now + wait, want: true },
    { name: "removed, in the wait, no pod", step, instance: 1, hasPod: false, at: now + wait - 1, want: true },
    { name: "removed, wait over", step, instance: 1, hasPod: false, at: now + wait, want: false },
    { name: "removed, a pod exists (complete or start it)", step, instance: 1, hasPod: true, at: now, want: false },
  ])("$name", (row) => {
    expect(rolloutHoldsDeploy(row.step, row.instance, row.hasPod, row.at, wait)).toBe(row.want);
  });
});
