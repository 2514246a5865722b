// bench:drift: a drift of 40 instances from one node to another, against the raw remove-and-create
// of the same containers, in one run on the two real engines (docs/benchmarks.md, "drift").
//
// Capstan: `capstan orchestrator` in a child process on a private etcd (as operators run it, so
// with `-auth token`: the bench registers an admin token in that etcd first, as the console would,
// and sends it on every call), one PodGroup of 40 instances. Before each round every instance is
// brought onto n1 (a drift n2 -> n1, not timed); then PATCH /api/nodes?cmd=drift&from=n1&to=n2,
// timed until the status record says all 40 run on n2 (what GET answers next; watched in the
// store). The engines' own start events on n2 are reported alongside.
// Raw: 40 equivalent containers created on n1 (not timed); then, timed, dockerode force-remove of
// the 40 on n1 and create + start of 40 on n2, both at once, at most `concurrency` writes in flight
// per engine (the cluster adapter's per-engine bound, which Capstan runs with). Same image,
// command, NetworkMode none. No store, no status: the least any drain has to do.
// Both legs let the engines settle for settleMs after their untimed setup (the orchestrator's own
// follow-up work on the 40 new pods, the node monitor's inspects, the engines' background work), so
// each times the drift of a cluster at rest, as a drain usually is.
// Rounds alternate which leg goes first; medians of BENCH_DRIFT_ROUNDS (default 3) rounds, and
// the median of the per-round ratios. Everything created is removed at the end.
import Docker from "dockerode";
import PQueue from "p-queue";
import { defaultEngineLimits } from "../adapters/cluster/index.ts";
import { EtcdStore } from "../adapters/store/etcd.ts";
import type { PodGroupStatus } from "../api/resources/podgroup.ts";
import { startEtcd } from "../test/helpers/etcd-process.ts";
import { loadServices, socketPath, uniqueName } from "../test/helpers/services.ts";
import { api, OrchestratorProcess, registerAdminToken, untilStatus } from "./orchestrator/capstan.ts";
import { StartEvents } from "./orchestrator/docker-events.ts";
import { rawCreateStart, removeLabelled } from "./orchestrator/raw.ts";
import { percentile, report } from "./lib/report.ts";

const instances = 40;
const rounds = positiveInt(process.env.BENCH_DRIFT_ROUNDS, 3);
const concurrency = defaultEngineLimits.writeConcurrency;
const settleMs = 3_000;
// Stops at once on SIGTERM, in both legs (a bare `sleep` as PID 1 would wait out the kill timeout).
const command = ["sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"];
const groupLabel = "io.capstan.podgroup";
const instanceLabel = "io.capstan.instance";
const benchLabel = "io.capstan.bench";

const services = loadServices();
const run = uniqueName("bd");
const group = `${run}-drift`;
const engines: Record<string, Docker> = Object.fromEntries(
  Object.entries(services.engines).map(([n, e]) => [n, new Docker({ socketPath: socketPath(e), timeout: 60_000 })]),
);

