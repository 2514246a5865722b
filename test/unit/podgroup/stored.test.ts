import { describe, expect, it } from "vitest";
import { decodeSpec, decodeStatus, decodeTask, layout, readInternal } from "../../../controllers/podgroup/stored.ts";
import { stored } from "./fixtures.ts";

const kv = (key: string, value: string) => ({ key, value, modRevision: 7 });

describe("layout", () => {
  it("mirrors api/resources/keys.ts under any root", () => {
    expect(layout().podGroup("x")).toBe("/platform/orchestrator/podgroups/x");
    expect(layout("/t/1").statusOf("x")).toBe("/t/1/podgroup-status/x");
    expect(layout("/t/1/").tasks).toBe("/t/1/tasks/");
  });
});

describe("decoding", () => {
  it("a stored spec decodes; unknown top-level fields are ignored", () => {
    const e = decodeSpec(kv("/p/podgroups/web", JSON.stringify({ ...stored(), addedLater: 1 })));
    expect(e).toMatchObject({ name: "web", modRevision: 7, spec: { name: "web", numInstances: 2 } });
    expect(e.invalid).toBeUndefined();
  });

  it("an unreadable spec is kept as invalid (never mistaken for a deleted one)", () => {
    expect(decodeSpec(kv("/p/podgroups/web", "{"))).toMatchObject({ name: "web", spec: undefined, invalid: expect.stringMatching(/^not JSON/) });
    const noVersion = stored();
    (noVersion.pod as { version?: number }).version = undefined;
    expect(decodeSpec(kv("/p/podgroups/web", JSON.stringify(noVersion))).invalid).toMatch(/^pod\.version/);
    expect(decodeSpec(kv("/p/podgroups/other", JSON.stringify(stored()))).invalid).toMatch(/differs from its key/);
  });

  it("a status of another shape reads as absent but keeps its modRevision (for the overwrite)", () => {
    expect(decodeStatus(kv("/p/podgroup-status/web", "garbage"))).toEqual({ name: "web", status: undefined, modRevision: 7 });
    expect(decodeStatus(kv("/p/podgroup-status/web", '{"state":"x"}')).status).toBeUndefined();
    expect(decodeStatus(kv("/p/podgroup-status/web", '{"state":"running","pods":[]}')).status).toEqual({ state: "running", pods: [], instanceBase: 1 });
  });

  it("a status of the 0-based numbering (no instanceBase) reads numbered from 1: pods, instance records, rollout step", () => {
    const old = {
      state: "updating",
      pods: [{ instanceNo: 0 }, { instanceNo: 1 }],
      internal: { instances: { "0": { restarts: 2, failures: 0 }, "1": { restarts: 0, failures: 1 } }, rollout: { instance: 1, toVersion: 2, phase: "removed", at: 5 } },
    };
    const status = decodeStatus(kv("/p/podgroup-status/web", JSON.stringify(old))).status!;
    expect(status.pods.map((p) => p.instanceNo)).toEqual([1, 2]);
    expect(status.instanceBase).toBe(1);
    expect(readInternal(status)).toEqual({ instances: { "1": { restarts: 2, failures: 0 }, "2": { restarts: 0, failures: 1 } }, rollout: { instance: 2, toVersion: 2, phase: "removed", at: 5 } });
    // Written since (instanceBase 1): read as it is, never shifted twice.
    expect(decodeStatus(kv("/p/podgroup-status/web", JSON.stringify(status))).status).toEqual(status);
  });

  it("only refresh tasks are tasks of this controller", () => {
    expect(decodeTask(kv("/p/tasks/1", '{"kind":"refresh","podGroup":"web"}')).task).toMatchObject({ podGroup: "web" });
    expect(decodeTask(kv("/p/tasks/1", '{"kind":"drift"}')).task).toBeUndefined();
  });

  it("a drift task numbered from 1 (instanceBase 1) with instance 0 is refused; one of the 0-based numbering reads 0 as instance 1", () => {
    const drift = (over: object) => decodeTask(kv("/p/tasks/1", JSON.stringify({ kind: "drift", from: "n1", podGroup: "web", ...over }))).task;
    expect(drift({ instance: 0, instanceBase: 1 })).toBeUndefined();
    expect(drift({ instance: 1, instanceBase: 1 })).toMatchObject({ instance: 1 });
    expect(drift({ instance: 0 })).toMatchObject({ instance: 1 });
  });

  it("readInternal keeps well-formed records only", () => {
    const status = {
      state: "running" as const,
      lastError: "",
      updatedAt: "",
      observedVersion: 1,
      pods: [],
      internal: {
        rollout: { instance: 1, toVersion: 2, phase: "removed", at: 5 },
        instances: { "0": { restarts: 2, failures: 1, nextAttemptAt: 9, node: "n1", bogus: true }, x: { restarts: 1 }, "1": "nope" },
      },
    };
    expect(readInternal(status)).toEqual({
      rollout: { instance: 1, toVersion: 2, phase: "removed", at: 5 },
      instances: { "0": { restarts: 2, failures: 1, nextAttemptAt: 9, node: "n1" } },
    });
    expect(readInternal({ ...status, internal: { rollout: { instance: 1, phase: "bad" } } })).toEqual({ instances: {} });
    expect(readInternal(undefined)).toEqual({ instances: {} });
  });
});
