// bench:cluster: creating and starting 40 containers through the cluster adapter (20 per engine,
// both engines in parallel, writes bounded per engine) against raw dockerode doing the same in the
// same run with the same shape (both engines in parallel, the same per-engine concurrency). Rounds
// alternate which goes first; everything is removed between measurements (not timed); medians.
import Docker from "dockerode";
import PQueue from "p-queue";
import { DockerCluster, defaultEngineLimits } from "../adapters/cluster/index.ts";
import { loadServices, socketPath, uniqueName } from "../test/helpers/services.ts";
import { percentile, report } from "./lib/report.ts";

const perEngine = 20;
const rounds = 7;
const concurrency = defaultEngineLimits.writeConcurrency;
const services = loadServices();
const nodes = Object.keys(services.engines);
const run = uniqueName("bench-cluster");
const label = "io.capstan.bench";

const raw = new Map(nodes.map((n) => [n, new Docker({ socketPath: socketPath(services.engines[n]!) })]));
const cluster = DockerCluster.fromSpec(services.cluster, { writeConcurrency: concurrency });

function names(kind: string, round: number, node: string): string[] {
  return Array.from({ length: perEngine }, (_, i) => `${run}-${kind}${round}-${node}-${i}`);
}

async function viaAdapter(round: number): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    nodes.flatMap((node) =>
      names("a", round, node).map(async (name) => {
        const ref = await cluster.create(node, name, {
          image: services.testImage,
          cmd: ["sleep", "2147483647"],
          labels: { [label]: run },
          networkMode: "none",
        });
        await cluster.start(ref);
      }),
    ),
  );
  return performance.now() - t0;
}

async function viaRaw(round: number): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    nodes.map((node) => {
      const docker = raw.get(node)!;
      const queue = new PQueue({ concurrency });
      return Promise.all(
        names("r", round, node).map((name) =>
          queue.add(async () => {
            const c = await docker.createContainer({
              name,
              Image: services.testImage,
              Cmd: ["sleep", "2147483647"],
              Labels: { [label]: run },
              HostConfig: { NetworkMode: "none", RestartPolicy: { Name: "no" } },
            });
            await c.start();
          }),
        ),
      );
    }),
  );
  return performance.now() - t0;
}

async function removeAll(): Promise<void> {
  await Promise.all(
    [...raw.values()].map(async (docker) => {
      const list = await docker.listContainers({ all: true, filters: { label: [`${label}=${run}`] } });
      const queue = new PQueue({ concurrency });
      await Promise.all(list.map((c) => queue.add(() => docker.getContainer(c.Id).remove({ force: true }))));
    }),
  );
}

async function main(): Promise<void> {
  const adapterMs: number[] = [];
  const rawMs: number[] = [];
  try {
    // Warm-up (sockets, JIT, the engines' image layers), not counted.
    await viaAdapter(0);
    await removeAll();
    await viaRaw(0);
    await removeAll();
    for (let r = 1; r <= rounds; r++) {
      const order = r % 2 === 1 ? ["adapter", "raw"] : ["raw", "adapter"];
      for (const which of order) {
        const ms = which === "adapter" ? await viaAdapter(r) : await viaRaw(r);
        (which === "adapter" ? adapterMs : rawMs).push(ms);
        await removeAll();
      }
      console.log(`round ${r}: adapter ${adapterMs.at(-1)!.toFixed(0)} ms, raw ${rawMs.at(-1)!.toFixed(0)} ms`);
    }
  } finally {
    await removeAll();
  }
  const adapter = percentile(adapterMs, 50);
  const baseline = percentile(rawMs, 50);
  const containers = perEngine * nodes.length;
  const pairedRatios = adapterMs.map((a, i) => a / rawMs[i]!);
  report({
    bench: "cluster",
    figures: {
      containers,
      engines: nodes.length,
      write_concurrency_per_engine: concurrency,
      rounds,
      adapter_ms: adapter,
      raw_ms: baseline,
      adapter_per_container_ms: adapter / containers,
      raw_per_container_ms: baseline / containers,
      adapter_min_ms: Math.min(...adapterMs),
      raw_min_ms: Math.min(...rawMs),
      // The same comparison made within each round, then the median: robust to load drifting
      // between rounds on a shared machine.
      paired_ratio_median: percentile(pairedRatios, 50),
    },
    ratios: { adapter_over_raw: adapter / baseline },
    targets: [{ name: "adapter_over_raw", kind: "max", value: 1.1 }],
    notes: [
      "create+start of sleep-forever busybox containers, NetworkMode none; medians over rounds, order alternating",
    ],
  });
}

await main();
