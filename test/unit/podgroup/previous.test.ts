// The decisions behind rolling restarts and previous containers (docs/podgroup-controller.md, "The
// previous container" and "Rolling restart"): previous names, classify() keeping them out of the
// instances, restartedAt in labels and ranking, the status listing them, and the logs API's cut
// between a restarted container's earlier runs and its current one.
import { describe, expect, it } from "vitest";
import { earlierRunsUntil } from "../../../api/orchestrator/logs.ts";
import { planContainer } from "../../../controllers/podgroup/container-spec.ts";
import { identify, labelKeys } from "../../../controllers/podgroup/naming.ts";
import { classify } from "../../../controllers/podgroup/observe.ts";
import { buildStatus } from "../../../controllers/podgroup/status.ts";
import { decodeSpec, readInternal } from "../../../controllers/podgroup/stored.ts";
import { isPreviousContainer, previousContainerName, previousSlot } from "../../../controllers/shared/previous.ts";
import { cached, stored } from "./fixtures.ts";

const opts = { group: "web", version: 1, podSize: 1, reachable: () => true };

describe("previous container names", () => {
  it("one fixed name per instance and container index, told apart from every pod container name", () => {
    expect(previousContainerName("shop.web", 0, 0)).toBe("shop.web.previous-i0");
    expect(previousContainerName("shop.web", 3, 2)).toBe("shop.web.previous-i3-c2");
    expect(isPreviousContainer({ name: "shop.web.previous-i3-c2" })).toBe(true);
    for (const name of ["shop.web.v1-i0-d0", "shop.web.v1-i0-d0-c1", "previous.v2-i1-d0", "x-previous-i1"]) expect(isPreviousContainer({ name }), name).toBe(false);
    expect(previousSlot("shop.web.previous-i3-c2", "shop.web")).toEqual({ instance: 3, index: 2 });
    expect(previousSlot("shop.web.previous-i3", "shop.web")).toEqual({ instance: 3, index: 0 });
    expect(previousSlot("shop.webx.previous-i3", "shop.web")).toBeUndefined();
  });

  it("identify() does not take a previous container for an instance's, whatever its labels say", () => {
    const c = cached({ instance: 1 }, { name: "web.previous-i1" });
    expect(identify(c, "web")).toBeUndefined();
    expect(identify(cached({ instance: 1 }), "web")).toMatchObject({ instance: 1 });
  });
});

describe("classify with previous containers and restartedAt", () => {
  it("sorts previous containers apart, by instance: never kept, never an extra", () => {
    const pod = cached({ instance: 0 });
    const prev = cached({ instance: 0 }, { name: "web.previous-i0", state: "exited", exitCode: 0 });
    const orphan = cached({ instance: 4 }, { name: "web.previous-i4", state: "exited", exitCode: 0 });
    const renamedByHand = cached({ instance: 2, index: 1 }, { name: "other.previous-i9", state: "exited", exitCode: 0 });
    const v = classify([prev, pod, orphan, renamedByHand], opts);
    expect([...v.instances.keys()]).toEqual([0]);
    expect(v.instances.get(0)!.kept!.containers.get(0)!.c.id).toBe(pod.id);
    expect(v.instances.get(0)!.extras).toEqual([]);
    expect(v.previous.get(0)!.map((p) => p.c.id)).toEqual([prev.id]);
    expect(v.previous.get(4)!.map((p) => p.c.id)).toEqual([orphan.id]);
    // A previous name of another group (renamed by hand): its labels place it.
    expect(v.previous.get(2)!.map((p) => [p.c.id, p.index])).toEqual([[renamedByHand.id, 1]]);
    expect(v.unidentified).toEqual([]);
  });

  it("a pod created under the spec's restartedAt outranks one created before it", () => {
    const old = cached({ instance: 0, node: "n1" });
    const base = cached({ instance: 0, node: "n2" }, { state: "created" });
    const fresh = { ...base, labels: { ...base.labels, [labelKeys.restartedAt]: "2026-11-26T12:00:00.000Z" } };
    const v = classify([old, fresh], { ...opts, restartedAt: "2026-11-26T12:00:00.000Z" }).instances.get(0)!;
    expect(v.kept!.restartedAt).toBe("2026-11-26T12:00:00.000Z");
    expect(v.extras.map((o) => o.c.id)).toEqual([old.id]);
    // Without a restart asked for, a pod without the label is current.
    expect(classify([old], opts).instances.get(0)!.kept!.restartedAt).toBe("");
  });

  it("containers are labelled with the restartedAt they are created under, and only then", () => {
    expect(planContainer(stored(), 1, 0, 0).spec.labels?.[labelKeys.restartedAt]).toBeUndefined();
    expect(planContainer(stored({ restartedAt: "2026-11-26T12:00:00.000Z" }), 1, 0, 0).spec.labels?.[labelKeys.restartedAt]).toBe("2026-11-26T12:00:00.000Z");
  });
});

