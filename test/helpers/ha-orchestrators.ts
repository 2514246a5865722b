// Real `capstan orchestrator` processes sharing one etcd store, for the high-availability tests and
// the failover benchmark (docs/high-availability.md): start one, ask it whether it leads (its own
// /metrics, which it serves without the store), how many reconciles it ran, when it was elected (its
// log line's time), and call its API. Containers are read from the engines directly, by label.
import type { ContainerSummary, DockerCluster } from "../../adapters/cluster/index.ts";
import { orchestratorLeaderKey } from "../../cli/orchestrator.ts";
import { startCapstan, type CapstanProcess } from "./capstan-process.ts";
import type { Services } from "./services.ts";

export interface Orchestrator extends CapstanProcess {
  /** leader_election_master_status of the orchestrator's election: true while it leads. */
  leading(): Promise<boolean>;
  /** controller_runtime_reconcile_total summed over results, for one controller (default "podgroup"). */
  reconciles(controller?: string): Promise<number>;
  /** The time (ms since the epoch, from its log) it was last elected leader, if ever. */
  electedAt(): number | undefined;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  /** One API call: the status and the JSON answer (undefined when the body is not JSON). */
  api(method: string, path: string, body?: unknown, timeoutMs?: number): Promise<{ status: number; body: unknown }>;
}

/** The options every test orchestrator gets; `lease` is -lease-duration. */
export function orchestratorArgs(storeUrl: string, services: Services, lease: string, more: string[] = []): string[] {
  return ["-store", storeUrl, "-cluster", services.cluster, "-auth", "none", "-lease-duration", lease, "-update-wait", "500ms", ...more];
}

export async function startOrchestrator(args: string[]): Promise<Orchestrator> {
  const proc = await startCapstan("orchestrator", args);
  const metrics = async (): Promise<string> => {
    const res = await fetch(`${proc.url}/metrics`, { signal: AbortSignal.timeout(5_000) });
    return res.text();
  };
  return {
    ...proc,
    async leading() {
      const text = await metrics();
      const line = text.split("\n").find((l) => l.startsWith(`leader_election_master_status{name="${orchestratorLeaderKey}"}`));
      return line?.trim().endsWith(" 1") ?? false;
    },
    async reconciles(controller = "podgroup") {
      let total = 0;
      for (const line of (await metrics()).split("\n")) {
        if (line.startsWith("controller_runtime_reconcile_total{") && line.includes(`controller="${controller}"`)) total += Number(line.split(" ").pop());
      }
      return total;
    },
    electedAt() {
      let at: number | undefined;
      for (const line of proc.log().split("\n")) {
        if (!line.includes('"msg":"elected leader"')) continue;
        try {
          at = (JSON.parse(line) as { time: number }).time;
        } catch {
          // a line cut in the middle by the pipe: the next read has it whole
        }
      }
      return at;
    },
    async kill() {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
      proc.child.kill("SIGKILL");
      await proc.exited;
    },
    async api(method, path, body, timeoutMs = 15_000) {
      const res = await fetch(proc.url + path, {
        method,
        headers: body === undefined ? {} : { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      return { status: res.status, body: parsed };
    },
  };
}

/** A PodGroup of `n` busybox sleepers that stop at once on SIGTERM, with no network. */
export function sleeperGroup(name: string, image: string, numInstances: number, env: string[] = []): Record<string, unknown> {
  const stopsOnTerm = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
  return {
    name,
    namespace: "ha",
    numInstances,
    restartPolicy: "always",
    pod: { namespace: "ha", network: "none", containers: [{ image, command: ["/bin/sh", "-c", stopsOnTerm], env }] },
  };
}

/** Every container (running or not) of a group on every engine, by its podgroup label. */
export async function containersOf(cluster: DockerCluster, group: string): Promise<ContainerSummary[]> {
  return cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${group}`] } });
}

/** Remove every container of these groups from the engines (afterAll). */
export async function removeGroups(cluster: DockerCluster, groups: string[]): Promise<void> {
  for (const group of groups) {
    for (const c of await containersOf(cluster, group).catch(() => [])) await cluster.remove(c, { force: true, volumes: true }).catch(() => {});
  }
}

/** Whichever of `orchestrators` leads now (each asked once), or undefined. */
export async function leaderOf(orchestrators: Orchestrator[]): Promise<Orchestrator | undefined> {
  for (const o of orchestrators) {
    if (o.child.exitCode !== null || o.child.signalCode !== null) continue;
    if (await o.leading().catch(() => false)) return o;
  }
  return undefined;
}
