import { describe, expect, it } from "vitest";
import type { ContainerDetails, NodeResources } from "../../../adapters/cluster/cluster.ts";
import {
  fits,
  freeCapacity,
  matchesFilters,
  parsePlacementFilter,
  parsePlacementFilters,
  PlacementFilterError,
  pickNode,
  rankNodes,
  reservationOf,
  scoreNode,
} from "../../../adapters/cluster/placement.ts";

const GiB = 1024 ** 3;
const CPU = 1e9;

function node(name: string, over: Partial<NodeResources> = {}): NodeResources {
  return {
    name,
    endpoint: `unix:///tmp/${name}.sock`,
    address: "127.0.0.1",
    state: "ready",
    labels: {},
    cpus: 4,
    memoryBytes: 8 * GiB,
    containers: 0,
    containersRunning: 0,
    engineVersion: "20.10",
    ...over,
  };
}

describe("placement filters", () => {
  it("parses the four forms, tolerating spaces", () => {
    expect(parsePlacementFilters(["node==n1", " node != n2 ", "label:zone==eu-1", "label:disk!=hdd"])).toEqual([
      { kind: "node", op: "==", value: "n1" },
      { kind: "node", op: "!=", value: "n2" },
      { kind: "label", key: "zone", op: "==", value: "eu-1" },
      { kind: "label", key: "disk", op: "!=", value: "hdd" },
    ]);
  });

  it.each(["node=n1", "node==", "host==n1", "label:==x", "label zone==x", "", "node<>n1"])("rejects %j", (text) => {
    expect(() => parsePlacementFilter(text)).toThrow(PlacementFilterError);
    expect(() => parsePlacementFilter(text)).toThrow(/is not one of node==NAME/);
  });

  it("matches node names and engine labels; a missing label is != anything", () => {
    const n = node("n1", { labels: { zone: "eu-1" } });
    expect(matchesFilters(n, parsePlacementFilters(["node==n1", "label:zone==eu-1"]))).toBe(true);
    expect(matchesFilters(n, parsePlacementFilters(["node!=n1"]))).toBe(false);
    expect(matchesFilters(n, parsePlacementFilters(["label:zone==eu-2"]))).toBe(false);
    expect(matchesFilters(n, parsePlacementFilters(["label:disk!=hdd"]))).toBe(true);
    expect(matchesFilters(n, [])).toBe(true);
  });
});

function details(over: { node: string; running: boolean; labels: Record<string, string>; memoryBytes: number; nanoCpus: number }): ContainerDetails {
  return {
    node: over.node,
    id: "x",
    name: "x",
    image: "i",
    imageId: "sha256:i",
    created: 0,
    status: {
      state: over.running ? "running" : "exited",
      running: over.running,
      paused: false,
      restarting: false,
      oomKilled: false,
      dead: false,
      pid: 0,
      exitCode: 0,
      error: "",
      startedAt: undefined,
      finishedAt: undefined,
    },
    restartCount: 0,
    labels: over.labels,
    env: [],
    cmd: [],
    entrypoint: [],
    user: "",
    workingDir: "",
    memoryBytes: over.memoryBytes,
    nanoCpus: over.nanoCpus,
    binds: [],
    restartPolicy: { name: "no" },
    logConfig: { type: "json-file", config: {} },
    network: { networkMode: "none", networks: [], ports: [], portBindings: [] },
  };
}

