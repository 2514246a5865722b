import { describe, expect, it } from "vitest";
import { classify } from "../../../controllers/podgroup/observe.ts";
import { buildStatus, type StatusInput } from "../../../controllers/podgroup/status.ts";
import { sameStatus } from "../../../controllers/shared/status-records.ts";
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import { podDependenciesLabel } from "../../../controllers/shared/pod-dependencies.ts";
import { cached, stored } from "./fixtures.ts";

function input(containers: CachedContainer[], over: Partial<StatusInput> = {}): StatusInput {
  const spec = over.spec ?? stored();
  return {
    spec,
    removing: false,
    view: classify(containers, { group: "web", version: spec.pod.version, podSize: 1, reachable: (n) => n !== "down" }),
    internal: { instances: {} },
    previous: undefined,
    reachable: (n) => n !== "down",
    nodeAddress: () => "10.0.0.1",
    notes: [],
    now: 0,
    ...over,
  };
}

describe("buildStatus", () => {
  it("all instances running at the spec's version: running, converged", () => {
    const s = buildStatus(input([cached({ instance: 1 }, { ports: [{ containerPort: 80, protocol: "tcp", hostIp: "", hostPort: 32768 }] }), cached({ instance: 2 })]));
    expect(s).toMatchObject({ state: "running", lastError: "", observedVersion: 1 });
    expect(s.pods.map((p) => [p.instanceNo, p.state, p.version, p.node])).toEqual([
      [1, "running", 1, "n1"],
      [2, "running", 1, "n1"],
    ]);
    expect(s.pods[0]!.containers[0]).toMatchObject({ nodeIp: "10.0.0.1", status: "running", hostPort: 32768, containerPort: 80, startedAt: new Date(1_000).toISOString() });
    expect(s.internal).toBeUndefined();
  });

  it("a created pod held back for its secret files is pending with the reason; a running one ignores it", () => {
    const spec = stored({ numInstances: 2 });
    const waiting = new Map([[1, "waiting for secret files"], [2, "secret file a is not written for web"]]);
    const s = buildStatus(input([cached({ instance: 1 }, { state: "created", startedAt: undefined }), cached({ instance: 2 }, { state: "created", startedAt: undefined })], { spec, waitingForSecrets: waiting }));
    expect(s.pods.map((p) => [p.state, p.lastError])).toEqual([
      ["pending", "waiting for secret files"],
      ["pending", "secret file a is not written for web"],
    ]);
    expect(s).toMatchObject({ state: "pending", lastError: "instance 1: waiting for secret files" });
    const t = buildStatus(input([cached({ instance: 1 }), cached({ instance: 2 })], { spec, waitingForSecrets: waiting }));
    expect(t.pods.map((p) => [p.state, p.lastError])).toEqual([
      ["running", ""],
      ["running", ""],
    ]);
  });

  it("exit codes decide exited vs failed; a missing instance is missing and the group scales", () => {
    const spec = stored({ numInstances: 3 });
    const s = buildStatus(input([cached({ instance: 1 }, { state: "exited", exitCode: 0 }), cached({ instance: 2 }, { state: "exited", exitCode: 3 })], { spec }));
    expect(s.pods.map((p) => p.state)).toEqual(["exited", "failed", "missing"]);
    expect(s.pods[1]!.containers[0]!.exitCode).toBe(3);
    expect(s.state).toBe("failed");
    const t = buildStatus(input([cached({ instance: 1 })], { spec: stored({ numInstances: 2 }) }));
    expect(t.state).toBe("scaling");
  });

  it("a pod on an unreachable node keeps its last known state, with the reason, and the group is degraded", () => {
    const prev = buildStatus(input([cached({ instance: 1 }), cached({ instance: 2, node: "down" })]));
    const s = buildStatus(input([cached({ instance: 1 }), cached({ instance: 2, node: "down" }, { state: "exited", exitCode: 9 })], { previous: { ...prev, pods: prev.pods.map((p) => ({ ...p, state: "running" })) } }));
    expect(s.pods[1]).toMatchObject({ state: "running", lastError: "node down is unreachable: state unknown" });
    expect(s.state).toBe("degraded");
    expect(s.lastError).toBe("instance 2: node down is unreachable: state unknown");
  });

  it("a stale instance means updating; the rollout's instance is upgrading; observedVersion stays until converged", () => {
    const spec = stored({}, { version: 2 });
    const s = buildStatus(
      input([cached({ instance: 2, version: 1 })], {
        spec,
        internal: { rollout: { instance: 1, toVersion: 2, phase: "removed", at: 5 }, instances: {} },
        previous: { state: "running", lastError: "", updatedAt: "", observedVersion: 1, pods: [] },
      }),
    );
    expect(s.pods.map((p) => [p.state, p.version])).toEqual([["upgrading", 2], ["running", 1]]);
    expect(s.state).toBe("updating");
    expect(s.observedVersion).toBe(1);
    expect(s.internal).toEqual({ rollout: { instance: 1, toVersion: 2, phase: "removed", at: 5 }, instances: {} });
  });

  it("removal: every pod is removed, the group removing; records of instances gone for good are dropped", () => {
    const s = buildStatus(
      input([cached({ instance: 4 })], { removing: true, internal: { instances: { "4": { restarts: 2, failures: 0 }, "6": { restarts: 1, failures: 0 } } } }),
    );
    expect(s.state).toBe("removing");
    expect(s.pods.map((p) => [p.instanceNo, p.state, p.restartCount])).toEqual([[4, "removed", 2]]);
    expect(s.internal).toEqual({ instances: { "4": { restarts: 2, failures: 0 } } });
  });

  it("older-format containers are marked with their format; a halted rollout fails the group with its reason", () => {
    const legacy = cached({ instance: 1 }, { labels: { "io.capstan.podgroup": "web", "io.capstan.instance": "0", "io.capstan.version": "1" } });
    const s = buildStatus(input([legacy, cached({ instance: 2 })], { halted: "update to version 1 halted at instance 2: x exited" }));
    expect(s.pods[0]!.containers[0]!.format).toBe("1");
    expect(s.pods[1]!.containers[0]!.format).toBeUndefined();
    expect(s).toMatchObject({ state: "failed", lastError: "update to version 1 halted at instance 2: x exited" });
  });

  it("each pod reports the dependency list its containers carry; absent without a readable label; kept while its node is down", () => {
    const labelled = (instance: number, value: string, node = "n1") => {
      const c = cached({ instance, node });
      return { ...c, labels: { ...c.labels, [podDependenciesLabel]: value } };
    };
    const spec = stored({ numInstances: 4 });
    const s = buildStatus(input([labelled(1, "db:node,cache:namespace", "down"), cached({ instance: 2 }), labelled(3, "db:bogus"), labelled(4, "")], { spec }));
    expect(s.pods.map((p) => p.dependencies)).toEqual([
      [
        { podName: "db", policy: "node" },
        { podName: "cache", policy: "namespace" },
      ],
      undefined,
      undefined,
      [],
    ]);
    expect(s.pods[1]).not.toHaveProperty("dependencies");
    // The cache forgets the unreachable node (a restart during the outage): the last status stands.
    const t = buildStatus(input([cached({ instance: 2 }), labelled(3, "db:bogus"), labelled(4, "")], { spec, previous: s }));
    expect(t.pods[0]).toMatchObject({ node: "down", dependencies: [{ podName: "db", policy: "node" }, { podName: "cache", policy: "namespace" }] });
  });

  it("sameStatus ignores updatedAt only", () => {
    const c = cached({ instance: 1 });
    const a = buildStatus(input([c], { spec: stored({ numInstances: 1 }), now: 1 }));
    const b = buildStatus(input([c], { spec: stored({ numInstances: 1 }), now: 2 }));
    expect(a.updatedAt).not.toBe(b.updatedAt);
    expect(sameStatus(a, b)).toBe(true);
    expect(sameStatus({ ...a, lastError: "x" }, b)).toBe(false);
    expect(sameStatus(undefined, b)).toBe(false);
  });
});
