import { describe, expect, it } from "vitest";
import { renderPodGroup, renderPodGroupList, table } from "../../../cli/render.ts";
import { group, pod } from "./fixtures.ts";

describe("table", () => {
  it("pads columns to their widest cell, two spaces apart, with - for empty cells and no trailing blanks", () => {
    expect(table(["A", "LONGER", "C"], [["xxxx", "", "last"], ["y", "z", ""]])).toBe(
      ["A     LONGER  C", "xxxx  -       last", "y     z       -", ""].join("\n"),
    );
  });

  it("keeps a multi-line cell on one line", () => {
    expect(table(["E"], [["first\n  second"]])).toBe("E\nfirst second\n");
  });
});

describe("renderPodGroup", () => {
  it("shows the group line, then one row per instance in instance order", () => {
    const g = group(
      [
        pod(1, "exited", 1, { restartCount: 3, lastError: "exited with code 3", containers: [{ id: "b", name: "hello.v1-i1-d0", node: "n2", nodeIp: "127.0.0.1", ip: "", status: "exited", exitCode: 3 }] }),
        pod(0, "running"),
      ],
      { numInstances: 2, state: "degraded", lastError: "instance 1 is not running" },
    );
    expect(renderPodGroup(g)).toBe(
      [
        "PODGROUP  NAMESPACE  STATE     INSTANCES  VERSION  RESTART  LAST ERROR",
        "hello     demo       degraded  1/2        1        always   instance 1 is not running",
        "",
        "INSTANCE  STATE    NODE  VERSION  RESTARTS  CONTAINERS                LAST ERROR",
        "0         running  n1    1        0         hello.v1-i0-d0 running    -",
        "1         exited   n2    1        3         hello.v1-i1-d0 exited(3)  exited with code 3",
        "",
      ].join("\n"),
    );
  });

  it("counts only pods running at the spec's version as running instances", () => {
    const g = group([pod(0, "running", 2), pod(1, "running", 1)], { version: 2, state: "updating" });
    expect(renderPodGroup(g).split("\n")[1]).toMatch(/^hello +demo +updating +1\/2 +2 +always +-$/);
  });

  it("says when the last rolling restart was asked for, under the group's line", () => {
    const g = group([pod(0, "running")]);
    g.spec.restartedAt = "2026-11-26T12:00:00.000Z";
    expect(renderPodGroup(g).split("\n").slice(1, 4)).toEqual([
      "hello     demo       running  1/1        1        always   -",
      "rolling restart requested at 2026-11-26T12:00:00.000Z",
      "",
    ]);
    expect(renderPodGroup(group([pod(0, "running")]))).not.toMatch(/rolling restart/);
  });

  it("says so when the group has no instances", () => {
    expect(renderPodGroup(group([], { numInstances: 0 }))).toMatch(/\n\nno instances\n$/);
  });
});

describe("renderPodGroupList", () => {
  it("shows one row per group", () => {
    const a = group([pod(0, "running")]);
    const b = group([], { numInstances: 2, state: "pending" });
    b.spec.name = "web";
    expect(renderPodGroupList([a, b])).toBe(
      [
        "NAME   NAMESPACE  STATE    INSTANCES  VERSION  RESTART  LAST ERROR",
        "hello  demo       running  1/1        1        always   -",
        "web    demo       pending  0/2        1        always   -",
        "",
      ].join("\n"),
    );
  });

  it("says so when there is no group", () => {
    expect(renderPodGroupList([])).toBe("no podgroups\n");
  });
});
