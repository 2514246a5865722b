import { describe, expect, it } from "vitest";
import { toClusterError } from "../../../adapters/cluster/engine.ts";
import {
  ConflictError,
  EngineError,
  EngineUnavailableError,
  InvalidRequestError,
  NotFoundError,
  NotModifiedError,
} from "../../../adapters/cluster/errors.ts";
import { toContainerEvent } from "../../../adapters/cluster/events.ts";
import { checkContainerName, toCreateBody, toDockerFilters } from "../../../adapters/cluster/mapping.ts";

describe("toCreateBody", () => {
  it("maps the spec onto Docker's create body, with restart policy 'no' by default", () => {
    expect(
      toCreateBody("n1", "web.v1-i0-d0", {
        image: "capstan/busybox:latest",
        cmd: ["sleep", "1"],
        entrypoint: ["/bin/sh", "-c"],
        env: ["A=1"],
        labels: { "io.capstan.podgroup": "web" },
        user: "nobody",
        workingDir: "/tmp",
        memoryBytes: 64 << 20,
        nanoCpus: 5e8,
        binds: ["/data:/data:ro"],
        networkMode: "none",
        expose: [{ containerPort: 8080, hostPort: 18080, hostIp: "127.0.0.1" }, { containerPort: 53, protocol: "udp" }],
        logConfig: { type: "json-file", config: { "max-size": "1m" } },
      }),
    ).toEqual({
      Image: "capstan/busybox:latest",
      Cmd: ["sleep", "1"],
      Entrypoint: ["/bin/sh", "-c"],
      Env: ["A=1"],
      Labels: { "io.capstan.podgroup": "web" },
      User: "nobody",
      WorkingDir: "/tmp",
      ExposedPorts: { "8080/tcp": {}, "53/udp": {} },
      HostConfig: {
        RestartPolicy: { Name: "no", MaximumRetryCount: 0 },
        Memory: 64 << 20,
        NanoCpus: 5e8,
        Binds: ["/data:/data:ro"],
        NetworkMode: "none",
        PortBindings: { "8080/tcp": [{ HostIp: "127.0.0.1", HostPort: "18080" }], "53/udp": [{ HostIp: "", HostPort: "" }] },
        LogConfig: { Type: "json-file", Config: { "max-size": "1m" } },
      },
    });
  });

  it.each([
    [{ image: "" }, /image is required/],
    [{ image: "i", memoryBytes: -1 }, /memoryBytes must be a non-negative integer/],
    [{ image: "i", nanoCpus: 0.5 }, /nanoCpus must be/],
    [{ image: "i", env: ["=x"] }, /is not KEY=value/],
    [{ image: "i", expose: [{ containerPort: 0 }] }, /containerPort 0/],
    [{ image: "i", expose: [{ containerPort: 80, hostPort: 70000 }] }, /hostPort 70000/],
  ])("rejects bad spec %j before any call", (spec, message) => {
    expect(() => toCreateBody("n1", "c1", spec)).toThrow(InvalidRequestError);
    expect(() => toCreateBody("n1", "c1", spec)).toThrow(message);
  });

  it("checks container names with Docker's rule", () => {
    expect(() => checkContainerName("n1", "web.v1-i0-d0", "create")).not.toThrow();
    for (const bad of ["", "a", "-x", "a/b", "a b"]) expect(() => checkContainerName("n1", bad, "create")).toThrow(InvalidRequestError);
  });

  it("builds list filters only from what is given", () => {
    expect(toDockerFilters(undefined)).toEqual({});
    expect(toDockerFilters({ label: ["a=b"], status: ["running"], name: [] })).toEqual({ label: ["a=b"], status: ["running"] });
  });
});

describe("toClusterError", () => {
  const conflictBody = { message: 'Conflict. The container name "/x" is already in use' };
  it.each([
    [{ statusCode: 404, json: { message: "No such container: x" } }, NotFoundError, "container"],
    [{ statusCode: 404, json: { message: "No such image: nope:latest" } }, NotFoundError, "image"],
    [{ statusCode: 409, json: conflictBody }, ConflictError, undefined],
    [{ statusCode: 304, json: Buffer.alloc(0) }, NotModifiedError, undefined],
    [{ statusCode: 400, json: { message: "invalid mount" } }, InvalidRequestError, undefined],
    [{ statusCode: 500, json: { message: "boom" } }, EngineError, undefined],
    [Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }), EngineUnavailableError, undefined],
    [Object.assign(new Error("connect ENOENT /x.sock"), { code: "ENOENT", syscall: "connect" }), EngineUnavailableError, undefined],
  ])("maps %j", (raw, cls, resource) => {
    const err = toClusterError(raw, "n2", "c1", "create");
    expect(err).toBeInstanceOf(cls);
    expect(err).toMatchObject({ node: "n2", ref: "c1", op: "create" });
    if (resource) expect(err).toMatchObject({ resource });
  });

  it("uses the engine's own message and marks timeouts", () => {
    expect((toClusterError({ statusCode: 409, json: conflictBody }, "n1", "x", "create") as Error).message).toBe(
      `create x on n1: ${conflictBody.message}`,
    );
    const t = toClusterError(new DOMException("aborted", "AbortError"), "n1", undefined, "listContainers", 500);
    expect(t).toBeInstanceOf(EngineUnavailableError);
    expect(t).toMatchObject({ timedOut: true, message: "listContainers on n1: no answer within 500 ms" });
  });

  it("leaves our own bugs alone", () => {
    const bug = new TypeError("x is not a function");
    expect(toClusterError(bug, "n1", undefined, "inspect")).toBe(bug);
  });
});

describe("toContainerEvent", () => {
  const die = {
    status: "die",
    id: "abc",
    from: "capstan/busybox:latest",
    Type: "container",
    Action: "die",
    Actor: { ID: "abc", Attributes: { exitCode: "137", image: "capstan/busybox:latest", name: "web.v1-i0-d0", "io.capstan.podgroup": "web" } },
    scope: "local",
    time: 1795393223,
    // As JSON.parse reads the engine's line: beyond 2^53, so only approximately this value.
    timeNano: Number("1795393223085204400"),
  };

  it("types an engine event, separating labels from the engine's attributes", () => {
    expect(toContainerEvent("n1", die)).toEqual({
      type: "container",
      node: "n1",
      action: "die",
      id: "abc",
      name: "web.v1-i0-d0",
      labels: { "io.capstan.podgroup": "web" },
      exitCode: 137,
      time: 1795393223085,
    });
  });

  it("answers null for other event types and undefined for non-events", () => {
    expect(toContainerEvent("n1", { ...die, Type: "network" })).toBeNull();
    expect(toContainerEvent("n1", { hello: 1 })).toBeUndefined();
    expect(toContainerEvent("n1", [1, 2])).toBeUndefined();
    expect(toContainerEvent("n1", { ...die, Actor: {} })).toBeUndefined();
  });
});
