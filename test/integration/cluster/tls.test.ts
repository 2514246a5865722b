// The cluster adapter against a real `dockerd --tlsverify` on a loopback TCP port, with certificates
// made for this run (test/helpers/certs.ts): mutual TLS works end to end (node resources, a
// container's life cycle, events), and every wrong certificate fails fast with an error that says
// what is wrong. The engine is this file's own (own data root, exec root, socket and port), started
// the way scripts/services starts its engines, and stopped in afterAll. All traffic goes to
// 127.0.0.1.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, EngineUnavailableError, type ContainerEvent, type NodeResources } from "../../../adapters/cluster/index.ts";
import { Engine } from "../../../adapters/cluster/engine.ts";
import { parseClusterSpec } from "../../../adapters/cluster/spec.ts";
import { freePort } from "../../../cli/free-port.ts";
import { makePki, type Pki } from "../../helpers/certs.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const run = promisify(execFile);
const services = loadServices();
const label = "io.capstan.test";
const runId = uniqueName("tls");

interface Tls {
  ca: string;
  cert: string;
  key: string;
}

let dir: string;
let sock: string;
let port: number;
let dockerd: ChildProcess | undefined;
let pki: Pki;
let other: Pki;
/** Our CA and a client certificate it signed: what the engine trusts. */
let good: Tls;
/** Our CA, with a client certificate from another CA. */
let foreignClient: Tls;
/** Another CA as the server's CA, with a good client certificate. */
let wrongServerCa: Tls;
let cluster: DockerCluster;

const text = (path: string) => readFile(path, "utf8");

async function dockerdLog(): Promise<string> {
  return readFile(join(dir, "dockerd.log"), "utf8").catch(() => "");
}

beforeAll(async () => {
  // Short paths: the engine's and its containerd's unix sockets live under this directory.
  dir = await mkdtemp(join(tmpdir(), "cap-tls-"));
  sock = join(dir, "docker.sock");
  [pki, other, port] = await Promise.all([makePki("capstan-engine-ca"), makePki("capstan-other-ca"), freePort("127.0.0.1")]);
  const [server, client, otherClient] = await Promise.all([
    pki.issue("server", { dns: ["localhost"], ip: ["127.0.0.1"] }),
    pki.issue("client", { client: true }),
    other.issue("client", { client: true }),
  ]);
  good = { ca: await text(pki.ca), cert: await text(client.cert), key: await text(client.key) };
  foreignClient = { ca: good.ca, cert: await text(otherClient.cert), key: await text(otherClient.key) };
  wrongServerCa = { ca: await text(other.ca), cert: good.cert, key: good.key };

  const log = await open(join(dir, "dockerd.log"), "w");
  // prettier-ignore
  dockerd = spawn("dockerd", [
    "--data-root", join(dir, "data"), "--exec-root", join(dir, "exec"), "--pidfile", join(dir, "docker.pid"),
    "--bridge=none", "--iptables=false", "--ip6tables=false", "--log-level", "warn",
    "-H", `unix://${sock}`,
    "-H", `tcp://127.0.0.1:${port}`,
    "--tlsverify", "--tlscacert", pki.ca, "--tlscert", server.cert, "--tlskey", server.key,
  ], { stdio: ["ignore", log.fd, log.fd] });
  await log.close();
  const exited = new Promise<never>((_, reject) => {
    dockerd!.once("error", reject);
    dockerd!.once("exit", async (code) => reject(new Error(`dockerd exited (${code}) during start:\n${(await dockerdLog()).slice(-2000)}`)));
  });
  exited.catch(() => undefined);
  // Up once it answers on its own unix socket (then its TCP listener serves too); each probe is bounded.
  const local = new Docker({ socketPath: sock }) as unknown as { ping(options: { abortSignal: AbortSignal }): Promise<unknown> };
  await Promise.race([
    pollUntil("dockerd to answer on its unix socket", () => local.ping({ abortSignal: AbortSignal.timeout(2_000) }).then(() => true), 30_000),
    exited,
  ]);
  await run("docker", ["-H", `unix://${sock}`, "import", "-c", "ENV PATH=/bin", "-c", 'CMD ["/bin/sh"]', join(services.dir, "busybox-rootfs.tar"), services.testImage], {
    timeout: 60_000,
  });
  cluster = DockerCluster.fromSpec(`n9=tcp://127.0.0.1:${port}`, { tls: good });
}, 90_000);

afterAll(async () => {
  if (dockerd?.pid !== undefined && dockerd.exitCode === null && dockerd.signalCode === null) {
    const gone = new Promise((r) => dockerd!.once("exit", r));
    dockerd.kill("SIGTERM");
    const timer = setTimeout(() => dockerd?.kill("SIGKILL"), 15_000);
    await gone;
    clearTimeout(timer);
  }
  // The engine's own containerd lives under its exec root; nothing of it may survive.
  if (dir) await run("pkill", ["-f", "--", join(dir, "exec")]).catch(() => undefined);
  await Promise.all([pki?.remove(), other?.remove(), dir ? rm(dir, { recursive: true, force: true }) : undefined]);
}, 60_000);

// dockerode's info() takes options at runtime; its type declarations omit them.
interface InfoWithSignal {
  info(options: { abortSignal: AbortSignal }): Promise<unknown>;
}

/** nodes() for one TLS node with this material, and how long it took. */
async function nodeWith(tls: Tls, spec = `n9=tcp://127.0.0.1:${port}`): Promise<{ node: NodeResources; ms: number }> {
  const c = DockerCluster.fromSpec(spec, { tls });
  const t0 = Date.now();
  const [node] = await c.nodes();
  return { node: node!, ms: Date.now() - t0 };
}

