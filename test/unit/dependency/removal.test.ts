// removal.ts: RemoveSpec (the DELETE rows of docs/dependencies.md) and D5: the removal waits only
// for unreachable nodes that may hold the dependency's containers.
import { describe, expect, it } from "vitest";
import { nodesToWaitFor, removableNow } from "../../../controllers/dependency/removal.ts";
import { container } from "./fixtures.ts";

interface Row {
  row: string;
  holding: string[];
  unreachable: string[];
  heardFrom: string[];
  wait: string[];
}

const rows: Row[] = [
  { row: "every node reachable: nothing to wait for", holding: ["n1"], unreachable: [], heardFrom: ["n1", "n2"], wait: [] },
  { row: "D5: an unreachable node with containers in the cache is waited for", holding: ["n2"], unreachable: ["n2"], heardFrom: ["n1", "n2"], wait: ["n2"] },
  { row: "D5: an unreachable node heard from, with none cached, holds none", holding: [], unreachable: ["n2"], heardFrom: ["n1", "n2"], wait: [] },
  { row: "D5: an unreachable node never heard from since start may hold some", holding: [], unreachable: ["n2"], heardFrom: ["n1"], wait: ["n2"] },
  { row: "D5: several, each once, those holding first", holding: ["n3", "n3"], unreachable: ["n2", "n3"], heardFrom: ["n1"], wait: ["n3", "n2"] },
];

describe("nodesToWaitFor (D5)", () => {
  it.each(rows)("$row", (r) => {
    const wait = nodesToWaitFor({
      holding: r.holding,
      nodes: ["n1", "n2", "n3"],
      reachable: (node) => !r.unreachable.includes(node),
      heardFrom: (node) => r.heardFrom.includes(node),
    });
    expect(wait).toEqual(r.wait);
  });
});

describe("removableNow (D4)", () => {
  it("only the containers on reachable nodes are removed now", () => {
    const here = container({ slot: "n1|" });
    const there = container({ slot: "n2|" });
    expect(removableNow([here, there], (node) => node === "n1")).toEqual([here]);
  });
});
