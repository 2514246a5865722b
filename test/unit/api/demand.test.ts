// DemandIndex: the running total of desired demand follows the podgroups informer through adds,
// updates (scale, deleting flag) and deletes, and othersThan() leaves the named group out.
import { afterEach, describe, expect, it } from "vitest";
import { DemandIndex } from "../../../api/orchestrator/demand.ts";
import { decodeStoredPodGroup } from "../../../api/orchestrator/informers.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { Informer } from "../../../runtime/informer.ts";
import { FakeListWatch } from "../runtime/fake-listwatch.ts";

function stored(name: string, numInstances: number, memoryLimit: number, over: Partial<StoredPodGroup> = {}): string {
  const g: StoredPodGroup = {
    name,
    namespace: "t",
    numInstances,
    restartPolicy: "never",
    pod: { name, namespace: "t", version: 1, containers: [{ image: "x", memoryLimit, cpuLimit: 0.25 }] },
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    ...over,
  };
  return JSON.stringify(g);
}

let informer: Informer<StoredPodGroup> | undefined;
afterEach(async () => {
  await informer?.stop();
});

describe("DemandIndex", () => {
  it("tracks every stored group's demand through the informer", async () => {
    const source = new FakeListWatch();
    source.put(keys.podGroup("a"), stored("a", 2, 100));
    informer = new Informer({ name: "podgroups", source, prefix: keys.podGroups, decode: decodeStoredPodGroup });
    informer.start();
    await informer.waitForSync();
    const index = new DemandIndex(informer); // registered after sync: the cache is replayed
    expect(index.total()).toEqual({ memoryBytes: 200, nanoCpus: 500_000_000 });

    const settle = (rev: number) => informer!.waitForRevision(rev);
    await settle(source.put(keys.podGroup("b"), stored("b", 1, 1000)));
    expect(index.total()).toEqual({ memoryBytes: 1200, nanoCpus: 750_000_000 });
    expect(index.othersThan("b")).toEqual({ memoryBytes: 200, nanoCpus: 500_000_000 });
    expect(index.othersThan("nope")).toEqual(index.total());

    await settle(source.put(keys.podGroup("a"), stored("a", 5, 100)));
    expect(index.total().memoryBytes).toBe(1500);

    await settle(source.put(keys.podGroup("b"), stored("b", 1, 1000, { deleting: true })));
    expect(index.total()).toEqual({ memoryBytes: 500, nanoCpus: 1_250_000_000 });

    await settle(source.del(keys.podGroup("a")));
    expect(index.total()).toEqual({ memoryBytes: 0, nanoCpus: 0 });
    index.close();
  });

  it("leaves records that do not decode out", async () => {
    const source = new FakeListWatch();
    source.put(keys.podGroup("bad"), JSON.stringify({ name: "bad" }));
    source.put(keys.podGroup("other"), stored("wrong-name", 1, 100));
    informer = new Informer({ name: "podgroups", source, prefix: keys.podGroups, decode: decodeStoredPodGroup });
    informer.start();
    await informer.waitForSync();
    expect(informer.size).toBe(0);
    expect(new DemandIndex(informer).total()).toEqual({ memoryBytes: 0, nanoCpus: 0 });
  });
});
