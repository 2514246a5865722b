import { describe, expect, it } from "vitest";
import { ClusterSpecError, parseClusterSpec } from "../../../adapters/cluster/spec.ts";

describe("parseClusterSpec", () => {
  it("parses named unix and tcp endpoints in order", () => {
    expect(parseClusterSpec("n1=unix:///tmp/a/docker.sock, n2=tcp://127.0.0.1:2375")).toEqual([
      { name: "n1", endpoint: "unix:///tmp/a/docker.sock", transport: { kind: "unix", socketPath: "/tmp/a/docker.sock" } },
      { name: "n2", endpoint: "tcp://127.0.0.1:2375", transport: { kind: "tcp", host: "127.0.0.1", port: 2375, tls: false } },
    ]);
  });

  it("names unnamed endpoints by position and defaults the tcp port", () => {
    const eps = parseClusterSpec("unix:///var/run/docker.sock,edge=tcp://127.0.0.2,http://[::1]:2376");
    expect(eps.map((e) => [e.name, e.endpoint])).toEqual([
      ["node1", "unix:///var/run/docker.sock"],
      ["edge", "tcp://127.0.0.2:2375"],
      ["node3", "tcp://[::1]:2376"],
    ]);
    expect(eps[2]!.transport).toEqual({ kind: "tcp", host: "::1", port: 2376, tls: false });
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
    ["n1=ssh://h", /ssh:\/\/ endpoints are not supported/],
    ["n1=ftp://h", /unknown scheme ftp/],
    ["n1=tcp://h:2375/path", /just tcp:\/\/host:port/],
    ["n1=tcp://u:p@h:2375", /just tcp:\/\/host:port/],
    ["n1=tcp://h:99999", /not a valid tcp/],
  ])("rejects %j", (spec, message) => {
    expect(() => parseClusterSpec(spec)).toThrow(ClusterSpecError);
    expect(() => parseClusterSpec(spec)).toThrow(message);
  });
});

describe("parseClusterSpec: plain tcp only on loopback, TLS for the rest", () => {
  const tlsHint = /give -docker-tls-ca, -docker-tls-cert and -docker-tls-key/;

  it.each([
    ["tcp://127.0.0.1:2375", "127.0.0.1", 2375],
    ["tcp://127.9.8.7", "127.9.8.7", 2375],
    ["tcp://127.1:2380", "127.0.0.1", 2380], // URL's IPv4 canonical form
    ["tcp://localhost:2375", "localhost", 2375],
    ["tcp://LocalHost", "localhost", 2375],
    ["tcp://[::1]:2375", "::1", 2375],
    ["tcp://[0:0:0:0:0:0:0:1]", "::1", 2375],
    ["http://127.0.0.1:80", "127.0.0.1", 80], // an explicit :80 is kept (URL drops http's default port)
  ])("accepts plain %s without TLS material (loopback)", (spec, host, port) => {
    const [ep] = parseClusterSpec(`n1=${spec}`);
    expect(ep!.transport).toEqual({ kind: "tcp", host, port, tls: false });
  });

  it.each([
    "tcp://10.0.0.2:2375",
    "tcp://10.0.0.2",
    "http://192.168.1.5:2375",
    "tcp://128.0.0.1:2375",
    "tcp://0.0.0.0:2375",
    "tcp://[::2]:2375",
    "tcp://[::ffff:10.0.0.1]:2375",
    "tcp://docker.example.com:2375",
    "tcp://localhost.example.com:2375",
    "tcp://127.0.0.1.nip.io:2375",
  ])("refuses plain %s without TLS material, naming the TLS options", (spec) => {
    expect(() => parseClusterSpec(`n1=${spec}`)).toThrow(ClusterSpecError);
    expect(() => parseClusterSpec(`n1=${spec}`)).toThrow(/plain tcp:\/\/ to .* is refused: .* only accepted on a loopback address/);
    expect(() => parseClusterSpec(`n1=${spec}`)).toThrow(tlsHint);
  });

  it("names the refused entry among good ones", () => {
    expect(() => parseClusterSpec("a=unix:///a.sock,b=tcp://127.0.0.1,c=tcp://10.1.2.3:2375")).toThrow(
      /^cluster spec entry 3 \("c=tcp:\/\/10.1.2.3:2375"\): plain tcp:\/\/ to 10.1.2.3 is refused/,
    );
  });

  it("with TLS material, makes every tcp:// endpoint TLS (default port 2376), loopback or not", () => {
    const eps = parseClusterSpec("n1=tcp://10.0.0.2,n2=tcp://10.0.0.3:3376,n3=tcp://127.0.0.1,n4=unix:///a.sock", { tls: true });
    expect(eps.map((e) => [e.name, e.endpoint])).toEqual([
      ["n1", "https://10.0.0.2:2376"],
      ["n2", "https://10.0.0.3:3376"],
      ["n3", "https://127.0.0.1:2376"],
      ["n4", "unix:///a.sock"],
    ]);
    expect(eps[0]!.transport).toEqual({ kind: "tcp", host: "10.0.0.2", port: 2376, tls: true });
  });

  it("takes https:// as TLS and http:// as plain, per node", () => {
    const eps = parseClusterSpec("n1=https://docker.example.com,n2=https://[fd00::2]:3000,n3=http://127.0.0.1:2375", { tls: true });
    expect(eps.map((e) => [e.endpoint, e.transport])).toEqual([
      ["https://docker.example.com:2376", { kind: "tcp", host: "docker.example.com", port: 2376, tls: true }],
      ["https://[fd00::2]:3000", { kind: "tcp", host: "fd00::2", port: 3000, tls: true }],
      ["tcp://127.0.0.1:2375", { kind: "tcp", host: "127.0.0.1", port: 2375, tls: false }],
    ]);
    // http:// is plain even with TLS material, so it is still loopback only.
    expect(() => parseClusterSpec("n1=http://10.0.0.2:2375", { tls: true })).toThrow(/plain tcp:\/\/ to 10.0.0.2 is refused/);
  });

  it("refuses https:// without TLS material, loopback or not", () => {
    for (const spec of ["n1=https://10.0.0.2:2376", "n1=https://127.0.0.1"]) {
      expect(() => parseClusterSpec(spec)).toThrow(ClusterSpecError);
      expect(() => parseClusterSpec(spec)).toThrow(/is a TLS endpoint but no TLS client material was given/);
      expect(() => parseClusterSpec(spec)).toThrow(tlsHint);
    }
  });
});
