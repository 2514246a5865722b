// A private etcd for tests that kill, restart or partition it: its own process, its own temp data
// dir, its own free loopback ports. Never use it for the shared etcd (loadServices() gives that).
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
import { mkdtemp, rm } from "node:fs/promises";
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
