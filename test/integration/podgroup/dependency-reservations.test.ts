// PodGroup placement counts the memory and CPU held by dependency pods (review finding 4). A
// container labelled io.capstan.dependency holding every CPU of n1 is started on n1 (as the
// Dependency controller would run a pod); a group of two pods of 0.5 CPU each then goes to n2
// only, where before both nodes were used for the spread.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DriftHarness, serve, services } from "../drift/harness.ts";

const h = new DriftHarness();
const dependency = `${h.namePrefix}-dep`;

beforeAll(async () => {
  await h.start();
}, 60_000);

afterAll(async () => {
  const mine = await h.cluster.listContainers("n1", { all: true, filters: { label: [`io.capstan.dependency=${dependency}`] } });
  await Promise.all(mine.map((c) => h.cluster.remove(c, { force: true })));
  await h.cleanup();
}, 60_000);

describe("placement next to dependency pods", () => {
  it("does not place a PodGroup pod on a node whose CPUs dependency pods hold", async () => {
    const n1 = (await h.nodes()).find((n) => n.name === "n1")!;
    const ref = await h.cluster.create("n1", dependency, {
      image: services.testImage,
      cmd: serve,
      labels: { "io.capstan.dependency": dependency },
      nanoCpus: n1.cpus * 1e9,
      networkMode: "none",
    });
    await h.cluster.start(ref);
    await h.until("n1's CPUs reserved", async () => {
      const r = (await h.nodes()).find((n) => n.name === "n1");
      return r !== undefined && r.reserved.cpus >= n1.cpus;
    }, 20_000);

    const g = h.name("cpu");
    await h.create(g, 2, {}, { cpuLimit: 0.5 });
    const placed = await h.running(g, 2);
    expect(placed.map((a) => a.c.node)).toEqual(["n2", "n2"]);
  }, 60_000);
});