describe("capacity and scoring", () => {
  it("counts only running Capstan containers as reservations", () => {
    const mem = GiB;
    expect(reservationOf(details({ node: "n1", running: true, labels: { "io.capstan.podgroup": "a" }, memoryBytes: mem, nanoCpus: CPU }))).toEqual({
      node: "n1",
      memoryBytes: mem,
      nanoCpus: CPU,
    });
    expect(reservationOf(details({ node: "n1", running: false, labels: { "io.capstan.podgroup": "a" }, memoryBytes: mem, nanoCpus: CPU }))).toBeUndefined();
    expect(reservationOf(details({ node: "n1", running: true, labels: { other: "a" }, memoryBytes: mem, nanoCpus: CPU }))).toBeUndefined();
  });

  it("subtracts reservations per node", () => {
    const [n1, n2] = freeCapacity([node("n1"), node("n2")], [
      { node: "n1", memoryBytes: 2 * GiB, nanoCpus: CPU },
      { node: "n1", memoryBytes: GiB, nanoCpus: 0 },
      { node: "gone", memoryBytes: GiB, nanoCpus: CPU },
    ]);
    expect(n1).toMatchObject({ freeMemoryBytes: 5 * GiB, freeNanoCpus: 3 * CPU });
    expect(n2).toMatchObject({ freeMemoryBytes: 8 * GiB, freeNanoCpus: 4 * CPU });
  });

  it("scores by the free fractions left after placing", () => {
    const [n] = freeCapacity([node("n1")], [{ node: "n1", memoryBytes: 4 * GiB, nanoCpus: 0 }]);
    // memory: (4 - 2) / 8 = 0.25; cpu: (4 - 1) / 4 = 0.75
    expect(scoreNode(n!, { memoryBytes: 2 * GiB, nanoCpus: CPU })).toBeCloseTo(0.5);
  });
});

describe("pickNode", () => {
  const caps = freeCapacity(
    [node("n1"), node("n2"), node("n3", { state: "unreachable" }), node("n4", { labels: { zone: "b" } })],
    [{ node: "n1", memoryBytes: 6 * GiB, nanoCpus: 0 }],
  );
  const small = { memoryBytes: GiB, nanoCpus: CPU / 2 };

  it("prefers free capacity, then name; never an unreachable node", () => {
    expect(rankNodes(caps, { request: small })).toEqual(["n2", "n4", "n1"]);
  });

  it("applies the spread hint before capacity", () => {
    expect(pickNode(caps, { request: small, groupCounts: { n2: 2, n4: 1 } })).toBe("n1");
    expect(pickNode(caps, { request: small, groupCounts: { n2: 1 } })).toBe("n4");
  });

  it("applies filters and skips nodes without room", () => {
    expect(pickNode(caps, { request: small, filters: parsePlacementFilters(["label:zone==b"]) })).toBe("n4");
    expect(pickNode(caps, { request: small, filters: parsePlacementFilters(["node==n3"]) })).toBeUndefined();
    expect(rankNodes(caps, { request: { memoryBytes: 3 * GiB, nanoCpus: 0 } })).toEqual(["n2", "n4"]);
  });

  it("is deterministic for equal nodes (ties by name)", () => {
    const twins = freeCapacity([node("b"), node("a"), node("c")], []);
    expect(pickNode(twins, { request: small })).toBe("a");
  });
});

describe("fits", () => {
  const caps = freeCapacity([node("n1", { memoryBytes: 4 * GiB }), node("n2", { memoryBytes: 4 * GiB })], []);

  it("places each request whole on one node", () => {
    expect(fits(caps, [{ memoryBytes: 3 * GiB, nanoCpus: 0 }, { memoryBytes: 3 * GiB, nanoCpus: 0 }])).toBe(true);
    // The total (9 GiB) is more than either node holds although each piece would fit alone.
    expect(fits(caps, [3, 3, 3].map((g) => ({ memoryBytes: g * GiB, nanoCpus: 0 })))).toBe(false);
    // Same total spread in smaller pieces fits.
    expect(fits(caps, [2, 2, 2, 1].map((g) => ({ memoryBytes: g * GiB, nanoCpus: 0 })))).toBe(true);
  });

  it("checks CPU as well as memory, and treats no limit as no reservation", () => {
    expect(fits(caps, [{ memoryBytes: 0, nanoCpus: 5 * CPU }])).toBe(false);
    expect(fits(caps, [{ memoryBytes: 0, nanoCpus: 4 * CPU }, { memoryBytes: 0, nanoCpus: 4 * CPU }])).toBe(true);
    expect(fits(caps, Array.from({ length: 50 }, () => ({ memoryBytes: 0, nanoCpus: 0 })))).toBe(true);
    expect(fits([], [{ memoryBytes: 0, nanoCpus: 0 }])).toBe(false);
  });
});
