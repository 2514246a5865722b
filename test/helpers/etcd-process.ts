// A private etcd for tests that kill, restart or partition it: its own process, its own temp data
// dir, its own free loopback ports. Never use it for the shared etcd (loadServices() gives that).
// startEtcdCluster() (below) starts a private cluster of three members instead.
//
//   const etcd = await startEtcd();
//   etcd.kill("SIGKILL");    // abrupt death; data dir kept
//   await etcd.start();      // same ports, same data: clients reconnect
//   await etcd.stop();       // kill and delete the data dir (call in afterAll)
//
// With `tls`, clients talk HTTPS/gRPC-over-TLS to it (etcd's --cert-file/--key-file), and with
// `tls.clientCa` it also demands a client certificate signed by that CA (--client-cert-auth
// --trusted-ca-file). Health is then checked on a separate plain-HTTP metrics listener.
//
//   const pki = await makePki();
//   const server = await pki.issue("server", { dns: ["localhost"], ip: ["127.0.0.1"] });
//   const etcd = await startEtcd({ tls: { ...server, clientCa: pki.ca } });
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { freePort } from "../../cli/free-port.ts";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface EtcdProcess {
  /** host:port of the client URL. */
  endpoint: string;
  /** The client URL: http://host:port, or https://host:port with `tls`. */
  clientUrl: string;
  dataDir: string;
  /** Send a signal (default SIGKILL) and wait for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Start again (same ports and data dir) and wait until healthy. */
  start(): Promise<void>;
  /** Kill and remove the data dir. */
  stop(): Promise<void>;
  /** Last lines etcd printed (for failure messages). */
  logTail(): string;
}

export interface StartEtcdOptions {
  /** --experimental-watch-progress-notify-interval (default "1s"). */
  progressNotifyInterval?: string;
  /** How long to wait for /health (default 15 s). */
  readyTimeoutMs?: number;
  /** Serve clients over TLS with this certificate and key (PEM file paths). */
  tls?: {
    cert: string;
    key: string;
    /** A CA's certificate (PEM file path): require client certificates it signed (--client-cert-auth). */
    clientCa?: string;
  };
}

async function healthy(httpPort: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${httpPort}/health`, { signal: AbortSignal.timeout(1_000) });
    const body = (await res.json()) as { health?: string };
    return body.health === "true";
  } catch {
    return false;
  }
}

export async function startEtcd(options: StartEtcdOptions = {}): Promise<EtcdProcess> {
  const dataDir = await mkdtemp(join(tmpdir(), "capstan-etcd-"));
  // With TLS the client port speaks only TLS (and may demand a client certificate): /health is
  // read from a plain-HTTP metrics listener instead.
  const tls = options.tls;
  let clientPort = 0;
  let peerPort = 0;
  let metricsPort: number | undefined;
  let clientUrl = "";
  let tlsArgs: string[] = [];
  // A free port is free when asked, not when etcd binds it: another process may take it in
  // between. The first start picks new ports then; a restart keeps them (its endpoint is known).
  const pickPorts = async () => {
    clientPort = await freePort();
    peerPort = await freePort();
    metricsPort = tls ? await freePort() : undefined;
    clientUrl = `${tls ? "https" : "http"}://127.0.0.1:${clientPort}`;
    tlsArgs = tls
      ? [
          "--cert-file", tls.cert,
          "--key-file", tls.key,
          "--listen-metrics-urls", `http://127.0.0.1:${metricsPort}`,
          ...(tls.clientCa ? ["--client-cert-auth", "--trusted-ca-file", tls.clientCa] : []),
        ]
      : [];
  };
  await pickPorts();
  const readyTimeoutMs = options.readyTimeoutMs ?? 15_000;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const log: string[] = [];

  const launch = async () => {
    const proc = spawn(
      "etcd",
      [
        "--name", "capstan-private",
        "--data-dir", join(dataDir, "data"),
        "--listen-client-urls", clientUrl,
        "--advertise-client-urls", clientUrl,
        "--listen-peer-urls", `http://127.0.0.1:${peerPort}`,
        "--initial-advertise-peer-urls", `http://127.0.0.1:${peerPort}`,
        "--initial-cluster", `capstan-private=http://127.0.0.1:${peerPort}`,
        "--experimental-watch-progress-notify-interval", options.progressNotifyInterval ?? "1s",
        "--log-level", "warn",
        ...tlsArgs,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    const keep = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.length > 50) log.splice(0, log.length - 50);
    };
    proc.stdout?.on("data", keep);
    proc.stderr?.on("data", keep);
    child = proc;
    exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    const deadline = Date.now() + readyTimeoutMs;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`etcd exited with ${proc.exitCode}: ${log.join("").slice(-2000)}`);
      if (await healthy(metricsPort ?? clientPort)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    proc.kill("SIGKILL");
    throw new Error(`private etcd not healthy within ${readyTimeoutMs} ms: ${log.join("").slice(-2000)}`);
  };

  const kill = async (signal: NodeJS.Signals = "SIGKILL") => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    await exited;
  };

  for (let attempt = 1; ; attempt++) {
    try {
      await launch();
      break;
    } catch (e) {
      if (attempt >= 5 || !/address already in use/.test((e as Error).message)) throw e;
      await rm(join(dataDir, "data"), { recursive: true, force: true });
      await pickPorts();
    }
  }
  return {
    endpoint: `127.0.0.1:${clientPort}`,
    clientUrl,
    dataDir,
    kill,
    start: launch,
    async stop() {
      await kill("SIGKILL");
      await rm(dataDir, { recursive: true, force: true });
    },
    logTail: () => log.join("").slice(-2000),
  };
}

