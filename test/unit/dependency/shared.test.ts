// controllers/shared: the pure pieces both controllers use (the Dependency controller imports
// them; the PodGroup controller is to switch to them).
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { restartBackoff, restartDelayMs } from "../../../controllers/shared/backoff.ts";
import { containerStatus, needsDetails, podContainersState, stoppedPod } from "../../../controllers/shared/containers.ts";
import { currentFormat } from "../../../controllers/shared/format.ts";
import { settleAll } from "../../../controllers/shared/settle.ts";
import { decodeSpecRecord } from "../../../controllers/shared/spec-records.ts";
import { sameStatus } from "../../../controllers/shared/status-records.ts";
import { volumeBind } from "../../../controllers/shared/volumes.ts";

const container = (over: Partial<CachedContainer>): CachedContainer =>
  ({ node: "n1", id: "abc", name: "x", image: "i", labels: {}, state: "running", ports: [], generation: 1, ...over }) as CachedContainer;

describe("controllers/shared", () => {
  it("back-off: 1 s doubling to the cap; bad settings refused", () => {
    const b = restartBackoff();
    expect([1, 2, 3, 9, 10, 5_000].map((n) => restartDelayMs(n, b))).toEqual([1_000, 2_000, 4_000, 256_000, 300_000, 300_000]);
    expect(restartBackoff({ initialMs: 200, maxMs: 1_000 })).toEqual({ initialMs: 200, maxMs: 1_000, resetAfterMs: 600_000 });
    expect(() => restartBackoff({ initialMs: 0 })).toThrow(RangeError);
    expect(() => restartBackoff({ initialMs: 10, maxMs: 5 })).toThrow(RangeError);
  });

  it("volumes: named and path forms, mode kept, anything else refused", () => {
    expect(volumeBind("o", "db:/var/lib/db:ro")).toBe("o.db:/var/lib/db:ro");
    expect(volumeBind("o", "/a/b")).toMatch(/^o\.a_b-[0-9a-f]{6}:\/a\/b$/);
    expect(volumeBind("o", "/a/b")).not.toBe(volumeBind("o", "/a_b"));
    expect(() => volumeBind("o", "relative")).toThrow(TypeError);
  });

  it("containers: details still missing, the status entry, the pod state", () => {
    expect(needsDetails(container({}))).toBe(true);
    const full = container({ limits: { memoryBytes: 0, nanoCpus: 0 }, ip: "", startedAt: 1_000 });
    expect(needsDetails(full)).toBe(false);
    expect(containerStatus(full, "10.0.0.1", currentFormat)).toEqual({
      id: "abc", name: "x", node: "n1", nodeIp: "10.0.0.1", ip: "", status: "running", startedAt: new Date(1_000).toISOString(),
    });
    expect(containerStatus(full, "", "1").format).toBe("1");
    expect(podContainersState([full, full])).toBe("running");
    expect(podContainersState([full, container({ state: "exited", exitCode: 0 })])).toBe("exited");
    expect(podContainersState([full, container({ state: "exited", exitCode: 2 })])).toBe("failed");
    expect(podContainersState([container({ state: "created" })])).toBe("pending");
    const early = container({ id: "a", state: "exited", finishedAt: 1 });
    const late = container({ id: "b", state: "dead", finishedAt: 2 });
    expect(stoppedPod([early, late, full]).lastStopped?.id).toBe("b");
    expect(stoppedPod([early, container({ state: "removing" })])).toEqual({ blocked: "busy" });
    expect(stoppedPod([early, container({ state: "paused" })])).toEqual({ blocked: "paused" });
    expect(stoppedPod([full])).toEqual({});
  });

  it("settleAll waits for every promise before it rethrows the first failure", async () => {
    let late = false;
    const slow = new Promise<void>((r) => setTimeout(() => ((late = true), r()), 20));
    await expect(settleAll([Promise.reject(new Error("first")), slow])).rejects.toThrow("first");
    expect(late).toBe(true);
  });

  it("sameStatus ignores updatedAt only; decodeSpecRecord never throws", () => {
    const a = { updatedAt: "1", state: "x" };
    expect(sameStatus(a, { updatedAt: "2", state: "x" })).toBe(true);
    expect(sameStatus(a, { updatedAt: "1", state: "y" })).toBe(false);
    expect(sameStatus(undefined, a)).toBe(false);
    const schema = z.object({ name: z.string(), n: z.number() });
    const kv = (value: string) => ({ key: "/p/d/x", value, modRevision: 7 });
    expect(decodeSpecRecord(kv('{"name":"x","n":1}'), schema)).toEqual({ name: "x", spec: { name: "x", n: 1 }, modRevision: 7 });
    expect(decodeSpecRecord(kv("{"), schema).invalid).toMatch(/^not JSON/);
    expect(decodeSpecRecord(kv('{"name":"x"}'), schema).invalid).toMatch(/^n: /);
    expect(decodeSpecRecord(kv('{"name":"y","n":1}'), schema).invalid).toBe("stored name y differs from its key");
  });
});
