// container-spec.ts, checkPlacement: a dependency pod goes to its slot's node, whatever a node==
// filter says; the spec's other filters must hold there ("What runs where" in docs/dependencies.md).
import { describe, expect, it } from "vitest";
import type { NodeResources } from "../../../adapters/cluster/index.ts";
import { checkPlacement } from "../../../controllers/dependency/container-spec.ts";

const node = (name: string, labels: Record<string, string> = {}): NodeResources => ({
  name, endpoint: "", address: "127.0.0.1", state: "ready", labels, cpus: 4, memoryBytes: 2 ** 30, containers: 0, containersRunning: 0, engineVersion: "x",
});
const nodes = [node("n1", { disk: "ssd" }), node("n2")];
const slot = (name: string) => ({ node: name, scope: "" });

describe("checkPlacement", () => {
  it.each([
    { row: "no filters", filters: undefined, at: "n1", error: undefined },
    { row: "node== is ignored: the pod goes to its slot's node", filters: ["node==n2"], at: "n1", error: undefined },
    { row: "a label filter that holds", filters: ["label:disk==ssd"], at: "n1", error: undefined },
    { row: "a label filter that does not hold", filters: ["label:disk==ssd"], at: "n2", error: "node n2 does not match the dependency's filters (label:disk==ssd)" },
    { row: "node!= the slot's node", filters: ["node!=n1"], at: "n1", error: "node n1 does not match the dependency's filters (node!=n1)" },
    { row: "a node not in the cluster", filters: undefined, at: "n9", error: "node n9 is not in the cluster" },
  ])("$row", ({ filters, at, error }) => {
    const check = () => checkPlacement({ filters }, slot(at), nodes);
    if (error === undefined) expect(check).not.toThrow();
    else expect(check).toThrow(error);
  });
});
