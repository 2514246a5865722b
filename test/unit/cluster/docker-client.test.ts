// dockerClient: the engine address given is the one used, whatever DOCKER_HOST, DOCKER_TLS_VERIFY
// and DOCKER_CERT_PATH say (docker-modem lays the given options over defaults read from them).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dockerClient } from "../../../adapters/cluster/docker-client.ts";
import { connectEngine } from "../../../adapters/build/docker.ts";

interface ModemView {
  socketPath?: string;
  host?: string;
  port?: number;
  protocol?: string;
  ca?: unknown;
}
const modemOf = (d: unknown) => (d as { modem: ModemView }).modem;

describe("dockerClient", () => {
  const saved = { ...process.env };
  beforeEach(() => {
    process.env.DOCKER_HOST = "ssh://someone@elsewhere.example";
  });
  afterEach(() => {
    for (const k of ["DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });

  it("a socket path stays a socket path with DOCKER_HOST=ssh://... (or tcp://...) exported", () => {
    expect(modemOf(dockerClient({ socketPath: "/run/n1.sock" }))).toMatchObject({ socketPath: "/run/n1.sock", host: undefined, protocol: "http" });
    process.env.DOCKER_HOST = "tcp://127.0.0.9:2375";
    expect(modemOf(dockerClient({ socketPath: "/run/n1.sock" }))).toMatchObject({ socketPath: "/run/n1.sock", host: undefined, protocol: "http" });
    expect(modemOf(connectEngine("unix:///run/n2.sock"))).toMatchObject({ socketPath: "/run/n2.sock", host: undefined, protocol: "http" });
    expect(process.env.DOCKER_HOST).toBe("tcp://127.0.0.9:2375"); // put back
  });

  it("a plain TCP address takes no TLS material from DOCKER_CERT_PATH; an https one only its own", () => {
    process.env.DOCKER_HOST = "tcp://127.0.0.9:2376";
    process.env.DOCKER_TLS_VERIFY = "1";
    process.env.DOCKER_CERT_PATH = "/nonexistent-cert-path";
    expect(modemOf(dockerClient({ host: "127.0.0.1", port: 2375, protocol: "http" }))).toMatchObject({ host: "127.0.0.1", port: 2375, protocol: "http", ca: undefined });
    expect(modemOf(dockerClient({ host: "127.0.0.1", port: 2376, protocol: "https", ca: "CA", cert: "C", key: "K" }))).toMatchObject({ host: "127.0.0.1", port: 2376, protocol: "https", ca: "CA" });
  });

  it("capstan build's -docker https://... is refused (it takes no TLS material), not sent with the environment's", () => {
    expect(() => connectEngine("https://127.0.0.1:2376")).toThrow(/https needs TLS client material/);
  });
});
