import { describe, expect, it } from "vitest";
import { assess, type WaitTarget } from "../../../cli/wait.ts";
import { group, pod } from "./fixtures.ts";

const converged = (over: Partial<Extract<WaitTarget, { kind: "converged" }>> = {}): WaitTarget => ({ kind: "converged", name: "hello", ...over });

describe("assess (converged target)", () => {
  it("is done when exactly numInstances pods run at the spec's version", () => {
    expect(assess(group([pod(1, "running"), pod(2, "running")]), converged({ numInstances: 2 }))).toEqual({
      status: "done",
      message: "hello: 2/2 running at version 1",
    });
  });

  it("is not done while the server does not know the group yet, or holds another spec", () => {
    expect(assess(undefined, converged())).toMatchObject({ status: "progress", message: "hello: waiting for the server to record the group" });
    expect(assess(group([pod(1, "running")]), converged({ numInstances: 3 }))).toMatchObject({ status: "progress", message: expect.stringContaining("record the change") });
    const g = group([pod(1, "running")]);
    const otherPod = { ...g.spec.pod, containers: [{ image: "other" }] };
    expect(assess(g, converged({ pod: otherPod }))).toMatchObject({ status: "progress" });
    expect(assess(g, converged({ pod: { ...g.spec.pod, version: 7 } }))).toMatchObject({ status: "done" });
  });

  it("shows progress while scaling up: running, pending and not yet created", () => {
    const g = group([pod(1, "running"), pod(2, "pending")], { numInstances: 3, state: "scaling" });
    expect(assess(g, converged({ numInstances: 3 }))).toEqual({ status: "progress", message: "hello: 1/3 running, 1 pending, 1 not created (scaling)" });
  });

  it("is not done while scaling down leaves extra pods", () => {
    const g = group([pod(1, "running"), pod(2, "running"), pod(3, "running")], { numInstances: 2, state: "scaling" });
    expect(assess(g, converged({ numInstances: 2 }))).toMatchObject({ status: "progress", message: "hello: 2/2 running, 1 to remove (scaling)" });
  });

  it("counts pods of an older version as not done during a rolling update", () => {
    const g = group([pod(1, "running", 2), pod(2, "running", 1)], { version: 2, state: "updating" });
    expect(assess(g, converged())).toEqual({ status: "progress", message: "hello: 1/2 running, 1 running at old version 1 (updating)" });
  });

  it("fails on a failed pod at the current version, with its error", () => {
    const g = group([pod(1, "running"), pod(2, "failed", 1, { lastError: "image not found" })], { state: "degraded" });
    expect(assess(g, converged())).toEqual({ status: "failed", message: "hello: failed: instance 2: image not found" });
  });

  it("fails on an exited pod its restart policy will not restart", () => {
    const exited = (code: number) =>
      pod(1, "exited", 1, { containers: [{ id: "x", name: "hello.v1-i1-d0", node: "n1", nodeIp: "127.0.0.1", ip: "", status: "exited", exitCode: code }] });
    const never = group([exited(3)]);
    never.spec.restartPolicy = "never";
    expect(assess(never, converged())).toEqual({
      status: "failed",
      message: 'hello: failed: instance 1 exited with code 3 and restart policy "never" does not restart it',
    });
    const onfailClean = group([exited(0)]);
    onfailClean.spec.restartPolicy = "onfail";
    expect(assess(onfailClean, converged())).toMatchObject({ status: "failed" });
    const onfailCrash = group([exited(1)]);
    onfailCrash.spec.restartPolicy = "onfail";
    expect(assess(onfailCrash, converged())).toMatchObject({ status: "progress" });
    expect(assess(group([exited(1)]), converged())).toMatchObject({ status: "progress" }); // always
  });

  it("fails when the controller marks the group failed, but not on a failure left from an older version", () => {
    expect(assess(group([pod(1, "pending")], { state: "failed", lastError: "InsufficientResources: no node fits" }), converged())).toEqual({
      status: "failed",
      message: "hello: failed: InsufficientResources: no node fits",
    });
    const rolling = group([pod(1, "failed", 1, { lastError: "old" }), pod(2, "running", 2)], { version: 2, state: "failed" });
    expect(assess(rolling, converged())).toMatchObject({ status: "progress" });
  });

  it("fails when the group is being deleted", () => {
    const g = group([pod(1, "running")], { state: "removing" });
    expect(assess(g, converged())).toEqual({ status: "failed", message: "hello: the group is being deleted" });
  });
});

describe("assess (deleted target)", () => {
  it("is done on 404 and shows the instances left until then", () => {
    expect(assess(undefined, { kind: "deleted", name: "hello" })).toEqual({ status: "done", message: "hello: deleted" });
    expect(assess(group([pod(1, "running")], { state: "removing" }), { kind: "deleted", name: "hello" })).toEqual({
      status: "progress",
      message: "hello: removing, 1 instance left",
    });
  });
});
