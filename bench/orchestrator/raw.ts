// The raw baseline: dockerode create + start of equivalent containers (same image, command and
// network mode as the orchestrator's), every engine in parallel, at most `concurrency` writes in flight per engine (the
// cluster adapter's per-engine bound, which is what Capstan runs with). No placement, no store, no
// status: the least any orchestrator has to do to get the same containers running.
import type Docker from "dockerode";
import PQueue from "p-queue";

export interface RawWorkload {
  image: string;
  cmd: string[];
  labels: Record<string, string>;
  /** HostConfig.NetworkMode; undefined leaves the engine's default. */
  networkMode: string | undefined;
}

/** Creates and starts `perEngine[node]` containers on each engine; resolves with the elapsed ms. */
export async function rawCreateStart(
  engines: Record<string, Docker>,
  perEngine: Record<string, number>,
  namePrefix: string,
  workload: RawWorkload,
  concurrency: number,
): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    Object.entries(perEngine).map(([node, count]) => {
      const docker = engines[node]!;
      const queue = new PQueue({ concurrency });
      return Promise.all(
        Array.from({ length: count }, (_, i) =>
          queue.add(async () => {
            const c = await docker.createContainer({
              name: `${namePrefix}-${node}-${i}`,
              Image: workload.image,
              Cmd: workload.cmd,
              Labels: workload.labels,
              HostConfig: {
                RestartPolicy: { Name: "no" },
                ...(workload.networkMode !== undefined && { NetworkMode: workload.networkMode }),
              },
            });
            await c.start();
          }),
        ),
      );
    }),
  );
  return performance.now() - t0;
}

/** Force-removes every container carrying `label` ("key=value") on every engine. */
export async function removeLabelled(engines: Record<string, Docker>, label: string, concurrency: number): Promise<void> {
  await Promise.all(
    Object.values(engines).map(async (docker) => {
      const list = await docker.listContainers({ all: true, filters: { label: [label] } });
      const queue = new PQueue({ concurrency });
      await Promise.all(
        list.map((c) =>
          queue.add(() =>
            docker
              .getContainer(c.Id)
              .remove({ force: true })
              // Already gone (someone else's cleanup won the race) is what we wanted.
              .catch((err: { statusCode?: number }) => {
                if (err.statusCode !== 404 && err.statusCode !== 409) throw err;
              }),
          ),
        ),
      );
    }),
  );
}
