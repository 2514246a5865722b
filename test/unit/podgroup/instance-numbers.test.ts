// Instances are numbered from 1 (docs/podgroup-controller.md, "Instance numbers"): the shared
// range helpers, the status records of the 0-based releases as readers see them, and every place a
// user gives an instance number refusing 0 with the same words.
import { describe, expect, it, vi } from "vitest";
import { firstInstanceNo, instanceNumbers, isCurrentInstance, podsNumberedFromOne, type PodStatus } from "../../../api/resources/podgroup.ts";
import { instanceParam } from "../../../api/orchestrator/queries.ts";
import { cachedStatusOf } from "../../../api/orchestrator/informers.ts";
import { instanceTarget } from "../../../cli/instance-arg.ts";
import { run as logs } from "../../../cli/commands/logs.ts";

const pod = (instanceNo: number) => ({ instanceNo }) as PodStatus;

describe("instance numbers", () => {
  it("a group of n runs instances 1..n", () => {
    expect(firstInstanceNo).toBe(1);
    expect(instanceNumbers(3)).toEqual([1, 2, 3]);
    expect(instanceNumbers(0)).toEqual([]);
    expect([0, 1, 3, 4].map((i) => isCurrentInstance(i, 3))).toEqual([false, true, true, false]);
  });

  it("a status record of the 0-based numbering reads with one added, once; a current one as it is", () => {
    const old = { state: "running", pods: [pod(0), pod(1)] };
    const read = podsNumberedFromOne(old);
    expect(read.pods.map((p) => p.instanceNo)).toEqual([1, 2]);
    expect(podsNumberedFromOne(read)).toBe(read);
    const current = { state: "running", pods: [pod(1)], instanceBase: 1 };
    expect(podsNumberedFromOne(current)).toBe(current);
    // What the API's caches hold (GET /api/podgroups, logs, exec).
    expect((cachedStatusOf(old) as { pods: PodStatus[] }).pods.map((p) => p.instanceNo)).toEqual([1, 2]);
  });

  it("the API's instance parameter refuses 0: instances are numbered from 1", () => {
    expect(instanceParam.parse("1")).toBe(1);
    const zero = instanceParam.safeParse("0");
    expect(zero.success).toBe(false);
    expect(zero.error?.issues[0]?.message).toBe("must be at least 1: instances are numbered from 1");
  });

  it("NAME/INSTANCE of capstan logs and exec refuses 0 as a usage error", () => {
    expect(instanceTarget("web/1")).toEqual({ name: "web", instance: 1 });
    expect(instanceTarget("web")).toEqual({ name: "web" });
    expect(() => instanceTarget("web/0")).toThrow(/"web\/0": instances are numbered from 1 \(e\.g\. web\/1\)/);
  });

  it("every NAME/INSTANCE example of capstan logs -h is a valid instance", async () => {
    const out: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => (out.push(String(chunk)), true));
    try {
      expect(await logs(["-h"])).toBe(0);
    } finally {
      write.mockRestore();
    }
    const examples = out.join("").split("\n").filter((line) => line.trim().startsWith("capstan logs "));
    expect(examples.length).toBeGreaterThan(0);
    for (const line of examples) {
      const target = line.trim().split(/\s+/)[2]!;
      expect(() => instanceTarget(target), line).not.toThrow();
    }
    expect(examples.some((line) => line.includes("hello/1 -previous"))).toBe(true);
  });
});
