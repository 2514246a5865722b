// One round's steps, drawn from the PRNG before any of them runs (docs/development.md, "Chaos
// suite"): 2 to 6 steps, each a fault (35 %) or an operation. A plain function of the seed's
// sequence and the model, so the same seed plans the same rounds whatever the platform answers.
import { nextFault, type Fault } from "./faults.ts";
import { nextOperation, type Model, type Operation } from "./operations.ts";
import type { Rng } from "./prng.ts";

export type Step = { fault: Fault } | { op: Operation };

export function planRound(rng: Rng, model: Model, nodes: readonly string[], etcdMembers: number): Step[] {
  const steps: Step[] = [];
  for (let n = rng.between(2, 6); n > 0; n--) {
    steps.push(rng.chance(0.35) ? { fault: nextFault(rng, nodes, etcdMembers) } : { op: nextOperation(rng, model, nodes) });
  }
  return steps;
}
