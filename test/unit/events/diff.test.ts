// Events read from status writes (controllers/podgroup/events.ts, controllers/dependency/events.ts,
// controllers/shared/restart-events.ts): which reasons a change of status and bookkeeping gives.
import { describe, expect, it } from "vitest";
import type { DependencyStatus } from "../../../api/resources/dependency.ts";
import type { EventInput } from "../../../api/resources/event.ts";
import type { PodGroupStatus, PodStatus } from "../../../api/resources/podgroup.ts";
import { dependencyEvents } from "../../../controllers/dependency/events.ts";
import { PodGroupEvents } from "../../../controllers/podgroup/events.ts";
import type { InstanceRecord, Internal } from "../../../controllers/podgroup/stored.ts";
import { restartRecordEvents } from "../../../controllers/shared/restart-events.ts";

const spec = (version = 1, numInstances = 1) => ({ name: "shop.web", namespace: "shop", numInstances, restartPolicy: "onfail" as const, pod: { version } });

function pod(instanceNo: number, state: PodStatus["state"], version = 1, extra: Partial<PodStatus> = {}): PodStatus {
  return {
    instanceNo,
    state,
    lastError: "",
    restartCount: 0,
    driftCount: 0,
    version,
    node: "n1",
    containers: state === "missing" ? [] : [{ id: `c${instanceNo}`, name: `shop.web.v${version}-i${instanceNo}-d0`, node: "n1", nodeIp: "127.0.0.1", ip: "", status: state === "running" ? "running" : "created" }],
    ...extra,
  };
}

function status(state: PodGroupStatus["state"], observedVersion: number, pods: PodStatus[], internal?: Partial<Internal>, lastError = ""): PodGroupStatus {
  return { state, lastError, updatedAt: "", observedVersion, pods, ...(internal && { internal: { instances: {}, ...internal } as unknown as Record<string, unknown> }) };
}

const reasons = (es: EventInput[]) => es.map((e) => e.reason);