// A private three-member etcd cluster (any odd size) on loopback: what a highly available
// Capstan runs on (docs/high-availability.md). Each member is its own process with its own data
// dir, so a test can kill the Raft leader, stop one member and start it again, and clients given
// every endpoint (`storeUrl`) carry on with the other two.
//
//   const cluster = await startEtcdCluster();            // 3 members, healthy (a leader elected)
//   const leader = await cluster.leader();               // the member that leads Raft now
//   await leader.kill();                                  // SIGKILL; the other two elect a new one
//   await leader.start();                                 // same ports and data: it rejoins
//   await cluster.stop();                                 // every member killed, data removed

export interface EtcdMember {
  /** The member's name in the cluster (capstan-1, capstan-2, ...). */
  name: string;
  /** host:port of its client URL. */
  endpoint: string;
  clientUrl: string;
  /** Send a signal (default SIGKILL) and wait for the process to exit. Data kept. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Start again (same ports and data) and wait until it answers /health (the cluster has a leader). */
  start(): Promise<void>;
  /** Whether its process runs. */
  running(): boolean;
  logTail(): string;
}

export interface EtcdCluster {
  members: EtcdMember[];
  /** Every member's host:port. */
  endpoints: string[];
  /** The store URL naming every member: etcd://host:port,host:port,host:port. */
  storeUrl: string;
  /** The member that is the Raft leader now, asked of the running members (polls up to `timeoutMs`). */
  leader(timeoutMs?: number): Promise<EtcdMember>;
  /** Kill every member and remove the data. */
  stop(): Promise<void>;
}

export interface StartEtcdClusterOptions {
  /** Members (default 3). */
  members?: number;
  /** --experimental-watch-progress-notify-interval (default "1s"). */
  progressNotifyInterval?: string;
  /** How long to wait for the cluster to be healthy (default 20 s). */
  readyTimeoutMs?: number;
}

/** etcd's member id of the server on `clientUrl` and the id of the leader it knows (gRPC gateway). */
async function memberStatus(clientUrl: string): Promise<{ id: string; leader: string } | undefined> {
  try {
    const res = await fetch(`${clientUrl}/v3/maintenance/status`, { method: "POST", body: "{}", signal: AbortSignal.timeout(1_000) });
    const body = (await res.json()) as { header?: { member_id?: string }; leader?: string };
    if (!body.header?.member_id || !body.leader || body.leader === "0") return undefined;
    return { id: body.header.member_id, leader: body.leader };
  } catch {
    return undefined;
  }
}

