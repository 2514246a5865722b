// The desired demand of every stored PodGroup, kept up to date from the podgroups informer, so a
// feasibility check costs O(1) instead of a walk over thousands of groups per request.
import type { Informer } from "../../runtime/informer.ts";
import { keys } from "../resources/keys.ts";
import type { StoredPodGroup } from "../resources/podgroup.ts";
import { addDemand, groupDemand, noDemand, subtractDemand, type Demand } from "./feasibility.ts";

export class DemandIndex {
  private readonly byKey = new Map<string, Demand>();
  /** Invariant: the sum of byKey's values (integers, so adding and subtracting stays exact). */
  private sum: Demand = noDemand;
  readonly close: () => void;

  constructor(podGroups: Informer<StoredPodGroup>) {
    // Registration replays the informer's current cache as adds, so nothing is missed.
    this.close = podGroups.addEventHandler({
      onAdd: (g, key) => this.set(key, groupDemand(g)),
      onUpdate: (_old, g, key) => this.set(key, groupDemand(g)),
      onDelete: (_g, key) => this.set(key, noDemand),
    });
  }

  /** Demand of every stored group except `name`. */
  othersThan(name: string): Demand {
    return subtractDemand(this.sum, this.byKey.get(keys.podGroup(name)) ?? noDemand);
  }

  total(): Demand {
    return this.sum;
  }

  private set(key: string, demand: Demand): void {
    this.sum = addDemand(subtractDemand(this.sum, this.byKey.get(key) ?? noDemand), demand);
    if (demand.memoryBytes === 0 && demand.nanoCpus === 0) this.byKey.delete(key);
    else this.byKey.set(key, demand);
  }
}