describe("stored records", () => {
  it("a spec without restartedAt (written before rolling restarts) decodes; one with it keeps it", () => {
    const spec = stored();
    const kv = (v: object) => ({ key: "/p/podgroups/web", value: JSON.stringify(v), modRevision: 3 });
    expect(decodeSpec(kv(spec)).spec).toBeDefined();
    expect(decodeSpec(kv(spec)).spec!.restartedAt).toBeUndefined();
    expect(decodeSpec(kv({ ...spec, restartedAt: "2026-11-26T12:00:00.000Z" })).spec!.restartedAt).toBe("2026-11-26T12:00:00.000Z");
  });

  it("the rollout step remembers that it is a restart; older steps read without it", () => {
    const step = { instance: 1, toVersion: 2, phase: "removed", at: 5 };
    const status = (rollout: object) => ({ state: "updating" as const, lastError: "", updatedAt: "", observedVersion: 1, pods: [], internal: { rollout, instances: {} } });
    expect(readInternal(status(step)).rollout).toEqual(step);
    expect(readInternal(status({ ...step, restart: true })).rollout).toEqual({ ...step, restart: true });
  });
});

describe("status", () => {
  it("lists an instance's previous containers under previous, and counts only its pod", () => {
    const spec = stored({ numInstances: 1 });
    const prev = cached({ instance: 1 }, { name: "web.previous-i1", state: "exited", exitCode: 0 });
    const view = classify([cached({ instance: 1 }), prev], { group: "web", version: spec.pod.version, podSize: 1, reachable: () => true });
    const s = buildStatus({ spec, removing: false, view, internal: { instances: {} }, previous: undefined, reachable: () => true, nodeAddress: () => "127.0.0.1", notes: [], now: 0 });
    expect(s.state).toBe("running");
    expect(s.pods).toHaveLength(1);
    expect(s.pods[0]!.containers).toHaveLength(1);
    expect(s.pods[0]!.previous).toEqual([expect.objectContaining({ id: prev.id, name: "web.previous-i1", status: "exited" })]);
  });
});

describe("earlierRunsUntil (logs?previous=true on a container restarted in place)", () => {
  const state = { running: true, restarting: false, startedAt: 10_000, finishedAt: 8_000 };
  it("cuts halfway between the last exit and the current start", () => {
    expect(earlierRunsUntil(state)).toBe(9_000);
  });
  it("has no earlier runs when the container never exited, or is not running again", () => {
    expect(earlierRunsUntil({ ...state, finishedAt: undefined })).toBeUndefined();
    expect(earlierRunsUntil({ ...state, running: false })).toBeUndefined();
    expect(earlierRunsUntil({ ...state, finishedAt: 11_000 })).toBeUndefined();
    expect(earlierRunsUntil({ ...state, startedAt: undefined })).toBeUndefined();
  });
});