describe("PodGroup events", () => {
  it("a create: DeployStarted on the first status, DeploySucceeded once every instance runs", () => {
    const ev = new PodGroupEvents();
    const s1 = status("pending", 1, [pod(0, "pending"), pod(1, "missing")]);
    const first = ev.diff("shop.web", spec(1, 2), undefined, s1);
    expect(reasons(first)).toEqual(["DeployStarted"]);
    expect(first[0]).toMatchObject({ type: "Normal", kind: "podgroup", name: "shop.web", app: "shop", message: "deploying version 1: 2 instance(s)" });
    const s2 = status("running", 1, [pod(0, "running"), pod(1, "running")]);
    expect(reasons(ev.diff("shop.web", spec(1, 2), s1, s2))).toEqual(["DeploySucceeded"]);
    // Later writes of a running group say nothing new.
    expect(ev.diff("shop.web", spec(1, 2), s2, { ...s2, updatedAt: "x" })).toEqual([]);
  });

  it("both in one write when the first pass already runs everything", () => {
    const ev = new PodGroupEvents();
    expect(reasons(ev.diff("g", spec(), undefined, status("running", 1, [pod(0, "running")])))).toEqual(["DeployStarted", "DeploySucceeded"]);
  });

  it("a spec update: started at the rollout's intent, succeeded when converged, failed when halted", () => {
    const ev = new PodGroupEvents();
    const running = status("running", 1, [pod(0, "running"), pod(1, "running")]);
    const intent = status("updating", 1, [pod(0, "upgrading"), pod(1, "running")], { rollout: { instance: 0, toVersion: 2, phase: "removing", at: 1 } });
    const started = ev.diff("g", spec(2, 2), running, intent);
    expect(reasons(started)).toEqual(["DeployStarted"]);
    expect(started[0]!.message).toBe("updating from version 1 to version 2, one instance at a time");
    const halted = status("failed", 1, [pod(0, "failed", 2), pod(1, "running")], { rollout: { instance: 0, toVersion: 2, phase: "removed", at: 1 } }, "update to version 2 halted at instance 0: g.v2-i0-d0 exited with code 3");
    expect(reasons(ev.diff("g", spec(2, 2), intent, halted))).toEqual(["DeployFailed"]);
    expect(reasons(ev.diff("g", spec(2, 2), halted, { ...halted, updatedAt: "later" }))).toEqual([]);
    const done = status("running", 2, [pod(0, "running", 2), pod(1, "running", 2)]);
    expect(reasons(ev.diff("g", spec(2, 2), halted, done))).toEqual(["DeploySucceeded"]);
  });

  it("a rolling restart that halts is a DeployFailed too", () => {
    const ev = new PodGroupEvents();
    const running = status("running", 1, [pod(0, "running"), pod(1, "running")]);
    const halted = status("failed", 1, [pod(0, "failed"), pod(1, "running")], undefined, "restart requested at 2026-11-26T12:00:00.000Z halted at instance 0: g.v1-i0-d0 exited with code 3");
    expect(reasons(ev.diff("g", spec(1, 2), running, halted))).toEqual(["DeployFailed"]);
  });

  it("a scale-up is no deploy; a crash recovery is no DeploySucceeded", () => {
    const ev = new PodGroupEvents();
    const one = status("running", 1, [pod(0, "running")]);
    expect(ev.diff("g", spec(1, 2), one, status("scaling", 1, [pod(0, "running"), pod(1, "missing")]))).toEqual([]);
    const degraded = status("degraded", 1, [pod(0, "failed")]);
    expect(reasons(ev.diff("g", spec(), one, degraded))).toEqual([]);
    expect(reasons(ev.diff("g", spec(), degraded, one))).toEqual([]);
  });

  it("a crash and its restart, from the instance's restart record; a crash loop once the back-off grows", () => {
    const ev = new PodGroupEvents();
    const rec = (r: Partial<InstanceRecord>): Partial<Internal> => ({ instances: { "0": { restarts: 0, failures: 0, ...r } } });
    const running = status("running", 1, [pod(0, "running")]);
    const crashed = status("failed", 1, [pod(0, "failed")], rec({ failures: 1, lastExit: "c0#0", lastExitPolicy: "onfail", nextAttemptAt: 5, lastError: "exited with code 3; restart 1 at 2026-11-26T10:00:01.000Z" }));
    const e1 = ev.diff("g", spec(), running, crashed);
    expect(reasons(e1)).toEqual(["InstanceCrashed"]);
    expect(e1[0]).toMatchObject({ type: "Warning", instance: 0, node: "n1", message: "instance 0 exited with code 3" });
    const restarted = status("running", 1, [pod(0, "running", 1, { restartCount: 1 })], rec({ restarts: 1, failures: 1, lastExit: "c0#0", lastExitPolicy: "onfail", nextAttemptAt: 5, lastError: "exited with code 3; restart 1 at x" }));
    const e2 = ev.diff("g", spec(), crashed, restarted);
    expect(reasons(e2)).toEqual(["InstanceRestarted"]);
    expect(e2[0]!.message).toBe("instance 0 restarted by restart policy onfail");
    const third = status("failed", 1, [pod(0, "failed")], rec({ restarts: 1, failures: 3, lastExit: "c0#1", lastExitPolicy: "onfail", nextAttemptAt: 9, lastError: "exited with code 3; restart 3 at y" }));
    expect(reasons(ev.diff("g", spec(), restarted, third))).toEqual(["InstanceCrashed", "CrashLooping"]);
  });

  it("an exit with code 0 is InstanceExited (Normal)", () => {
    const e = restartRecordEvents({ kind: "podgroup", name: "g" }, "instance 0", undefined, { restarts: 0, failures: 1, lastExit: "c#0", lastError: "exited with code 0; restart policy onfail: not restarted" }, "");
    expect(e).toMatchObject([{ reason: "InstanceExited", type: "Normal", message: "instance 0 exited with code 0" }]);
  });

  it("failed deploys: ImagePullFailed for a pull, DeployFailed otherwise, StartFailed for a start; the schedule is cut off", () => {
    const before = { restarts: 0, failures: 0 };
    const pull = restartRecordEvents({ kind: "podgroup", name: "g", instance: 0 }, "instance 0", before, { restarts: 0, failures: 1, nextDeployAt: 10, lastError: "image pull failed: reg/x:1 on n1: not found; next attempt at 2026-11-26T10:00:01.000Z" }, "");
    expect(pull).toMatchObject([{ reason: "ImagePullFailed", type: "Warning", message: "instance 0: image pull failed: reg/x:1 on n1: not found" }]);
    const place = restartRecordEvents({ kind: "podgroup", name: "g" }, "instance 0", before, { restarts: 0, failures: 1, nextDeployAt: 10, lastError: "no node fits: needs 1 bytes; next attempt at z" }, "");
    expect(reasons(place)).toEqual(["DeployFailed"]);
    const start = restartRecordEvents({ kind: "podgroup", name: "g" }, "instance 0", before, { restarts: 0, failures: 1, nextAttemptAt: 10, lastError: "cannot start: boom; next attempt at z" }, "");
    expect(start).toMatchObject([{ reason: "StartFailed", message: "instance 0: cannot start: boom" }]);
  });

  it("secret files missing: a created pod held back with a reason that is not its record's", () => {
    const ev = new PodGroupEvents();
    const prev = status("scaling", 1, [pod(0, "missing")]);
    const waiting = status("pending", 1, [pod(0, "pending", 1, { lastError: "waiting for secret files" })]);
    const e = ev.diff("g", spec(), prev, waiting);
    expect(reasons(e)).toContain("SecretFilesMissing");
    expect(e.find((x) => x.reason === "SecretFilesMissing")).toMatchObject({ type: "Warning", instance: 0, message: "instance 0: waiting for secret files" });
    expect(reasons(ev.diff("g", spec(), waiting, { ...waiting, updatedAt: "later" }))).toEqual([]);
    // Neither is a pod whose node does not answer (its last state is kept).
    expect(reasons(ev.diff("g", spec(), prev, status("degraded", 1, [pod(0, "pending", 1, { lastError: "node n1 is unreachable: state unknown" })])))).toEqual([]);
    // A pull in progress is not a secrets wait.
    expect(reasons(ev.diff("g", spec(), prev, status("pending", 1, [pod(0, "pending", 1, { lastError: "pulling img on n1 (5%)" })])))).not.toContain("SecretFilesMissing");
  });

  it("a finished drift move: Drifted, naming both nodes", () => {
    const ev = new PodGroupEvents();
    const moving = status("degraded", 1, [pod(0, "drifting", 1, { node: "n2" })], { instances: { "0": { restarts: 0, failures: 0, move: { task: "t1", from: "n2", drift: 1 } } } });
    const moved = status("running", 1, [pod(0, "running", 1, { node: "n1", driftCount: 1 })], { instances: { "0": { restarts: 0, failures: 0, drift: 1 } } });
    const e = ev.diff("g", spec(), moving, moved);
    expect(e.find((x) => x.reason === "Drifted")).toMatchObject({ type: "Normal", instance: 0, node: "n1", message: "instance 0 moved off n2 to n1" });
    // A move cancelled (its task deleted) while the pod was gone: no Drifted.
    const cancelled = status("scaling", 1, [pod(0, "missing", 1, { node: "" })], { instances: { "0": { restarts: 0, failures: 0, drift: 1 } } });
    expect(reasons(ev.diff("g", spec(), moving, cancelled))).not.toContain("Drifted");
  });

  it("nothing for a group being deleted", () => {
    expect(new PodGroupEvents().diff("g", { ...spec(), deleting: true }, undefined, status("removing", 0, []))).toEqual([]);
    expect(new PodGroupEvents().diff("g", undefined, undefined, status("removing", 0, []))).toEqual([]);
  });
});

