// Review finding 3: a pod counts the dependencies of the spec version it RUNS, not the group's
// current list, so a spec update that drops a dependency does not take its pod away from the
// old version's instances while they still run.
import { describe, expect, it } from "vitest";
import { ReferenceIndex } from "../../../controllers/dependency/reference-index.ts";
import { referencesOf } from "../../../controllers/dependency/references.ts";
import { decodeGroupStatus } from "../../../controllers/dependency/stored.ts";
import { decodePodDependencies, encodePodDependencies, podDependenciesLabel } from "../../../controllers/shared/pod-dependencies.ts";

const log = { podName: "log", policy: "node" as const };
const db = { podName: "db", policy: "namespace" as const };
const pod = (node: string, version: number) => ({ node, containers: 1, version });

describe("references per pod version", () => {
  it("old-version instances keep counting the dropped dependency until they are replaced", () => {
    const index = new ReferenceIndex();
    index.setSpec("g", { name: "g", namespace: "a", version: 1, dependencies: [log, db] });
    index.setStatus("g", { name: "g", pods: [pod("n1", 1), pod("n2", 1)] });
    expect(Object.fromEntries(index.of("log"))).toEqual({ "n1|": 1, "n2|": 1 });

    // cmd=spec drops log: nothing changes while both instances still run version 1.
    expect(index.setSpec("g", { name: "g", namespace: "a", version: 2, dependencies: [db] })).toEqual([]);
    expect(Object.fromEntries(index.of("log"))).toEqual({ "n1|": 1, "n2|": 1 });

    // The rollout replaces n1's instance: only that reference goes.
    expect(index.setStatus("g", { name: "g", pods: [pod("n1", 2), pod("n2", 1)] })).toContain("log");
    expect(Object.fromEntries(index.of("log"))).toEqual({ "n2|": 1 });
    expect(Object.fromEntries(index.of("db"))).toEqual({ "n1|a": 1, "n2|a": 1 });

    index.setStatus("g", { name: "g", pods: [pod("n1", 2), pod("n2", 2)] });
    expect(index.of("log").size).toBe(0);
  });

  it("a pod's own reported list wins over any spec; an unseen version falls back to the current list", () => {
    const g = { namespace: "a", dependencies: [db], history: new Map([[2, [db]]]) };
    expect(referencesOf({ ...g, pods: [{ ...pod("n1", 1), dependencies: [log] }] })).toEqual([{ dependency: "log", node: "n1", scope: "" }]);
    expect(referencesOf({ ...g, pods: [pod("n1", 1)] })).toEqual([{ dependency: "db", node: "n1", scope: "a" }]);
  });

  it("forgets a version's list once no pod can run it any more", () => {
    const index = new ReferenceIndex();
    index.setSpec("g", { name: "g", namespace: "a", version: 1, dependencies: [log] });
    index.setStatus("g", { name: "g", pods: [pod("n1", 1)] });
    index.setSpec("g", { name: "g", namespace: "a", version: 2, dependencies: [] });
    index.setStatus("g", { name: "g", pods: [pod("n1", 2)] });
    // A (bogus) version-1 pod reported later counts the current list: version 1 was forgotten.
    index.setStatus("g", { name: "g", pods: [pod("n1", 1)] });
    expect(index.of("log").size).toBe(0);
  });

  it("reads each pod's version and list from the PodGroup status, as a list or as the label value", () => {
    const value = JSON.stringify({
      pods: [
        { node: "n1", version: 3, containers: [{}], dependencies: [{ podName: "log", policy: 1 }] },
        { node: "n2", version: 2, containers: [{}], dependencies: "log:node,db:namespace" },
        { node: "n2", version: 2, containers: [{}], dependencies: "bad entry" },
      ],
    });
    expect(decodeGroupStatus({ key: "/x/podgroup-status/g", modRevision: 1, value }).pods).toEqual([
      { node: "n1", containers: 1, version: 3, dependencies: [log] },
      { node: "n2", containers: 1, version: 2, dependencies: [log, db] },
      { node: "n2", containers: 1, version: 2 },
    ]);
  });

  it("the container label round-trips, and a malformed value is refused whole", () => {
    expect(podDependenciesLabel).toBe("io.capstan.dependencies");
    expect(encodePodDependencies([log, db])).toBe("log:node,db:namespace");
    expect(decodePodDependencies(encodePodDependencies([log, db]))).toEqual([log, db]);
    expect(decodePodDependencies("")).toEqual([]);
    expect(decodePodDependencies("log:node,db")).toBeUndefined();
    expect(decodePodDependencies("Log:node")).toBeUndefined();
  });
});