export async function startEtcdCluster(options: StartEtcdClusterOptions = {}): Promise<EtcdCluster> {
  const size = options.members ?? 3;
  const readyTimeoutMs = options.readyTimeoutMs ?? 20_000;
  const dataDir = await mkdtemp(join(tmpdir(), "capstan-etcd-cluster-"));
  for (let attempt = 1; ; attempt++) {
    const ports = await Promise.all(Array.from({ length: size * 2 }, () => freePort()));
    const names = Array.from({ length: size }, (_, i) => `capstan-${i + 1}`);
    const peerUrl = (i: number) => `http://127.0.0.1:${ports[size + i]}`;
    const initialCluster = names.map((n, i) => `${n}=${peerUrl(i)}`).join(",");
    const members = names.map((name, i) => clusterMember(name, `http://127.0.0.1:${ports[i]}`, peerUrl(i), join(dataDir, name), initialCluster, options, readyTimeoutMs));
    try {
      // Members wait for each other (no quorum, no /health): start them together.
      await Promise.all(members.map((m) => m.start()));
    } catch (e) {
      await Promise.all(members.map((m) => m.kill()));
      await rm(dataDir, { recursive: true, force: true });
      await mkdir(dataDir, { recursive: true });
      if (attempt >= 5 || !/address already in use/.test(members.map((m) => m.logTail()).join("") + (e as Error).message)) throw e;
      continue;
    }
    const endpoints = members.map((m) => m.endpoint);
    return {
      members,
      endpoints,
      storeUrl: `etcd://${endpoints.join(",")}`,
      async leader(timeoutMs = 10_000) {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
          for (const m of members.filter((x) => x.running())) {
            const status = await memberStatus(m.clientUrl);
            if (status?.id === status?.leader) return m;
          }
          if (Date.now() > deadline) throw new Error(`no etcd member leads after ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 100));
        }
      },
      async stop() {
        await Promise.all(members.map((m) => m.kill()));
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  }
}

function clusterMember(
  name: string,
  clientUrl: string,
  peerUrl: string,
  dataDir: string,
  initialCluster: string,
  options: StartEtcdClusterOptions,
  readyTimeoutMs: number,
): EtcdMember {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const log: string[] = [];
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const kill = async (signal: NodeJS.Signals = "SIGKILL") => {
    if (!running()) return;
    child!.kill(signal);
    await exited;
  };
  return {
    name,
    endpoint: clientUrl.replace(/^http:\/\//, ""),
    clientUrl,
    running,
    kill,
    logTail: () => log.join("").slice(-2000),
    async start() {
      if (running()) return;
      const proc = spawn(
        "etcd",
        [
          "--name", name,
          "--data-dir", dataDir,
          "--listen-client-urls", clientUrl,
          "--advertise-client-urls", clientUrl,
          "--listen-peer-urls", peerUrl,
          "--initial-advertise-peer-urls", peerUrl,
          "--initial-cluster", initialCluster,
          "--initial-cluster-state", "new",
          "--initial-cluster-token", "capstan-private-cluster",
          "--experimental-watch-progress-notify-interval", options.progressNotifyInterval ?? "1s",
          "--log-level", "warn",
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      const keep = (chunk: Buffer) => {
        log.push(chunk.toString());
        if (log.length > 50) log.splice(0, log.length - 50);
      };
      proc.stdout?.on("data", keep);
      proc.stderr?.on("data", keep);
      child = proc;
      exited = new Promise((resolve) => proc.once("exit", () => resolve()));
      const port = Number(new URL(clientUrl).port);
      const deadline = Date.now() + readyTimeoutMs;
      while (Date.now() < deadline) {
        if (proc.exitCode !== null) throw new Error(`etcd member ${name} exited with ${proc.exitCode}: ${log.join("").slice(-2000)}`);
        if (await healthy(port)) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      proc.kill("SIGKILL");
      throw new Error(`etcd member ${name} not healthy within ${readyTimeoutMs} ms: ${log.join("").slice(-2000)}`);
    },
  };
}
