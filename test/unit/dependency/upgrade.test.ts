// upgrade.ts: D3, the one-at-a-time upgrade (the UpdateSpec row and "refresh, older data format or
// other version" of docs/dependencies.md), with the rules of "A pod whose node is unreachable". On
// a fake clock: `now` is t0.
import { describe, expect, it } from "vitest";
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import type { RolloutStep } from "../../../controllers/dependency/stored.ts";
import { planUpgrade, upgradeStepRemoved, type UpgradeInput } from "../../../controllers/dependency/upgrade.ts";
import { container, t0, updateWaitMs, view } from "./fixtures.ts";

const v2 = 2;

function input(containers: CachedContainer[], over: Partial<UpgradeInput> = {}): UpgradeInput {
  const observed = view(containers, v2);
  return {
    step: undefined,
    version: v2,
    podSize: 1,
    slots: [...observed.slots.keys()].sort(),
    reclaiming: new Set(),
    view: observed,
    reachable: () => true,
    now: t0,
    updateWaitMs,
    ...over,
  };
}

const removing = (slot: string, at = t0): RolloutStep => ({ slot, toVersion: v2, phase: "removing", at });
const removed = (slot: string, at: number): RolloutStep => ({ slot, toVersion: v2, phase: "removed", at });

describe("planUpgrade (D3)", () => {
  it("nothing stale: no step", () => {
    expect(planUpgrade(input([container({ slot: "n1|", version: v2 })]))).toEqual({ step: undefined, persistFirst: false, started: false });
  });

  it("UpdateSpec: the first stale pod in slot order, its intent persisted before the removal", () => {
    const plan = planUpgrade(input([container({ slot: "n2|", version: 1 }), container({ slot: "n1|", version: 1 })]));
    expect(plan).toEqual({ step: removing("n1|"), remove: "n1|", persistFirst: true, started: true });
  });

  it("a pod that is down goes first", () => {
    const plan = planUpgrade(input([container({ slot: "n1|", version: 1 }), container({ slot: "n2|", version: 1 }, { state: "exited", exitCode: 1 })]));
    expect(plan.remove).toBe("n2|");
  });

  it("refresh, older data format at the spec's version: upgraded as for UpdateSpec", () => {
    const plan = planUpgrade(input([container({ slot: "n1|", version: v2, format: "1" })]));
    expect(plan).toEqual({ step: removing("n1|"), remove: "n1|", persistFirst: true, started: true });
  });

  it("only reachable pods, and none being reclaimed, are picked", () => {
    const containers = [container({ slot: "n1|", version: 1 }), container({ slot: "n2|", version: 1 }), container({ slot: "n3|", version: 1 })];
    const plan = planUpgrade(input(containers, { reachable: (node) => node !== "n1", reclaiming: new Set(["n2|"]) }));
    expect(plan.remove).toBe("n3|");
  });

  it("step removing, old pod still there (a crash before the removal): removed again, nothing re-persisted", () => {
    const plan = planUpgrade(input([container({ slot: "n1|", version: 1 })], { step: removing("n1|", t0 - 50) }));
    expect(plan).toEqual({ step: removing("n1|", t0 - 50), remove: "n1|", persistFirst: false, started: false });
  });

  it("step removed, the old pod back: persisted as removing again, then removed", () => {
    const plan = planUpgrade(input([container({ slot: "n1|", version: 1 })], { step: removed("n1|", t0 - 50) }));
    expect(plan).toEqual({ step: removing("n1|"), remove: "n1|", persistFirst: true, started: false });
  });

  it("step removing, no pod (removed before a crash): removed from now, the whole wait ahead", () => {
    const plan = planUpgrade(input([], { step: removing("n1|", t0 - 5_000), slots: ["n1|"] }));
    expect(plan).toEqual({ step: removed("n1|", t0), persistFirst: false, started: false, wakeAt: t0 + updateWaitMs });
  });

  it("step removed, no pod: the wait counts from `at`; over, nothing more to wait for", () => {
    expect(planUpgrade(input([], { step: removed("n1|", t0 - 1_000), slots: ["n1|"] })).wakeAt).toBe(t0 - 1_000 + updateWaitMs);
    expect(planUpgrade(input([], { step: removed("n1|", t0 - updateWaitMs), slots: ["n1|"] }))).toEqual({
      step: removed("n1|", t0 - updateWaitMs), persistFirst: false, started: false,
    });
  });

  it("the new pod not running yet: the step stays, no other pod is touched", () => {
    const containers = [container({ slot: "n1|", version: v2 }, { state: "created" }), container({ slot: "n2|", version: 1 })];
    const plan = planUpgrade(input(containers, { step: removed("n1|", t0 - updateWaitMs) }));
    expect(plan).toEqual({ step: removed("n1|", t0 - updateWaitMs), persistFirst: false, started: false });
  });

  it("the new pod complete and running: the step is done and the next begins in the same pass", () => {
    const containers = [container({ slot: "n1|", version: v2 }), container({ slot: "n2|", version: 1 })];
    const plan = planUpgrade(input(containers, { step: removed("n1|", t0 - updateWaitMs) }));
    expect(plan).toEqual({ step: removing("n2|"), remove: "n2|", persistFirst: true, started: true });
  });

  it("D3, D4: the step's node unreachable: set aside, the next reachable stale pod upgraded", () => {
    const containers = [container({ slot: "a2|", version: 1 }), container({ slot: "n1|", version: 1 })];
    const plan = planUpgrade(input(containers, { step: removed("a2|", t0 - 100), reachable: (node) => node !== "a2" }));
    expect(plan).toEqual({ step: removing("n1|"), remove: "n1|", persistFirst: true, started: true, setAside: "a2|" });
    // The step that followed, n1's, after its removal: a2's node back meanwhile, a2 waits for it
    // (one at a time)...
    const n1Removed = upgradeStepRemoved(plan.step!, t0, updateWaitMs).step;
    const waiting = planUpgrade(input([containers[0]!], { step: n1Removed, slots: ["a2|", "n1|"], now: t0 + updateWaitMs }));
    expect(waiting).toEqual({ step: n1Removed, persistFirst: false, started: false });
    // ...and once n1's new pod runs, the set-aside pod (still stale, and before n1 in slot order)
    // is taken up again, in the same pass.
    const later = planUpgrade(input([containers[0]!, container({ slot: "n1|", version: v2 })], { step: n1Removed, now: t0 + updateWaitMs + 10 }));
    expect(later).toEqual({ step: removing("a2|", t0 + updateWaitMs + 10), remove: "a2|", persistFirst: true, started: true });
  });

  it("a step whose slot is reclaimed, or has no record any more, is dropped", () => {
    const containers = [container({ slot: "n1|", version: 1 })];
    expect(planUpgrade(input(containers, { step: removed("n1|", t0), reclaiming: new Set(["n1|"]) })).step).toBeUndefined();
    expect(planUpgrade(input([], { step: removed("n9|", t0) })).step).toBeUndefined();
  });

  it("a step of an older update is carried over to the current version", () => {
    const plan = planUpgrade(input([container({ slot: "n1|", version: 1 })], { step: { ...removing("n1|", t0 - 5), toVersion: 1 } }));
    expect(plan.step).toEqual(removing("n1|", t0 - 5));
  });

  it("after the removal: removed from the given time, the wait from then", () => {
    expect(upgradeStepRemoved(removing("n1|", t0 - 9), t0 + 3, updateWaitMs)).toEqual({ step: removed("n1|", t0 + 3), wakeAt: t0 + 3 + updateWaitMs });
  });
});
