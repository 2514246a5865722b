// The peer: Docker Swarm mode on one engine, `docker service create --replicas N` made through the
// Engine API the CLI calls (POST /services/create; no registry lookup, like --no-resolve-image), so
// the CLI's own process start-up is not charged to Swarm.
//
// What Swarm needs on an engine run like ours (--bridge=none --iptables=false): `swarm init` with a
// loopback advertise/listen address works; it creates the overlay "ingress" network and a host
// bridge "docker_gwbridge" (172.x/16) even though no task uses them. Services cannot ask for
// `--network none` ("network none not found": only swarm-scoped networks attach to services), so
// tasks get the engine default, which on a bridge-less engine is a network namespace with loopback
// only: the same isolation as NetworkMode none. leave() must remove docker_gwbridge as well, or
// the host keeps the interface and its route after the engine is gone.
import type Docker from "dockerode";
import type { StartEvents } from "./docker-events.ts";
import { freePort } from "../../cli/free-port.ts";

export const swarmServiceLabel = "com.docker.swarm.service.name";

export interface SwarmRun {
  /** POST /services/create to every task reported running by the swarm manager (its `service ps`). */
  tasksRunningMs: number;
  /** POST /services/create to the last container start event from the engine. */
  containersStartedMs: number;
}

export class SwarmPeer {
  private constructor(private readonly docker: Docker) {}

  static async init(docker: Docker): Promise<SwarmPeer> {
    const port = await freePort();
    await docker.swarmInit({ ListenAddr: `127.0.0.1:${port}`, AdvertiseAddr: "127.0.0.1" });
    return new SwarmPeer(docker);
  }

  /** Creates a service of `replicas` tasks and resolves when all run (both observers). */
  async run(name: string, replicas: number, image: string, args: string[], events: StartEvents, timeoutMs: number): Promise<SwarmRun> {
    const t0 = performance.now();
    await this.docker.createService({
      Name: name,
      TaskTemplate: { ContainerSpec: { Image: image, Args: args }, RestartPolicy: { Condition: "any" } },
      Mode: { Replicated: { Replicas: replicas } },
    });
    const started = events.until((ev) => countFor(ev, name) >= replicas, timeoutMs, `${replicas} swarm task containers`);
    // Awaited below; marked handled now so a failed poll does not leave an unhandled rejection.
    started.catch(() => undefined);
    // The swarm manager's own view, polled as `docker service ps` would (25 ms apart: finer than
    // anything a person watching it would notice, coarse enough not to load the manager).
    const deadline = t0 + timeoutMs;
    let tasksAt = 0;
    while (tasksAt === 0) {
      const tasks = (await this.docker.listTasks({ filters: { service: [name], "desired-state": ["running"] } })) as {
        Status?: { State?: string };
      }[];
      if (tasks.filter((t) => t.Status?.State === "running").length >= replicas) tasksAt = performance.now();
      else if (performance.now() > deadline) throw new Error(`swarm service ${name}: tasks not running after ${timeoutMs} ms`);
      else await new Promise((r) => setTimeout(r, 25));
    }
    const startedAt = await started;
    return { tasksRunningMs: tasksAt - t0, containersStartedMs: startedAt - t0 };
  }

  /** `docker service rm` (if it exists), then waits until the engine has removed every task container. */
  async remove(name: string, timeoutMs: number): Promise<void> {
    await this.docker
      .getService(name)
      .remove()
      .catch((err: { statusCode?: number }) => {
        if (err.statusCode !== 404) throw err;
      });
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const left = await this.docker.listContainers({ all: true, filters: { label: [`${swarmServiceLabel}=${name}`] } });
      if (left.length === 0) return;
      if (performance.now() > deadline) throw new Error(`swarm service ${name}: ${left.length} containers left after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** `docker swarm leave --force`, and the host bridge swarm init created. */
  async leave(): Promise<void> {
    await this.docker.swarmLeave({ force: true });
    await this.docker
      .getNetwork("docker_gwbridge")
      .remove()
      .catch((err: { statusCode?: number }) => {
        if (err.statusCode !== 404) throw err;
      });
  }
}

function countFor(events: { labels: Record<string, string> }[], service: string): number {
  let n = 0;
  for (const e of events) if (e.labels[swarmServiceLabel] === service) n++;
  return n;
}
