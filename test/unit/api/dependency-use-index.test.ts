// DependencyUseIndex (api/orchestrator/dependency-demand.ts): the stored groups' dependency uses,
// folded by slot as the podgroups informer changes, give the feasibility check the same dependency
// pods as a walk over every stored group would, with any one group left out (the one a request
// changes), through adds, scale changes, dependency changes, deleting flags and deletes.
import { afterEach, describe, expect, it } from "vitest";
import { dependencyPodsDemand, DependencyUseIndex, usesOf, type DependencyFacts, type GroupUses } from "../../../api/orchestrator/dependency-demand.ts";
import { decodeStoredPodGroup } from "../../../api/orchestrator/informers.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { Informer } from "../../../runtime/informer.ts";
import { FakeListWatch } from "../runtime/fake-listwatch.ts";

type Dep = { podName: string; policy: "namespace" | "node" };

function group(name: string, namespace: string, numInstances: number, dependencies: Dep[], deleting = false): StoredPodGroup {
  return {
    name,
    namespace,
    numInstances,
    restartPolicy: "never",
    pod: { name, namespace, version: 1, containers: [{ image: "x" }], dependencies },
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    ...(deleting && { deleting: { force: false } }),
  } as StoredPodGroup;
}

/** A deterministic generator, so a failure replays. */
function random(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state % n;
  };
}

const facts: DependencyFacts = {
  demandOf: (d) => (d === "gone" ? undefined : { memoryBytes: d.length * 1_000, nanoCpus: d.length }),
  podNodes: (d, scope) => (d === "log" && scope === "" ? ["n1", "n9"] : scope === "ns1" ? ["n2"] : []),
};

let informer: Informer<StoredPodGroup> | undefined;
afterEach(async () => {
  await informer?.stop();
});

describe("DependencyUseIndex", () => {
  it("gives the same dependency pods as a walk over every other stored group", async () => {
    const source = new FakeListWatch();
    informer = new Informer({ name: "podgroups", source, prefix: keys.podGroups, decode: decodeStoredPodGroup });
    informer.start();
    await informer.waitForSync();
    const index = new DependencyUseIndex(informer);
    const model = new Map<string, StoredPodGroup>();
    const names = Array.from({ length: 12 }, (_, i) => `g${i}`);
    const deps: Dep[] = [
      { podName: "log", policy: "node" },
      { podName: "cache", policy: "namespace" },
      { podName: "gone", policy: "node" },
      { podName: "db", policy: "namespace" },
    ];
    const pick = random(7);
    const readySets = [[], ["n1"], ["n1", "n2"], ["n1", "n2", "n3", "n4", "n5"]];
    const walk = (skip: string): GroupUses[] =>
      [...model.values()].filter((g) => g.name !== skip && !g.deleting).map((g) => ({ numInstances: g.numInstances, uses: usesOf(g) }));

    for (let step = 0; step < 300; step++) {
      const name = names[pick(names.length)]!;
      let revision: number;
      if (pick(6) === 0 && model.has(name)) {
        model.delete(name);
        revision = source.del(keys.podGroup(name));
      } else {
        const g = group(name, `ns${pick(3)}`, pick(5), deps.filter(() => pick(2) === 0), pick(8) === 0);
        model.set(name, g);
        revision = source.put(keys.podGroup(name), JSON.stringify(g));
      }
      await informer.waitForRevision(revision);
      // Folded: one entry per slot in use, however many groups use it.
      const inUse = new Set(walk("none").filter((g) => g.numInstances > 0).flatMap((g) => g.uses.map((u) => `${u.dependency}/${u.scope}`)));
      expect(index.othersThan("none")).toHaveLength(inUse.size);
      for (const skip of [...names, "none"]) {
        for (const ready of readySets) {
          const expected = dependencyPodsDemand(walk(skip), ready, facts);
          expect(dependencyPodsDemand(index.othersThan(skip), ready, facts), `step ${step}, without ${skip}, ${ready.length} ready`).toEqual(expected);
        }
      }
    }
    // Everything deleted: nothing is left folded.
    for (const name of model.keys()) await informer.waitForRevision(source.del(keys.podGroup(name)));
    expect(index.othersThan("none")).toEqual([]);
    index.close();
  });
});