function positiveInt(text: string | undefined, fallback: number): number {
  const n = Number(text ?? fallback);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_DRIFT_ROUNDS must be a positive integer (got ${text})`);
  return n;
}

/** Every one of the 40 pods runs on `node`. */
const allOn = (node: string) => (s: PodGroupStatus | null) =>
  s !== null && s.pods.length === instances && s.pods.every((p) => p.state === "running" && p.node === node);

async function patchDrift(baseUrl: string, token: string, from: string, to: string): Promise<void> {
  const res = await api(baseUrl, "PATCH", `/api/nodes?cmd=drift&from=${from}&to=${to}&pg=${group}`, undefined, { token });
  if (res.status !== 202) throw new Error(`drift ${from} -> ${to}: ${res.status} ${JSON.stringify(res.body)}`);
}

interface CapstanRound {
  statusMs: number;
  startedMs: number;
}

async function capstanRound(proc: OrchestratorProcess, token: string, store: EtcdStore): Promise<CapstanRound> {
  // Setup (not timed): everything onto n1.
  await patchDrift(proc.baseUrl, token, "n2", "n1");
  await untilStatus(store, group, allOn("n1"), 180_000);
  await new Promise((r) => setTimeout(r, settleMs));
  const events = await StartEvents.open({ n2: engines.n2! }, `${groupLabel}=${group}`);
  try {
    const done = untilStatus(store, group, allOn("n2"), 180_000);
    done.catch(() => undefined); // awaited below
    const t0 = performance.now();
    await patchDrift(proc.baseUrl, token, "n1", "n2");
    const started = events.until((ev) => new Set(ev.map((e) => e.labels[instanceLabel])).size >= instances, 180_000, `${instances} starts on n2`);
    const [statusAt, startedAt] = await Promise.all([done, started]);
    return { statusMs: statusAt - t0, startedMs: startedAt - t0 };
  } finally {
    events.close();
  }
}

async function rawRound(tag: string): Promise<number> {
  const workload = { image: services.testImage, cmd: command, labels: { [benchLabel]: run }, networkMode: "none" };
  await rawCreateStart({ n1: engines.n1! }, { n1: instances }, `${run}-raw${tag}-from`, workload, concurrency);
  const n1 = engines.n1!;
  const old = await n1.listContainers({ all: true, filters: { label: [`${benchLabel}=${run}`] } });
  if (old.length !== instances) throw new Error(`raw setup: ${old.length} containers on n1, expected ${instances}`);
  await new Promise((r) => setTimeout(r, settleMs));
  const removals = new PQueue({ concurrency });
  const t0 = performance.now();
  await Promise.all([
    Promise.all(old.map((c) => removals.add(() => n1.getContainer(c.Id).remove({ force: true })))),
    rawCreateStart({ n2: engines.n2! }, { n2: instances }, `${run}-raw${tag}-to`, workload, concurrency),
  ]);
  const ms = performance.now() - t0;
  await removeLabelled(engines, `${benchLabel}=${run}`, concurrency);
  return ms;
}

async function main(): Promise<void> {
  const etcd = await startEtcd();
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  let proc: OrchestratorProcess | undefined;
  let token: string | undefined;
  try {
    // The orchestrator runs with -auth token (its default); the bench plays the console's part.
    token = await registerAdminToken(store);
    proc = await OrchestratorProcess.start({ storeUrl: `etcd://${etcd.endpoint}`, cluster: services.cluster });
    const spec = {
      name: group,
      namespace: "bench",
      numInstances: instances,
      restartPolicy: "always",
      pod: { namespace: "bench", containers: [{ image: services.testImage, command }], network: "none" },
    };
    // The node monitor records the nodes shortly after start; until then feasibility says 409.
    for (let i = 0; ; i++) {
      const res = await api(proc.baseUrl, "POST", "/api/podgroups", spec, { token });
      if (res.status === 202) break;
      if (res.status !== 409 || i > 150) throw new Error(`POST: ${res.status} ${JSON.stringify(res.body)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    await untilStatus(store, group, (s) => s !== null && s.pods.length === instances && s.pods.every((p) => p.state === "running"), 180_000);

    const capstan: CapstanRound[] = [];
    const raw: number[] = [];
    const paired: number[] = [];
    for (let r = 0; r < rounds; r++) {
      let c: CapstanRound;
      let w: number;
      if (r % 2 === 0) {
        c = await capstanRound(proc, token, store);
        w = await rawRound(String(r));
      } else {
        w = await rawRound(String(r));
        c = await capstanRound(proc, token, store);
      }
      capstan.push(c);
      raw.push(w);
      paired.push(c.statusMs / w);
      console.log(`round ${r + 1}: capstan ${c.statusMs.toFixed(0)} ms (started on n2 ${c.startedMs.toFixed(0)} ms), raw ${w.toFixed(0)} ms`);
    }

    const capstanMs = percentile(capstan.map((c) => c.statusMs), 50);
    const rawMs = percentile(raw, 50);
    report({
      bench: "drift",
      figures: {
        instances,
        rounds,
        settle_ms: settleMs,
        engine_write_concurrency: concurrency,
        capstan_drift_ms: capstanMs,
        capstan_started_on_target_ms: percentile(capstan.map((c) => c.startedMs), 50),
        raw_remove_create_ms: rawMs,
      },
      ratios: { capstan_over_raw: capstanMs / rawMs, capstan_over_raw_paired_median: percentile(paired, 50) },
      targets: [{ name: "capstan_over_raw", kind: "max", value: 1.25 }],
      notes: [
        `${instances} instances n1 -> n2; capstan: PATCH to the status record showing all on n2; raw: force-remove on n1 + create/start on n2 at once`,
        `medians of ${rounds} round(s) (BENCH_DRIFT_ROUNDS), legs alternating first`,
      ],
    });
  } finally {
    if (proc) {
      await api(proc.baseUrl, "DELETE", `/api/podgroups?name=${group}`, undefined, { token }).catch(() => undefined);
      const deadline = Date.now() + 120_000;
      while (Date.now() < deadline) {
        const left = await Promise.all(Object.values(engines).map((d) => d.listContainers({ all: true, filters: { label: [`${groupLabel}=${group}`] } })));
        if (left.every((l) => l.length === 0)) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      await proc.stop();
    }
    await removeLabelled(engines, `${groupLabel}=${group}`, concurrency).catch(() => undefined);
    await removeLabelled(engines, `${benchLabel}=${run}`, concurrency).catch(() => undefined);
    await store.close();
    await etcd.stop();
  }
}

await main();
