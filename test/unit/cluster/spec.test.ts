import { describe, expect, it } from "vitest";
import { ClusterSpecError, parseClusterSpec } from "../../../adapters/cluster/spec.ts";

describe("parseClusterSpec", () => {
  it("parses named unix and tcp endpoints in order", () => {
    expect(parseClusterSpec("n1=unix:///tmp/a/docker.sock, n2=tcp://127.0.0.1:2375")).toEqual([
      { name: "n1", endpoint: "unix:///tmp/a/docker.sock", transport: { kind: "unix", socketPath: "/tmp/a/docker.sock" } },
      { name: "n2", endpoint: "tcp://127.0.0.1:2375", transport: { kind: "tcp", host: "127.0.0.1", port: 2375 } },
    ]);
  });

  it("names unnamed endpoints by position and defaults the tcp port", () => {
    const eps = parseClusterSpec("unix:///var/run/docker.sock,edge=tcp://10.0.0.2,http://[::1]:2376");
    expect(eps.map((e) => [e.name, e.endpoint])).toEqual([
      ["node1", "unix:///var/run/docker.sock"],
      ["edge", "tcp://10.0.0.2:2375"],
      ["node3", "tcp://[::1]:2376"],
    ]);
    expect(eps[2]!.transport).toEqual({ kind: "tcp", host: "::1", port: 2376 });
  });

  it.each([
    ["", /empty/],
    ["n1=unix:///a,", /entry 2 .* is empty/],
    ["n1=unix:///a,n1=unix:///b", /"n1" is used twice/],
    ["unix:///a,node1=unix:///b", /"node1" is used twice/],
    ["bad name=unix:///a", /node name "bad name" must match/],
    ["n1=", /endpoint is empty/],
    ["n1=/var/run/docker.sock", /needs a scheme/],
    ["n1=unix://relative.sock", /absolute socket path/],
    ["n1=https://h:2376", /https:\/\/ endpoints are not supported/],
    ["n1=ftp://h", /unknown scheme ftp/],
    ["n1=tcp://h:2375/path", /just tcp:\/\/host:port/],
    ["n1=tcp://h:99999", /not a valid tcp/],
  ])("rejects %j", (spec, message) => {
    expect(() => parseClusterSpec(spec)).toThrow(ClusterSpecError);
    expect(() => parseClusterSpec(spec)).toThrow(message);
  });
});
