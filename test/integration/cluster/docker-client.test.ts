// dockerClient against a real engine: with DOCKER_HOST (and TLS variables) exported for another
// engine, a client made for a node's socket still talks to that node.
import { afterEach, describe, expect, it } from "vitest";
import { dockerClient } from "../../../adapters/cluster/docker-client.ts";
import { loadServices, socketPath } from "../../helpers/services.ts";

const services = loadServices();
const names = ["DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"] as const;
const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));

afterEach(() => {
  for (const n of names) {
    if (saved[n] === undefined) delete process.env[n];
    else process.env[n] = saved[n];
  }
});

describe("dockerClient on a real engine", () => {
  it("reaches the node's socket, not DOCKER_HOST's engine (a closed loopback port here)", async () => {
    process.env.DOCKER_HOST = "tcp://127.0.0.1:9";
    process.env.DOCKER_TLS_VERIFY = "1";
    process.env.DOCKER_CERT_PATH = "/nonexistent-cert-path";
    const docker = dockerClient({ socketPath: socketPath(services.engines.n1!) });
    const info = (await docker.info()) as { ID?: string };
    expect(typeof info.ID).toBe("string");
    expect(process.env.DOCKER_HOST).toBe("tcp://127.0.0.1:9"); // the environment is put back
  });
});
