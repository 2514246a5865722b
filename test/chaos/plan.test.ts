// The chaos run's plan is a function of the seed alone: the same seed draws the same rounds (what
// makes `npm run chaos -- --seed N` a replay), another seed others, and the plan stays within the
// model's bounds (no operation on a group it deleted, counts within the limits).
import { describe, expect, it } from "vitest";
import { maxGroups, maxInstances, Model } from "./operations.ts";
import { planRound, type Step } from "./plan.ts";
import { Rng } from "./prng.ts";

function plan(seed: number, rounds: number): { steps: Step[][]; model: Model } {
  const rng = new Rng(seed);
  const model = new Model(`chaos${seed}`);
  return { steps: Array.from({ length: rounds }, () => planRound(rng, model, ["n1", "n2"], 3)), model };
}

describe("planRound", () => {
  it("the same seed plans the same rounds; another seed does not", () => {
    expect(plan(7, 100).steps).toEqual(plan(7, 100).steps);
    expect(plan(8, 100).steps).not.toEqual(plan(7, 100).steps);
  });

  it("draws every operation and fault kind, and never acts on a group it deleted or goes past the bounds", () => {
    const { steps } = plan(16, 300);
    const all = steps.flat();
    const kinds = new Set(all.map((s) => ("fault" in s ? s.fault.kind : s.op.kind)));
    expect([...kinds].sort()).toEqual(
      ["create", "delete", "docker-rm", "docker-stop", "drift", "kill-orchestrator", "kill-secrets", "restart-engine", "restart-etcd-member", "scale", "secret", "update"].sort(),
    );
    const live = new Set<string>();
    const deleted = new Set<string>();
    for (const s of all) {
      if ("fault" in s) continue;
      const op = s.op;
      if (op.kind === "create") {
        expect(live.has(op.group) || deleted.has(op.group)).toBe(false);
        live.add(op.group);
        expect(live.size).toBeLessThanOrEqual(maxGroups);
      } else {
        expect(live.has(op.group), `${op.kind} ${op.group}`).toBe(true);
      }
      if (op.kind === "delete") {
        live.delete(op.group);
        deleted.add(op.group);
      }
      if (op.kind === "scale") expect(op.numInstances).toBeLessThanOrEqual(maxInstances);
    }
  });
});
