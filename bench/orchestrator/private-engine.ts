// A private Docker engine for the benchmark's single-engine legs: its own dockerd with its own data
// root, exec root, socket and pid file under a temp dir, started with the same flags as
// scripts/services (no networking of its own), holding the same busybox image. The Swarm leg runs
// here and never on the shared engines n1/n2: a swarm (or its docker_gwbridge) left on those would
// change what every other test and helper sees.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Docker from "dockerode";

const run = promisify(execFile);

export interface PrivateEngine {
  /** Node name used in the -cluster spec ("solo"). */
  name: string;
  /** unix:///.../docker.sock */
  endpoint: string;
  socketPath: string;
  /** Client with a per-request timeout, for everything but streams. */
  docker: Docker;
  /** Log tail, for failure messages. */
  logTail(): Promise<string>;
  /** Remove every container, stop dockerd (SIGTERM, then SIGKILL) and delete its directory. */
  stop(): Promise<void>;
}

export interface PrivateEngineOptions {
  name?: string;
  /** The scripts/services rootfs tar the shared engines' image was imported from. */
  rootfsTar: string;
  image: string;
  readyTimeoutMs?: number;
}

export async function startPrivateEngine(options: PrivateEngineOptions): Promise<PrivateEngine> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-bench-engine-"));
  const socketPath = join(dir, "docker.sock");
  const logPath = join(dir, "log");
  const logFile = await open(logPath, "w");
  const child: ChildProcess = spawn(
    "dockerd",
    [
      "--data-root", join(dir, "data"),
      "--exec-root", join(dir, "exec"),
      "-H", `unix://${socketPath}`,
      "--pidfile", join(dir, "docker.pid"),
      "--bridge=none", "--iptables=false", "--ip6tables=false",
      "--log-level", "warn",
    ],
    { stdio: ["ignore", logFile.fd, logFile.fd] },
  );
  await logFile.close();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const docker = new Docker({ socketPath, timeout: 60_000 });
  const logTail = async () => (await readFile(logPath, "utf8").catch(() => "")).slice(-2000);

  const stop = async () => {
    try {
      if (child.exitCode === null && child.signalCode === null) {
        const all = await docker.listContainers({ all: true }).catch(() => []);
        await Promise.all(all.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
      }
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const killed = setTimeout(() => child.kill("SIGKILL"), 30_000);
        await exited;
        clearTimeout(killed);
      }
      await unmountUnder(dir);
      await rm(dir, { recursive: true, force: true });
    }
  };

  try {
    const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
    for (;;) {
      if (child.exitCode !== null) throw new Error(`dockerd exited with ${child.exitCode}: ${await logTail()}`);
      if (await docker.ping().then(() => true, () => false)) break;
      if (Date.now() > deadline) throw new Error(`private dockerd not up in time: ${await logTail()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    // The same image the shared engines hold (scripts/services import_image).
    await run(
      "docker",
      ["-H", `unix://${socketPath}`, "import", "-c", "ENV PATH=/bin", "-c", 'CMD ["/bin/sh"]', options.rootfsTar, options.image],
      { timeout: 60_000 },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { name: options.name ?? "solo", endpoint: `unix://${socketPath}`, socketPath, docker, logTail, stop };
}

/**
 * Mounts dockerd leaves under its exec root after it exits (a network namespace bind mount such as
 * exec/netns/default outlives the daemon): unmounted deepest first, or the directory cannot go.
 */
async function unmountUnder(dir: string): Promise<void> {
  const mountInfo = await readFile("/proc/self/mountinfo", "utf8");
  const points = mountInfo
    .split("\n")
    .map((line) => line.split(" ")[4] ?? "")
    .filter((p) => p.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const p of points) await run("umount", ["-l", p], { timeout: 10_000 }).catch(() => undefined);
}
