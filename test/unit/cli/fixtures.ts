// PodGroupWithSpec values as GET /api/podgroups answers them, for the pure client tests.
import type { PodGroupWithSpec, PodState, PodStatus } from "../../../api/resources/podgroup.ts";

export function pod(instanceNo: number, state: PodState, version = 1, extra: Partial<PodStatus> = {}): PodStatus {
  return {
    instanceNo,
    state,
    lastError: "",
    restartCount: 0,
    driftCount: 0,
    version,
    node: `n${(instanceNo % 2) + 1}`,
    containers: [
      {
        id: `c${instanceNo}`,
        name: `hello.v${version}-i${instanceNo}-d0`,
        node: `n${(instanceNo % 2) + 1}`,
        nodeIp: "127.0.0.1",
        ip: "",
        status: state === "running" ? "running" : "exited",
      },
    ],
    ...extra,
  };
}

export function group(pods: PodStatus[], over: { numInstances?: number; version?: number; state?: PodGroupWithSpec["state"]; lastError?: string } = {}): PodGroupWithSpec {
  return {
    spec: {
      name: "hello",
      namespace: "demo",
      numInstances: over.numInstances ?? pods.length,
      restartPolicy: "always",
      pod: { name: "hello", namespace: "demo", version: over.version ?? 1, network: "none", containers: [{ image: "capstan/busybox:latest" }] },
      createdAt: "2025-01-01T00:00:00.000Z",
      updatedAt: "2025-01-01T00:00:00.000Z",
    },
    state: over.state ?? "running",
    lastError: over.lastError ?? "",
    updatedAt: "2025-01-01T00:00:00.000Z",
    observedVersion: over.version ?? 1,
    pods,
  };
}
