// slot-plan.ts: what a pass does for one slot's pod, one row per "refresh, ..." row of the
// operations table in docs/dependencies.md, and D2 (extras removed), D3 (the update wait), D4 (an
// unreachable node: nothing). On a fake clock: `now` is t0.
import { describe, expect, it } from "vitest";
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { busyRecheckMs, planSlot, type SlotInput } from "../../../controllers/dependency/slot-plan.ts";
import type { RolloutStep, SlotMemory } from "../../../controllers/dependency/stored.ts";
import { pausedError } from "../../../controllers/shared/containers.ts";
import { backoff, container, t0, updateWaitMs, view } from "./fixtures.ts";

const slot = "n1|";

function input(containers: CachedContainer[], over: Partial<SlotInput> = {}, podSize = 1): SlotInput {
  return {
    slot,
    version: 1,
    podSize,
    reachable: true,
    view: view(containers, 1, podSize).slots.get(slot),
    rollout: undefined,
    memory: { restarts: 0, failures: 0 },
    now: t0,
    updateWaitMs,
    backoff,
    ...over,
  };
}

describe("planSlot (operations table, D2, D3, D4)", () => {
  it("refresh, runtime matches: nothing, no record change", () => {
    expect(planSlot(input([container({})]))).toEqual({ removeExtras: [], action: { kind: "none" } });
  });

  it("refresh, container missing: deployed (every container of the pod)", () => {
    expect(planSlot(input([], {}, 2))).toEqual({ removeExtras: [], action: { kind: "deploy", indexes: [0, 1] } });
  });

  it("refresh, container missing after a failed deploy: waits out the back-off, then deploys", () => {
    const memory: SlotMemory = { restarts: 0, failures: 1, nextDeployAt: t0 + 1, lastError: "x" };
    expect(planSlot(input([], { memory })).action).toEqual({ kind: "wait", until: t0 + 1 });
    expect(planSlot(input([], { memory, now: t0 + 1 })).action).toEqual({ kind: "deploy", indexes: [0] });
  });

  it("a pod at the spec's version missing a container: only that one is created", () => {
    const plan = planSlot(input([container({ index: 0 }), container({ index: 2 })], {}, 3));
    expect(plan.action).toEqual({ kind: "deploy", indexes: [1] });
  });

  it("refresh, container dead: counted, restarted after the back-off (1 s), always", () => {
    const dead = container({}, { state: "dead", finishedAt: t0 - 100, startedAt: t0 - 200 });
    const first = planSlot(input([dead]));
    expect(first.memory).toMatchObject({ failures: 1, nextAttemptAt: t0 - 100 + 1_000, lastExit: `${dead.id}#0` });
    expect(first.action).toEqual({ kind: "wait", until: t0 + 900 });
    // The next pass, once the back-off is over: the exit is not counted twice; restarted.
    const second = planSlot(input([dead], { memory: first.memory!, now: t0 + 900 }));
    expect(second.memory).toBeUndefined();
    expect(second.action).toEqual({ kind: "start", restart: true, started: { ...first.memory!, restarts: 1 } });
  });

  it("refresh, container exited with code 0: restarted too (a dependency always restarts)", () => {
    const exited = container({}, { state: "exited", exitCode: 0, finishedAt: t0 - 5_000, startedAt: t0 - 6_000 });
    const plan = planSlot(input([exited]));
    expect(plan.action).toMatchObject({ kind: "start", restart: true, started: { restarts: 1, failures: 1 } });
  });

  it("a created pod (never started): started, not counted as a restart", () => {
    const created = container({}, { state: "created", startedAt: undefined });
    expect(planSlot(input([created]))).toEqual({ removeExtras: [], action: { kind: "start", restart: false, started: { restarts: 0, failures: 0 } } });
  });

  it("the engine busy with a container: looked at again in a second", () => {
    expect(planSlot(input([container({}, { state: "restarting" })])).action).toEqual({ kind: "wait", until: t0 + busyRecheckMs });
  });

  it("a container paused behind our back: reported, not touched", () => {
    const plan = planSlot(input([container({}, { state: "paused" })]));
    expect(plan).toEqual({ removeExtras: [], memory: { restarts: 0, failures: 0, lastError: pausedError }, action: { kind: "none" } });
  });

  it("running again after failures: errors cleared; the failure count only after resetAfterMs of running", () => {
    const memory: SlotMemory = { restarts: 2, failures: 3, nextAttemptAt: t0 - 1, lastError: "exited", lastExit: "x#1" };
    const short = planSlot(input([container({}, { startedAt: t0 - 1_000 })], { memory }));
    expect(short.memory).toEqual({ restarts: 2, failures: 3, lastExit: "x#1" });
    const long = planSlot(input([container({}, { startedAt: t0 - backoff.resetAfterMs })], { memory }));
    expect(long.memory).toEqual({ restarts: 2, failures: 0, lastExit: "x#1" });
  });

  it("D2: duplicates and older copies next to the kept pod are removed first", () => {
    const kept = container({});
    const duplicate = container({}, { state: "exited", exitCode: 1 });
    const older = container({ version: 0 });
    const plan = planSlot(input([kept, duplicate, older]));
    expect(plan.removeExtras.map((c) => c.id).sort()).toEqual([duplicate.id, older.id].sort());
    expect(plan.action).toEqual({ kind: "none" });
  });

  it("D3: the rollout's slot is not deployed during its update wait, and is once it is over", () => {
    const rollout: RolloutStep = { slot, toVersion: 1, phase: "removed", at: t0 - updateWaitMs + 1 };
    expect(planSlot(input([], { rollout })).action).toEqual({ kind: "none" });
    expect(planSlot(input([], { rollout, now: t0 + 1 })).action).toEqual({ kind: "deploy", indexes: [0] });
    // Another slot's step does not hold this one.
    expect(planSlot(input([], { rollout: { ...rollout, slot: "n2|" } })).action).toEqual({ kind: "deploy", indexes: [0] });
  });

  it("D4: the node unreachable: nothing at all, not even the extras", () => {
    const plan = planSlot(input([container({}), container({}, { state: "dead" })], { reachable: false }));
    expect(plan).toEqual({ removeExtras: [], action: { kind: "none" } });
    expect(planSlot(input([], { reachable: false })).action).toEqual({ kind: "none" });
  });

  it("refresh, other version: left to the upgrade step (not deployed next to it, not restarted if running)", () => {
    expect(planSlot(input([container({ version: 0 })])).action).toEqual({ kind: "none" });
  });
});
