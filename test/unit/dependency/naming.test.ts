// Container and volume names of dependency pods: two different pods on one node never share a
// name (review finding 8: dep.v1-n1-c1 was both container 1 of the node-level pod and container 0
// of the pod for namespace "c1").
import { describe, expect, it } from "vitest";
import { containerName, volumeOwner } from "../../../controllers/dependency/naming.ts";
import { volumeBind } from "../../../controllers/shared/volumes.ts";

describe("dependency container names", () => {
  it("tells the node-level pod's 2nd container from a namespace-level pod for a namespace named like an index", () => {
    const nodeLevel = containerName({ dependency: "dep", version: 1, node: "n1", scope: "", index: 1 });
    const forC1 = containerName({ dependency: "dep", version: 1, node: "n1", scope: "c1", index: 0 });
    expect(nodeLevel).toBe("dep.v1-n1-C1");
    expect(forC1).toBe("dep.v1-n1-Nc1");
    expect(nodeLevel).not.toBe(forC1);
  });

  it("gives distinct names to every (dependency, version, scope, index) on one node, markers and separators in names included", () => {
    const names = ["dep", "dep.v1-n1", "dep.v1-n1-nsx", "d-c1", "dep-n"];
    const scopes = ["", "c1", "x-c1", "x", "ns", "x.v1-n1", "n", "c", "x-n"];
    const seen = new Map<string, string>();
    for (const dependency of names) {
      for (const version of [1, 2, 11]) {
        for (const scope of scopes) {
          for (const index of [0, 1, 2, 11]) {
            const ref = { dependency, version, node: "n1", scope, index };
            const name = containerName(ref);
            const who = JSON.stringify(ref);
            expect(seen.get(name), `${name} for ${who}`).toBeUndefined();
            seen.set(name, who);
          }
        }
      }
    }
    expect(seen.size).toBe(names.length * 3 * scopes.length * 4);
  });

  it("scopes volumes the same unambiguous way", () => {
    expect(volumeOwner("dep", "", 1)).not.toBe(volumeOwner("dep", "c1", 0));
    expect(volumeBind(volumeOwner("dep", "c1", 0), "cache:/var/c")).toBe("dep.Nc1.cache:/var/c");
    expect(volumeBind(volumeOwner("dep", "", 1), "cache:/var/c")).toBe("dep.C1.cache:/var/c");
  });
});
