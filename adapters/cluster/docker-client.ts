// A dockerode client for exactly the engine address it is given. docker-modem starts from
// defaults it reads out of the environment (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH,
// DOCKER_PATH_PREFIX, DOCKER_CLIENT_TIMEOUT) and lays the given options over them: `{ socketPath }`
// alone, with DOCKER_HOST=tcp://elsewhere or ssh://elsewhere exported, went to that other engine
// (its host wins over a socket path), and a DOCKER_CERT_PATH without its files made every client
// throw. The address in -cluster or -docker is the only one that counts, so the client is made with
// those variables out of sight (synchronously: nothing else runs meanwhile), and every field that
// chooses the engine or its transport is given.
import Docker from "dockerode";

export type DockerAddress =
  | { socketPath: string }
  | { host: string; port: number; protocol: "http" }
  | { host: string; port: number; protocol: "https"; ca: string | Buffer; cert: string | Buffer; key: string | Buffer };

/** The variables docker-modem reads for its defaults. */
const modemVariables = ["DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_PATH_PREFIX", "DOCKER_CLIENT_TIMEOUT"] as const;

export function dockerClient(address: DockerAddress): Docker {
  const saved = modemVariables.map((name) => [name, process.env[name]] as const);
  for (const [name] of saved) delete process.env[name];
  try {
    return new Docker({ protocol: "http", ...address } as Docker.DockerOptions);
  } finally {
    for (const [name, value] of saved) if (value !== undefined) process.env[name] = value;
  }
}
