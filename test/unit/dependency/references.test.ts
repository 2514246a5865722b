import { describe, expect, it } from "vitest";
import { countReferences, referencesOf, type GroupReferenceInput } from "../../../controllers/dependency/references.ts";
import { ReferenceIndex } from "../../../controllers/dependency/reference-index.ts";
import { containerLabels, containerName, identify } from "../../../controllers/dependency/naming.ts";
import { decodeGroupSpec, decodeGroupStatus } from "../../../controllers/dependency/stored.ts";

const running = (node: string) => ({ node, containers: 1 });

function counts(groups: GroupReferenceInput[]): Record<string, Record<string, number>> {
  return Object.fromEntries([...countReferences(groups)].map(([d, slots]) => [d, Object.fromEntries(slots)]));
}

describe("reference derivation", () => {
  it("counts one reference per instance: node policy per node, namespace policy per namespace per node", () => {
    expect(
      counts([
        { namespace: "a", dependencies: [{ podName: "log", policy: "node" }], pods: [running("n1"), running("n1"), running("n2")] },
        { namespace: "b", dependencies: [{ podName: "log", policy: "node" }, { podName: "db", policy: "namespace" }], pods: [running("n1")] },
        { namespace: "c", dependencies: [{ podName: "db", policy: "namespace" }], pods: [running("n1")] },
      ]),
    ).toEqual({ log: { "n1|": 3, "n2|": 1 }, db: { "n1|b": 1, "n1|c": 1 } });
  });

  it("scopes every entry on its own: a node-level entry does not leak into the namespace-level one after it", () => {
    const refs = referencesOf({
      namespace: "app",
      dependencies: [
        { podName: "shared", policy: "node" },
        { podName: "mine", policy: "namespace" },
        { podName: "also-mine", policy: "namespace" },
      ],
      pods: [running("n1")],
    });
    expect(refs).toEqual([
      { dependency: "shared", node: "n1", scope: "" },
      { dependency: "mine", node: "n1", scope: "app" },
      { dependency: "also-mine", node: "n1", scope: "app" },
    ]);
  });

  it("ignores instances without a node or without a container; lists a repeated entry once", () => {
    expect(
      counts([
        {
          namespace: "a",
          dependencies: [{ podName: "log", policy: "node" }, { podName: "log", policy: "node" }],
          pods: [{ node: "", containers: 1 }, { node: "n1", containers: 0 }, running("n2")],
        },
      ]),
    ).toEqual({ log: { "n2|": 1 } });
  });

  it("the index follows spec and status changes and reports the dependencies whose counts changed", () => {
    const index = new ReferenceIndex();
    const spec = { name: "g", namespace: "a", version: 1, dependencies: [{ podName: "log", policy: "node" as const }] };
    expect(index.setSpec("g", spec)).toEqual([]); // no instances yet
    expect(index.setStatus("g", { name: "g", pods: [running("n1"), running("n2")] })).toEqual(["log"]);
    expect(Object.fromEntries(index.of("log"))).toEqual({ "n1|": 1, "n2|": 1 });
    expect(index.setStatus("g", { name: "g", pods: [running("n2"), running("n1")] })).toEqual([]); // same references
    expect(index.setSpec("g", { ...spec, dependencies: [{ podName: "db", policy: "namespace" }] }).sort()).toEqual(["db", "log"]);
    expect(index.of("log").size).toBe(0);
    expect(Object.fromEntries(index.of("db"))).toEqual({ "n1|a": 1, "n2|a": 1 });
    expect(index.setSpec("g", undefined)).toEqual(["db"]);
    expect(index.of("db").size).toBe(0);
  });

  it("reads PodGroup records leniently: string or integer policies, instances with their container count", () => {
    const spec = decodeGroupSpec({
      key: "/x/podgroups/g",
      modRevision: 1,
      value: JSON.stringify({ namespace: "a", pod: { dependencies: [{ podName: "d1", policy: 1 }, { podName: "d2", policy: "namespace" }, { podName: 3 }] } }),
    });
    expect(spec).toEqual({ name: "g", namespace: "a", version: 0, dependencies: [{ podName: "d1", policy: "node" }, { podName: "d2", policy: "namespace" }] });
    expect(decodeGroupStatus({ key: "/x/podgroup-status/g", modRevision: 1, value: JSON.stringify({ pods: [{ node: "n1", containers: [{}, {}] }] }) })).toEqual({
      name: "g",
      pods: [{ node: "n1", containers: 2 }],
    });
    expect(decodeGroupSpec({ key: "/x/podgroups/bad", modRevision: 1, value: "{" }).dependencies).toEqual([]);
  });
});

describe("dependency container naming", () => {
  it("labels with the same constant it identifies by, and names deterministically per slot", () => {
    const ref = { dependency: "log", node: "n1", scope: "app", version: 3, index: 1 };
    expect(containerName(ref)).toBe("log.v3-n1-Napp-C1");
    expect(containerName({ ...ref, scope: "", index: 0 })).toBe("log.v3-n1");
    const labels = containerLabels(ref);
    expect(labels["io.capstan.dependency"]).toBe("log");
    expect(labels["io.capstan.podgroup"]).toBeUndefined();
    expect(identify({ node: "n1", name: "anything", labels }, "log")).toEqual({ ...ref, format: "2" });
    expect(identify({ node: "n1", name: "x", labels }, "other")).toBeUndefined();
  });

  it("reads an older-format container's version from its label or its name", () => {
    const older = identify({ node: "n2", name: "log.v4-n2", labels: { "io.capstan.dependency": "log" } }, "log");
    expect(older).toEqual({ dependency: "log", node: "n2", scope: "", version: 4, index: 0, format: "1" });
    expect(identify({ node: "n2", name: "nothing", labels: { "io.capstan.dependency": "log" } }, "log")).toBeUndefined();
  });
});