describe("a Docker engine over mutual TLS", () => {
  it("answers nodes() with the engine's resources, state ready", async () => {
    const [node] = await cluster.nodes();
    expect(node).toMatchObject({ name: "n9", endpoint: `https://127.0.0.1:${port}`, address: "127.0.0.1", state: "ready" });
    expect(node!.error).toBeUndefined();
    expect(node!.cpus).toBeGreaterThan(0);
    expect(node!.memoryBytes).toBeGreaterThan(0);
    expect(node!.engineVersion).not.toBe("");
  });

  it("creates, starts, lists, inspects and removes a container, and streams its events", async () => {
    const events: ContainerEvent[] = [];
    let ready = false;
    const sub = cluster.subscribe(
      (e) => {
        if (e.type === "container") events.push(e);
        if (e.type === "node") ready = e.state === "ready";
      },
      { filters: { label: [`${label}=${runId}`] } },
    );
    try {
      await pollUntil("the TLS event stream to open", async () => ready, 10_000);
      const name = `${runId}-c1`;
      const ref = await cluster.create("n9", name, { image: services.testImage, cmd: ["sleep", "600"], networkMode: "none", labels: { [label]: runId } });
      await cluster.start(ref);
      const listed = await cluster.listContainers("n9", { filters: { label: [`${label}=${runId}`] } });
      expect(listed.map((c) => [c.node, c.id, c.name, c.state])).toEqual([["n9", ref.id, name, "running"]]);
      expect((await cluster.inspect(ref)).status.running).toBe(true);
      await pollUntil("the start event over the TLS event stream", async () => events.some((e) => e.id === ref.id && e.action === "start"), 10_000);
      await cluster.remove(ref, { force: true });
      expect(await cluster.listContainers("n9", { all: true, filters: { label: [`${label}=${runId}`] } })).toEqual([]);
    } finally {
      await sub.unsubscribe();
    }
  });

  it("reports a client certificate from another CA at once, naming the certificate", async () => {
    const { node, ms } = await nodeWith(foreignClient);
    expect(node).toMatchObject({ name: "n9", state: "unreachable" });
    expect(node.error).toMatch(/^nodes on n9: engine unreachable \(TLS handshake refused by the engine: it rejected our client certificate \(.*bad certificate\)/);
    expect(ms).toBeLessThan(5_000);
  });

  it("reports an engine certificate that our CA did not sign at once, naming the certificate", async () => {
    const { node, ms } = await nodeWith(wrongServerCa);
    expect(node).toMatchObject({ name: "n9", state: "unreachable" });
    expect(node.error).toMatch(/^nodes on n9: engine unreachable \(TLS: the engine's certificate is not signed by our CA \(unable to verify the first certificate\)/);
    expect(ms).toBeLessThan(5_000);

    // A subscription says the same in its node state.
    const c = DockerCluster.fromSpec(`n9=tcp://127.0.0.1:${port}`, { tls: wrongServerCa });
    const states: string[] = [];
    const sub = c.subscribe((e) => void (e.type === "node" && states.push(`${e.state}: ${e.error}`)));
    try {
      await pollUntil("the subscription to report the node unreachable", async () => states.length > 0, 5_000);
    } finally {
      await sub.unsubscribe();
    }
    expect(states[0]).toMatch(/^unreachable: subscribe on n9: engine unreachable \(TLS: the engine's certificate is not signed by our CA/);
  });

  it("reports a missing client certificate at once (the engine requires one)", async () => {
    // The cluster always presents the configured client certificate; a client without one is made
    // here by hand and run through an Engine, so the error goes through the adapter's mapping.
    const [endpoint] = parseClusterSpec(`n9=tcp://127.0.0.1:${port}`, { tls: true });
    const engine = new Engine(endpoint!, { writeConcurrency: 1, readTimeoutMs: 10_000, writeTimeoutMs: 10_000 }, good);
    const bare = new Docker({ host: "127.0.0.1", port, protocol: "https", ca: good.ca });
    const t0 = Date.now();
    const err = await engine.read({ op: "nodes", run: (_d, signal) => (bare as unknown as InfoWithSignal).info({ abortSignal: signal }) }).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(err).toBeInstanceOf(EngineUnavailableError);
    expect(err).toMatchObject({ node: "n9", timedOut: false });
    expect((err as Error).message).toMatch(/^nodes on n9: engine unreachable \(TLS handshake refused by the engine: it rejected our client certificate/);
  });

  it("reports TLS to a port that does not speak TLS clearly", async () => {
    const plain = createServer((_req, res) => res.end("{}"));
    await new Promise<void>((r) => plain.listen(0, "127.0.0.1", r));
    try {
      const { node, ms } = await nodeWith(good, `n9=https://127.0.0.1:${(plain.address() as AddressInfo).port}`);
      expect(node).toMatchObject({ name: "n9", state: "unreachable" });
      expect(node.error).toMatch(/^nodes on n9: engine unreachable \(TLS handshake failed \(.*\): the engine does not answer TLS on this port/);
      expect(ms).toBeLessThan(5_000);
    } finally {
      plain.closeAllConnections();
      await new Promise((r) => plain.close(r));
    }
  });

  it("reports plain HTTP to the TLS port clearly", async () => {
    const c = DockerCluster.fromSpec(`n9=http://127.0.0.1:${port}`);
    const t0 = Date.now();
    const [node] = await c.nodes();
    expect(node).toMatchObject({ name: "n9", state: "unreachable" });
    expect(node!.error).toMatch(/HTTP request to an HTTPS server/);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });
});