describe("Dependency events", () => {
  const dspec = { name: "shop.cache", namespace: "shop", version: 1 };
  const dpod = (state: DependencyStatus["pods"][number]["state"], extra: Partial<DependencyStatus["pods"][number]> = {}) => ({
    node: "n1",
    namespace: "shop",
    refCount: 1,
    verifyTime: "2026-11-26T10:00:00.000Z",
    deployStartedAt: "2026-11-26T10:00:00.000Z",
    state,
    version: 1,
    restartCount: 0,
    lastError: "",
    containers: state === "missing" ? [] : [{ id: "d", name: "shop.cache.v1-n1-shop", node: "n1", nodeIp: "", ip: "", status: state }],
    ...extra,
  });
  const dstatus = (pods: DependencyStatus["pods"], internal?: Record<string, unknown>): DependencyStatus => ({ state: "running", lastError: "", updatedAt: "", pods, ...(internal && { internal }) });

  it("a pod wanted, then running; reclaimed when unreferenced", () => {
    const wanted = dstatus([dpod("pending")]);
    expect(dependencyEvents("shop.cache", dspec, undefined, wanted)).toMatchObject([{ reason: "DeployStarted", kind: "dependency", app: "shop", node: "n1", message: "pod on n1 for shop wanted (1 reference(s))" }]);
    const running = dstatus([dpod("running")]);
    expect(reasons(dependencyEvents("shop.cache", dspec, wanted, running))).toEqual(["DeploySucceeded"]);
    const idle = dstatus([dpod("running", { refCount: 0 })]);
    expect(reasons(dependencyEvents("shop.cache", dspec, running, idle))).toEqual([]);
    expect(reasons(dependencyEvents("shop.cache", dspec, idle, dstatus([])))).toEqual(["DependencyPodReclaimed"]);
  });

  it("a crash and restart of a dependency pod", () => {
    const running = dstatus([dpod("running")]);
    const crashed = dstatus([dpod("failed")], { slots: { "n1|shop": { restarts: 0, failures: 1, lastExit: "d#0", nextAttemptAt: 5, lastError: "exited with code 1; restart 1 at x" } } });
    expect(dependencyEvents("shop.cache", dspec, running, crashed)).toMatchObject([{ reason: "InstanceCrashed", message: "pod on n1 for shop exited with code 1", node: "n1" }]);
    const restarted = dstatus([dpod("running", { restartCount: 1 })], { slots: { "n1|shop": { restarts: 1, failures: 1, lastExit: "d#0", nextAttemptAt: 5 } } });
    expect(reasons(dependencyEvents("shop.cache", dspec, crashed, restarted))).toEqual(["InstanceRestarted"]);
  });
});
