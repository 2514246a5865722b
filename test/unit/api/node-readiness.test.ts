// The orchestrator's readiness condition on node records (api/orchestrator/node-readiness.ts):
// ready once the node cache is synced and holds a record, ready or unreachable, for every node of
// -cluster; otherwise what it waits for, naming the missing nodes.
import { describe, expect, it } from "vitest";
import { nodesRecorded } from "../../../api/orchestrator/node-readiness.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";

function cache(synced: boolean, names: string[]) {
  const records = new Map(names.map((name) => [keys.node(name), { name } as NodeRecord]));
  return { hasSynced: () => synced, get: (key: string) => records.get(key) };
}

describe("nodesRecorded", () => {
  it("needs a synced cache with every expected node, and says which records it waits for", () => {
    expect(nodesRecorded(cache(true, ["n1", "n2"]), ["n1", "n2"])).toBe(true);
    expect(nodesRecorded(cache(true, ["n1", "n2", "old"]), ["n1", "n2"])).toBe(true); // a leftover record is no harm
    // A fresh store: the monitor has not written yet.
    expect(nodesRecorded(cache(true, []), ["n1", "n2"])).toBe("waiting for node records: n1, n2");
    expect(nodesRecorded(cache(true, ["n1"]), ["n1", "n2"])).toBe("waiting for node records: n2");
    expect(nodesRecorded(cache(false, ["n1", "n2"]), ["n1", "n2"])).toBe("waiting for the node records' cache");
  });
});
