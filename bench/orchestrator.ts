// bench:orchestrator: the orchestrator end to end on the real engines, in one run (docs/benchmarks.md,
// "orchestrator").
//
// (a) 40 instances from POST to all running. On the two shared engines: Capstan against raw
//     dockerode create + start of 40 equivalent containers (same image, command, NetworkMode none,
//     the cluster adapter's per-engine write bound). On ONE private engine started here: Capstan
//     against raw against Docker Swarm mode (`service create --replicas 40`, the peer); Swarm runs
//     only there (swarm left and engine removed at the end), so Capstan meets Swarm one engine
//     against one engine. A Swarm service cannot ask for NetworkMode none (only swarm-scoped
//     networks attach to services) and its tasks get NetworkMode "default", so all three
//     single-engine legs use "default", which on an engine without a bridge is a namespace with
//     loopback only (the same isolation; on dockerd 20.10 it is also about twice as fast to create
//     as "none", so mixing modes would skew the comparison). Rounds rotate the order; medians, and the per-round paired ratios.
//     "Running" is Capstan's status record saying so (what GET answers next) and the swarm
//     manager's task list saying so; the engines' own start events are reported alongside.
// (b) Repair: a container of a running group force-removed behind Capstan's back (`docker rm -f`),
//     time until a container of that instance runs again per the engine's events; median of 20.
// (c) API: 2,000 requests, 25 % POST of zero-instance groups and 75 % GET of existing ones, 16 at a
//     time, against the orchestrator on etcd; p50 / p99. With authentication off (`-auth none`) and
//     on (`-auth token`, an admin token on every request), each a fresh process on the same etcd,
//     legs etcd, none, token, etcd, token, none, etcd. Baseline: the same mix as bare etcd operations
//     (create-if-absent txn / get) from this process, the floor any API on etcd has; and, as a
//     second floor, the same operations behind the least HTTP server in Node (orchestrator/
//     passthrough.ts, its own process: what any Node API on etcd pays on this machine). Targets:
//     auth p99 <= 1.1 x no-auth p99, and auth p99 <= 1.3 x bare etcd p99.
// (d) 5,000 zero-instance PodGroups in the store: the orchestrator's RSS, the CPU time of its start-up
//     sync (list + one reconcile each) and of one full periodic refresh cycle (/proc/<pid>/stat).
//
// Every orchestrator under test is `capstan orchestrator` in a child process on a private etcd (its
// keys are fixed under /platform/orchestrator/), with `-auth token` unless said otherwise; the bench
// registers an admin token in that etcd first, as the console would. Everything created is removed
// at the end.
import { readFile } from "node:fs/promises";
import Docker from "dockerode";
import { Etcd3 } from "etcd3";
import { defaultEngineLimits } from "../adapters/cluster/index.ts";
import { EtcdStore } from "../adapters/store/etcd.ts";
import type { Store } from "../adapters/store/store.ts";
import { generateToken } from "../api/console/index.ts";
import { keys } from "../api/resources/keys.ts";
import { startEtcd, type EtcdProcess } from "../test/helpers/etcd-process.ts";
import { loadServices, socketPath, uniqueName } from "../test/helpers/services.ts";
import { allRunning, api, OrchestratorProcess, registerAdminToken, untilStatus, type ApiAnswer } from "./orchestrator/capstan.ts";
import { StartEvents } from "./orchestrator/docker-events.ts";
import { startPrivateEngine, type PrivateEngine } from "./orchestrator/private-engine.ts";
import { rawCreateStart, removeLabelled } from "./orchestrator/raw.ts";
import { SwarmPeer, type SwarmRun } from "./orchestrator/swarm.ts";
import { percentile, report, type Target } from "./lib/report.ts";
import { startScriptServer } from "./lib/script-server.ts";

const instances = 40;
const rounds = positiveInt(process.env.BENCH_ORCHESTRATOR_ROUNDS, 5);
const repairs = 20;
const apiRequests = 2_000;
const apiConcurrency = 16;
const apiWarmup = 6_000;
const storedGroups = 5_000;
const refreshIntervalS = 30;
const concurrency = defaultEngineLimits.writeConcurrency;
// Stops at once on SIGTERM (a bare `sleep` as PID 1 ignores it and every removal waits out the
// grace period): clean-up between rounds stays short. The same command in every leg.
const command = ["sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"];
const namespace = "bench";
// BENCH_ORCHESTRATOR_PROFILE=DIR: the orchestrators under test write V8 CPU profiles (.cpuprofile,
// open in Chrome DevTools or speedscope) to DIR when they stop. Profiling slows them: not for figures.
const profileDir = process.env.BENCH_ORCHESTRATOR_PROFILE;
const profileArgs = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];

const services = loadServices();
const run = uniqueName("bo");
/** The admin token of this run, registered in every private etcd (startOrchestrator). */
const adminToken = generateToken().token;
const benchLabel = "io.capstan.bench";
const groupLabel = "io.capstan.podgroup";
const instanceLabel = "io.capstan.instance";
const shared: Record<string, Docker> = Object.fromEntries(
  Object.entries(services.engines).map(([n, e]) => [n, new Docker({ socketPath: socketPath(e), timeout: 60_000 })]),
);
const sharedNodes = Object.keys(shared);

interface Orchestrator {
  /** Replaced by a fresh process in (c) and (d). */
  proc: OrchestratorProcess;
  /** The admin token every request carries; undefined while `proc` runs with `-auth none`. */
  token: string | undefined;
  /** A client of its store, for watching status records. */
  store: Store;
  engines: Record<string, Docker>;
}

function positiveInt(text: string | undefined, fallback: number): number {
  const n = Number(text ?? fallback);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_ORCHESTRATOR_ROUNDS must be a positive integer (got ${text})`);
  return n;
}

type NetworkMode = "none" | "default";

/** `network`: the pod's network, which Capstan passes to the engine as HostConfig.NetworkMode. */
function groupSpec(name: string, numInstances: number, network: NetworkMode = "none") {
  return {
    name,
    namespace,
    numInstances,
    restartPolicy: "always",
    pod: { namespace, containers: [{ image: services.testImage, command }], network },
  };
}

/** One request to `o`'s API, carrying its token when it has one. */
function call(o: Orchestrator, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
  return api(o.proc.baseUrl, method, path, body, { token: o.token });
}

/** POST, retrying only while the node monitor has not yet recorded a ready node (start-up). */
async function post(o: Orchestrator, spec: ReturnType<typeof groupSpec>): Promise<void> {
  const deadline = performance.now() + 30_000;
  for (;;) {
    const res = await call(o, "POST", "/api/podgroups", spec);
    if (res.status === 202) return;
    const reason = (res.body as { reason?: string } | undefined)?.reason;
    if (res.status === 409 && reason === "InsufficientResources" && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      continue;
    }
    throw new Error(`POST ${spec.name}: ${res.status} ${JSON.stringify(res.body)}`);
  }
}

/** DELETE, then wait until the API answers 404 and no engine holds a container of the group. */
async function deleteGroup(o: Orchestrator, name: string, timeoutMs = 180_000): Promise<void> {
  const res = await call(o, "DELETE", `/api/podgroups?name=${name}`);
  if (res.status !== 202 && res.status !== 404) throw new Error(`DELETE ${name}: ${res.status} ${JSON.stringify(res.body)}`);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const gone = (await call(o, "GET", `/api/podgroups?name=${name}`)).status === 404;
    const left = await Promise.all(
      Object.values(o.engines).map((d) => d.listContainers({ all: true, filters: { label: [`${groupLabel}=${name}`] } })),
    );
    if (gone && left.every((l) => l.length === 0)) return;
    if (performance.now() > deadline) throw new Error(`podgroup ${name} not removed after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface DeployRun {
  /** POST to the status record showing every pod running. */
  statusMs: number;
  /** POST to the engines' start event of the last instance. */
  containersStartedMs: number;
  perNode: Record<string, number>;
}

async function capstanDeploy(o: Orchestrator, name: string, network: NetworkMode): Promise<DeployRun> {
  const events = await StartEvents.open(o.engines, `${groupLabel}=${name}`);
  try {
    const running = untilStatus(o.store, name, allRunning(instances), 180_000);
    // Awaited below; marked handled now so a failed POST does not leave an unhandled rejection.
    running.catch(() => undefined);
    const t0 = performance.now();
    await post(o, groupSpec(name, instances, network));
    const started = events.until((ev) => new Set(ev.map((e) => e.labels[instanceLabel])).size >= instances, 180_000, `${instances} instances of ${name}`);
    const [statusAt, startedAt] = await Promise.all([running, started]);
    const perNode: Record<string, number> = {};
    for (const e of events.events) perNode[e.node] = (perNode[e.node] ?? 0) + 1;
    return { statusMs: statusAt - t0, containersStartedMs: startedAt - t0, perNode };
  } finally {
    events.close();
  }
}

/**
 * `capstan orchestrator` with default options (so `-auth token`) on a private etcd of its own, in
 * which the bench has registered an admin token first, as the console would.
 */
async function startOrchestrator(cluster: string, engines: Record<string, Docker>): Promise<Orchestrator & { etcd: EtcdProcess }> {
  const etcd = await startEtcd();
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  try {
    const token = await registerAdminToken(store, adminToken);
    const proc = await OrchestratorProcess.start({ storeUrl: `etcd://${etcd.endpoint}`, cluster, nodeArgs: profileArgs });
    return { proc, token, store, engines, etcd };
  } catch (err) {
    await store.close();
    await etcd.stop();
    throw err;
  }
}

// ---- (a) ---------------------------------------------------------------------------------------

type LegName = "capstan2" | "raw2" | "capstan1" | "raw1" | "swarm1";

interface DeployFigures {
  capstan2: DeployRun[];
  raw2: number[];
  capstan1: DeployRun[];
  raw1: number[];
  swarm1: SwarmRun[];
}

/** One round's result of each leg. */
type Round = { [K in keyof DeployFigures]?: DeployFigures[K][number] };

const attemptsPerRound = 3;

async function deployLegs(duo: Orchestrator, solo: Orchestrator, engine: PrivateEngine, swarm: SwarmPeer): Promise<DeployFigures> {
  const soloEngines = { [engine.name]: engine.docker };
  const workload = { image: services.testImage, cmd: command, labels: { [benchLabel]: run }, networkMode: "none" };
  const soloWorkload = { ...workload, networkMode: "default" };
  const split = Object.fromEntries(
    sharedNodes.map((n, i) => [n, Math.floor(instances / sharedNodes.length) + (i < instances % sharedNodes.length ? 1 : 0)]),
  );
  // Each leg cleans up after itself, also when it fails, so a round can be run again.
  const legs: Record<LegName, (tag: string, round: Round) => Promise<string>> = {
    capstan2: async (tag, round) => {
      const name = `${run}-duo${tag}`;
      try {
        const d = (round.capstan2 = await capstanDeploy(duo, name, "none"));
        return `capstan2 ${d.statusMs.toFixed(0)} ms (started ${d.containersStartedMs.toFixed(0)}, ${JSON.stringify(d.perNode)})`;
      } finally {
        await deleteGroup(duo, name);
      }
    },
    raw2: async (tag, round) => {
      try {
        const ms = (round.raw2 = await rawCreateStart(shared, split, `${run}-raw${tag}`, workload, concurrency));
        return `raw2 ${ms.toFixed(0)} ms`;
      } finally {
        await removeLabelled(shared, `${benchLabel}=${run}`, concurrency);
      }
    },
    capstan1: async (tag, round) => {
      const name = `${run}-solo${tag}`;
      try {
        const d = (round.capstan1 = await capstanDeploy(solo, name, "default"));
        return `capstan1 ${d.statusMs.toFixed(0)} ms (started ${d.containersStartedMs.toFixed(0)})`;
      } finally {
        await deleteGroup(solo, name);
      }
    },
    raw1: async (tag, round) => {
      try {
        const ms = (round.raw1 = await rawCreateStart(soloEngines, { [engine.name]: instances }, `${run}-raw${tag}`, soloWorkload, concurrency));
        return `raw1 ${ms.toFixed(0)} ms`;
      } finally {
        await removeLabelled(soloEngines, `${benchLabel}=${run}`, concurrency);
      }
    },
    swarm1: async (tag, round) => {
      const service = `${run}-svc${tag}`;
      const events = await StartEvents.open(soloEngines, "com.docker.swarm.service.name");
      try {
        const s = (round.swarm1 = await swarm.run(service, instances, services.testImage, command, events, 180_000));
        return `swarm1 ${s.tasksRunningMs.toFixed(0)} ms (started ${s.containersStartedMs.toFixed(0)})`;
      } finally {
        events.close();
        await swarm.remove(service, 180_000);
      }
    },
  };
  const order = Object.keys(legs) as LegName[];
  const out: DeployFigures = { capstan2: [], raw2: [], capstan1: [], raw1: [], swarm1: [] };
  // Round 0 warms up every path (sockets, JIT, engines' image layers); not counted.
  for (let r = 0; r <= rounds; r++) {
    const rotated = [...order.slice(r % order.length), ...order.slice(0, r % order.length)];
    for (let attempt = 1; ; attempt++) {
      const round: Round = {};
      const lines: string[] = [];
      try {
        await enginesUp();
        for (const leg of rotated) lines.push(await legs[leg](`${r}a${attempt}`, round));
      } catch (err) {
        // Another suite restarting a shared engine under us is the usual cause: the round is run
        // again, whole, so the paired ratios compare legs of one round.
        if (attempt === attemptsPerRound) throw err;
        console.log(`round ${r} attempt ${attempt} failed (${(err as Error).message}); running it again`);
        continue;
      }
      console.log(`${r === 0 ? "warm-up" : `round ${r}`}: ${lines.join("; ")}`);
      if (r > 0) {
        out.capstan2.push(round.capstan2!);
        out.raw2.push(round.raw2!);
        out.capstan1.push(round.capstan1!);
        out.raw1.push(round.raw1!);
        out.swarm1.push(round.swarm1!);
      }
      break;
    }
  }
  return out;
}

// ---- (b) ---------------------------------------------------------------------------------------

async function repairLatency(o: Orchestrator): Promise<number[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      await enginesUp();
      return await repairRun(o, `${run}-repair${attempt}`);
    } catch (err) {
      if (attempt === attemptsPerRound) throw err;
      console.log(`repair attempt ${attempt} failed (${(err as Error).message}); running it again`);
    }
  }
}

async function repairRun(o: Orchestrator, name: string): Promise<number[]> {
  // One instance per repair (a group of `repairs` instances, each repaired once), so no restart
  // back-off of an instance is ever in play: this measures event -> reconcile -> create + start.
  const size = repairs;
  const events = await StartEvents.open(o.engines, `${groupLabel}=${name}`);
  const out: number[] = [];
  try {
    const running = untilStatus(o.store, name, allRunning(size), 180_000);
    running.catch(() => undefined); // awaited below
    await post(o, groupSpec(name, size));
    await running;
    for (let i = 0; i < repairs; i++) {
      const instance = String(i + 1); // instances are numbered from 1
      const [node, victim] = await findContainer(o.engines, name, instance);
      const before = events.matching({ [instanceLabel]: instance }).length;
      const t0 = performance.now();
      await o.engines[node]!.getContainer(victim).remove({ force: true });
      const at = await events.until(
        (ev) => ev.filter((e) => e.labels[instanceLabel] === instance).length > before,
        30_000,
        `a replacement of ${name} instance ${instance}`,
      );
      out.push(at - t0);
      // Back to steady state before the next one: all pods running per the status.
      await untilStatus(o.store, name, allRunning(size), 30_000);
    }
  } finally {
    events.close();
    await deleteGroup(o, name);
  }
  return out;
}

async function findContainer(engines: Record<string, Docker>, group: string, instance: string): Promise<[string, string]> {
  for (const [node, docker] of Object.entries(engines)) {
    const list = await docker.listContainers({ filters: { label: [`${groupLabel}=${group}`, `${instanceLabel}=${instance}`], status: ["running"] } });
    if (list[0]) return [node, list[0].Id];
  }
  throw new Error(`no running container of ${group} instance ${instance}`);
}

/**
 * Waits until every shared engine answers: other suites restart n1/n2 now and then (allowed inside
 * a test that needs it), and a leg begun on a restarting engine only measures the restart.
 */
async function enginesUp(timeoutMs = 120_000): Promise<void> {
  await until("the shared engines to answer", timeoutMs, async () =>
    (await Promise.all(Object.values(shared).map((d) => d.ping().then(() => true, () => false)))).every(Boolean),
  500);
}

/** Force-removes every Capstan container of a group whose name starts with `prefix`. */
async function removeGroupsOf(engines: Record<string, Docker>, prefix: string): Promise<void> {
  await Promise.all(
    Object.values(engines).map(async (docker) => {
      const list = await docker.listContainers({ all: true, filters: { label: [groupLabel] } });
      for (const c of list.filter((c) => c.Labels[groupLabel]?.startsWith(prefix))) {
        await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
      }
    }),
  );
}

// ---- (c) ---------------------------------------------------------------------------------------

interface Latencies {
  /** CPU the orchestrator process used over the measured run (the etcd leg: none, 0). */
  orchestratorCpuS: number;
  /** The part of it spent in the kernel (system time: sockets, epoll, page faults). */
  orchestratorSystemCpuS: number;
  /** CPU this process (the load generator) used. */
  clientCpuS: number;
  all: number[];
  post: number[];
  get: number[];
  errors: number;
  wallMs: number;
  /** Reconciles the PodGroup controller did over the measured run (the etcd leg: 0). */
  reconciles: number;
}

/** The process serving a load: its CPU is measured, and its reconciles counted (none for a floor). */
interface ServerUnderLoad {
  pid: number;
  reconciles(): Promise<number>;
}

/** `total` operations, `concurrency` at a time: every 4th creates a group, the rest read one. */
async function mixedLoad(
  total: number,
  create: (i: number) => Promise<boolean>,
  read: (i: number) => Promise<boolean>,
  server?: ServerUnderLoad,
): Promise<Latencies> {
  const out: Latencies = { orchestratorCpuS: 0, orchestratorSystemCpuS: 0, clientCpuS: 0, all: [], post: [], get: [], errors: 0, wallMs: 0, reconciles: 0 };
  let next = 0;
  const serverCpu0 = server ? await cpuTimes(server.pid) : { user: 0, system: 0 };
  const reconciles0 = server ? await server.reconciles() : 0;
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: apiConcurrency }, async () => {
      for (let i = next++; i < total; i = next++) {
        const isPost = i % 4 === 0;
        const s = performance.now();
        const ok = await (isPost ? create(i) : read(i));
        const ms = performance.now() - s;
        out.all.push(ms);
        (isPost ? out.post : out.get).push(ms);
        if (!ok) out.errors++;
      }
    }),
  );
  out.wallMs = performance.now() - t0;
  const client = process.cpuUsage(client0);
  out.clientCpuS = (client.user + client.system) / 1e6;
  const serverCpu = server ? await cpuTimes(server.pid) : { user: 0, system: 0 };
  out.orchestratorCpuS = serverCpu.user + serverCpu.system - serverCpu0.user - serverCpu0.system;
  out.orchestratorSystemCpuS = serverCpu.system - serverCpu0.system;
  out.reconciles = server ? (await server.reconciles()) - reconciles0 : 0;
  return out;
}

/** User and system CPU seconds of a process (/proc/<pid>/stat utime, stime; 10 ms ticks). */
async function cpuTimes(pid: number): Promise<{ user: number; system: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the parenthesised command name (which may itself hold spaces): state is field 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

/** Several legs' figures as one: their samples together, CPU, errors and time summed. */
function pooled(legs: Latencies[]): Latencies {
  return {
    orchestratorCpuS: legs.reduce((s, l) => s + l.orchestratorCpuS, 0),
    orchestratorSystemCpuS: legs.reduce((s, l) => s + l.orchestratorSystemCpuS, 0),
    clientCpuS: legs.reduce((s, l) => s + l.clientCpuS, 0),
    all: legs.flatMap((l) => l.all),
    post: legs.flatMap((l) => l.post),
    get: legs.flatMap((l) => l.get),
    errors: legs.reduce((s, l) => s + l.errors, 0),
    wallMs: legs.reduce((s, l) => s + l.wallMs, 0),
    reconciles: legs.reduce((s, l) => s + l.reconciles, 0),
  };
}

/** A leg of (c): the API with `-auth none`, the API with `-auth token`, bare etcd, or the Node pass-through. */
type ApiLeg = "none" | "token" | "etcd" | "node";
const apiLegKinds: readonly ApiLeg[] = ["none", "token", "etcd", "node"];

/**
 * BENCH_ORCHESTRATOR_API_LEGS (default etcd,node,none,token,etcd,token,none,node,etcd): (c)'s legs, in order.
 * Each kind's legs sit symmetric around the middle, so what drifts over the run (the machine's
 * load; the store, which every API leg grows by 2,000 groups) weighs on each kind alike; the
 * baseline gets three legs because one leg's p99 swings by 2 x on a shared machine.
 */
function apiLegsOf(text: string | undefined): ApiLeg[] {
  const legs = (text === undefined || text.trim() === "" ? "etcd,node,none,token,etcd,token,none,node,etcd" : text).split(",").map((l) => l.trim());
  const unknown = legs.filter((l) => !apiLegKinds.includes(l as ApiLeg));
  if (unknown.length > 0) throw new Error(`BENCH_ORCHESTRATOR_API_LEGS: unknown leg(s) ${unknown.join(", ")} (use none, token, etcd, node)`);
  // The pass-through is an extra floor: a run may leave it out.
  const missing = apiLegKinds.filter((k) => k !== "node" && !legs.includes(k));
  if (missing.length > 0) throw new Error(`BENCH_ORCHESTRATOR_API_LEGS: needs at least one ${missing.join(" and one ")} leg`);
  return legs as ApiLeg[];
}

const apiLegs = apiLegsOf(process.env.BENCH_ORCHESTRATOR_API_LEGS);

interface ApiFigures {
  /** Every leg of each kind, pooled. */
  byKind: Record<ApiLeg, Latencies>;
  /** One line per leg, in the order run. */
  legs: string[];
}

/**
 * (c). Every API leg is a fresh `capstan orchestrator` on `o`'s etcd (a process's -auth is fixed at
 * start), with the same load; the etcd leg runs with no orchestrator up. Leaves `o.proc` running
 * with `-auth token`, for (d).
 */
async function apiLatency(o: Orchestrator & { etcd: EtcdProcess }): Promise<ApiFigures> {
  const byKind: Record<ApiLeg, Latencies[]> = { none: [], token: [], etcd: [], node: [] };
  const legs: string[] = [];
  const restart = async (auth: "none" | "token") => {
    await o.proc.stop();
    o.proc = await OrchestratorProcess.start({ storeUrl: `etcd://${o.etcd.endpoint}`, cluster: services.cluster, auth, nodeArgs: profileArgs });
    o.token = auth === "token" ? adminToken : undefined;
  };
  for (const [n, leg] of apiLegs.entries()) {
    let l: Latencies;
    let who: string;
    if (leg === "etcd") {
      await o.proc.stop();
      l = await etcdLoad(o.etcd.endpoint, `/bench/${run}/c${n}/`);
      who = "bare etcd";
    } else if (leg === "node") {
      await o.proc.stop();
      l = await passthroughLoad(o.etcd.endpoint, `/bench/${run}/c${n}/`);
      who = "Node pass-through";
    } else {
      await restart(leg);
      l = await apiLoad(o, `${run}-c${n}`);
      who = `-auth ${leg}, pid ${o.proc.pid}`;
    }
    byKind[leg].push(l);
    const perRequest = (s: number) => ((s * 1000) / apiRequests).toFixed(2);
    const cpu =
      leg === "etcd"
        ? ""
        : leg === "node"
          ? `, server CPU ${perRequest(l.orchestratorCpuS)} ms/request (system ${perRequest(l.orchestratorSystemCpuS)})`
        : `, orchestrator CPU ${perRequest(l.orchestratorCpuS)} ms/request (system ${perRequest(l.orchestratorSystemCpuS)}), ${l.reconciles} reconciles`;
    const line =
      `leg ${n + 1} ${leg} (${who}): p50 ${percentile(l.all, 50).toFixed(1)} ms, p99 ${percentile(l.all, 99).toFixed(1)} ms ` +
      `(POST ${percentile(l.post, 99).toFixed(1)}, GET ${percentile(l.get, 99).toFixed(1)}), ${(apiRequests / (l.wallMs / 1000)).toFixed(0)} req/s, ` +
      `errors ${l.errors}${cpu}`;
    console.log(`api ${line}`);
    legs.push(line);
  }
  // (d) goes on from here with an orchestrator that asks for tokens.
  if (parts.has("d") && apiLegs.at(-1) !== "token") await restart("token");
  return { byKind: { none: pooled(byKind.none), token: pooled(byKind.token), etcd: pooled(byKind.etcd), node: pooled(byKind.node) }, legs };
}

/** A server's answer to one request of (c)'s mix. */
type Send = (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;

/**
 * (c)'s requests against one server: 16 groups POSTed first (by `seed`, which fails on a refusal)
 * so that reads have something from the first request on; then `create(prefix)` POSTs a new group
 * per call, which joins the pool once answered, and `read` GETs one of the pool.
 */
async function podGroupMix(send: Send, seedPrefix: string, seed: (spec: ReturnType<typeof groupSpec>) => Promise<void>) {
  const names: string[] = [];
  for (let i = 0; i < apiConcurrency; i++) {
    const name = `${seedPrefix}seed${i}`;
    await seed(groupSpec(name, 0));
    names.push(name);
  }
  const pick = (i: number) => names[(i * 7919) % names.length]!;
  const create = (prefix: string) => async (i: number) => {
    const name = `${prefix}${i}`;
    const ok = (await send("POST", "/api/podgroups", groupSpec(name, 0))).status === 202;
    if (ok) names.push(name);
    return ok;
  };
  const read = async (i: number) => (await send("GET", `/api/podgroups?name=${pick(i)}`)).status === 200;
  return { create, read };
}

/** One API leg: 16 groups to read from the start, a warm-up, the start-up sync done, the measured mix. */
async function apiLoad(o: Orchestrator, tag: string): Promise<Latencies> {
  const { create, read } = await podGroupMix((method, path, body) => call(o, method, path, body), `${tag}-`, (spec) => post(o, spec));
  // Warm-up: connections, and the JIT, which needs thousands of calls of each path (measured, same
  // mix: 1.47 ms of orchestrator CPU per request over the first 2,000, 0.79 over the next 2,000,
  // 0.43-0.53 from the 5,000th on), so the figures are the steady state of a server that has been
  // up for a while. The etcd leg is warmed the same way.
  await mixedLoad(apiWarmup, create(`${tag}-w`), read);
  // A fresh process reconciles every stored group once at start-up: done before the measured run.
  await until("the podgroup queue to drain", 120_000, async () => (await queueDepth(o)) === 0, scrapeEveryMs);
  return mixedLoad(apiRequests, create(`${tag}-`), read, { pid: o.proc.pid, reconciles: () => reconciles(o) });
}

/** The second floor: the same requests to passthrough.ts on the same etcd, under `prefix`; seeds and warm-up as an API leg. */
async function passthroughLoad(etcdEndpoint: string, prefix: string): Promise<Latencies> {
  const server = await startScriptServer(import.meta.resolve("./orchestrator/passthrough.ts"), [etcdEndpoint, prefix], profileArgs);
  const baseUrl = `http://127.0.0.1:${server.port}`;
  const client = new Etcd3({ hosts: `http://${etcdEndpoint}` });
  try {
    const send: Send = (method, path, body) => api(baseUrl, method, path, body);
    const { create, read } = await podGroupMix(send, "", async (spec) => {
      if ((await send("POST", "/api/podgroups", spec)).status !== 202) throw new Error(`pass-through: POST of ${spec.name} failed`);
    });
    await mixedLoad(apiWarmup, create("w"), read);
    return await mixedLoad(apiRequests, create("k"), read, { pid: server.pid, reconciles: async () => 0 });
  } finally {
    await server.stop();
    await client.delete().prefix(prefix);
    client.close();
  }
}

/** The floor: the same mix as bare etcd operations (create-if-absent txn / get), under `prefix`. */
async function etcdLoad(etcdEndpoint: string, prefix: string): Promise<Latencies> {
  const client = new Etcd3({ hosts: `http://${etcdEndpoint}` });
  const value = JSON.stringify(groupSpec("x".repeat(40), 0));
  try {
    for (let i = 0; i < apiConcurrency; i++) await client.put(`${prefix}seed${i}`).value(value);
    const create = async (i: number) => {
      const key = `${prefix}k${i}`;
      const r = await client.if(key, "Create", "==", 0).then(client.put(key).value(value)).commit();
      return r.succeeded;
    };
    const read = async (i: number) => (await client.get(`${prefix}seed${i % apiConcurrency}`).string()) !== null;
    await mixedLoad(apiWarmup, (i) => create(-1 - i), read);
    const etcd = await mixedLoad(apiRequests, create, read);
    await client.delete().prefix(prefix);
    return etcd;
  } finally {
    client.close();
  }
}

// ---- (d) ---------------------------------------------------------------------------------------

interface ScaleFigures {
  rssEmptyMb: number;
  startupEmptyCpuS: number;
  rssMb: number;
  startupSyncMs: number;
  startupCpuS: number;
  refreshCycleMs: number;
  refreshCpuS: number;
  idleCpuPerS: number;
}

async function until(what: string, timeoutMs: number, test: () => Promise<boolean>, everyMs = 100): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await test())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function countKeys(store: Store, prefix: string): Promise<number> {
  let n = 0;
  let startAfter: string | undefined;
  for (;;) {
    const page = await store.list(prefix, { limit: 1000, startAfter });
    n += page.items.length;
    if (!page.more) return n;
    startAfter = page.items.at(-1)!.key;
  }
}

// Scrapes of /metrics cost the orchestrator CPU too: a few per second is enough resolution.
const scrapeEveryMs = 250;
const reconciles = (o: Orchestrator) => o.proc.metric("controller_runtime_reconcile_total", { controller: "podgroup" });
const queueDepth = (o: Orchestrator) => o.proc.metric("workqueue_depth", { name: "podgroup" });

/** Start-up with an empty store, for reference: RSS and CPU once ready and its first reconciles are done. */
async function emptyFigures(o: Orchestrator): Promise<{ rssEmptyMb: number; startupEmptyCpuS: number }> {
  await new Promise((r) => setTimeout(r, 1_000));
  return { rssEmptyMb: (await o.proc.rssBytes()) / 2 ** 20, startupEmptyCpuS: await o.proc.cpuSeconds() };
}

/**
 * (d). Replaces `o.proc` with a fresh orchestrator process over the full store (so clean-up stops
 * whichever process is current).
 */
async function scaleFigures(o: Orchestrator & { etcd: EtcdProcess }, empty: { rssEmptyMb: number; startupEmptyCpuS: number }): Promise<ScaleFigures> {
  // Top the store up to 5,000 groups through the API (the real write path), 16 at a time.
  let next = await countKeys(o.store, keys.podGroups);
  await Promise.all(
    Array.from({ length: apiConcurrency }, async () => {
      for (let i = next++; i < storedGroups; i = next++) await post(o, groupSpec(`${run}-z${i}`, 0));
    }),
  );
  await until("a status record for every group", 300_000, async () => (await countKeys(o.store, keys.podGroupStatus)) >= storedGroups, 1_000);

  // Start-up: the informers' initial list, then one reconcile of each group.
  await o.proc.stop();
  const t0 = performance.now();
  o.proc = await OrchestratorProcess.start({
    storeUrl: `etcd://${o.etcd.endpoint}`,
    cluster: services.cluster,
    auth: "token",
    args: ["-refresh-interval", `${refreshIntervalS}s`],
  });
  o.token = adminToken;
  const proc = o.proc;
  await until("start-up sync", 300_000, async () => (await reconciles(o)) >= storedGroups && (await queueDepth(o)) === 0, scrapeEveryMs);
  const startupSyncMs = performance.now() - t0;
  const startupCpuS = await proc.cpuSeconds();

  // Idle CPU (lease renewals, node monitor, timers, these scrapes), over a window that ends well
  // before the first periodic refresh can fall due (refresh interval - 10 % jitter - sync time).
  const base = await reconciles(o);
  const tBase = performance.now();
  const cpuBase = await proc.cpuSeconds();
  const idleWindowMs = 10_000;
  await new Promise((r) => setTimeout(r, idleWindowMs));
  const idleReconciles = (await reconciles(o)) - base;
  const idleCpuPerS = ((await proc.cpuSeconds()) - cpuBase) / ((performance.now() - tBase) / 1000);

  // One full periodic refresh: until every group has been reconciled once more and the queue is
  // empty. Its CPU is what the process used from the end of the sync, less the idle rate over that
  // time. Its duration runs from the first 1 % of the cycle's reconciles (a stray event-driven
  // reconcile does not start it) to the end.
  let cycleStart = 0;
  await until(
    "a full refresh cycle",
    (refreshIntervalS * 3 + 120) * 1000,
    async () => {
      const n = (await reconciles(o)) - base - idleReconciles;
      if (cycleStart === 0 && n >= storedGroups / 100) cycleStart = performance.now();
      return n >= storedGroups && (await queueDepth(o)) === 0;
    },
    scrapeEveryMs,
  );
  const tEnd = performance.now();
  const cpuEnd = await proc.cpuSeconds();
  const refreshCpuS = cpuEnd - cpuBase - idleCpuPerS * ((tEnd - tBase) / 1000);
  const rssMb = (await proc.rssBytes()) / 2 ** 20;
  if (idleReconciles > 0) console.log(`note: ${idleReconciles} event-driven reconciles in the idle window`);
  return { ...empty, rssMb, startupSyncMs, startupCpuS, refreshCycleMs: tEnd - cycleStart, refreshCpuS, idleCpuPerS };
}

// ---- main --------------------------------------------------------------------------------------

/** Runs `body`, then every clean-up it registered, last first, even when it failed. */
async function withCleanups<T>(body: (defer: (c: () => Promise<void>) => void) => Promise<T>): Promise<T> {
  const cleanups: (() => Promise<void>)[] = [];
  try {
    return await body((c) => cleanups.push(c));
  } finally {
    for (const c of cleanups.reverse()) await c().catch((err: unknown) => console.error("cleanup:", err));
  }
}

function stopOrchestrator(o: Orchestrator & { etcd: EtcdProcess }): () => Promise<void> {
  return async () => {
    await o.proc.stop();
    await o.store.close();
    await o.etcd.stop();
  };
}

type Part = "a" | "b" | "c" | "d";
const allParts: readonly Part[] = ["a", "b", "c", "d"];

/** BENCH_ORCHESTRATOR_ONLY=c (or "a,c", ...): run only those parts, e.g. while iterating on one. */
function selectedParts(text: string | undefined): Set<Part> {
  if (text === undefined || text.trim() === "") return new Set(allParts);
  const parts = text.split(",").map((p) => p.trim());
  const unknown = parts.filter((p) => !allParts.includes(p as Part));
  if (unknown.length > 0) throw new Error(`BENCH_ORCHESTRATOR_ONLY: unknown part(s) ${unknown.join(", ")} (use a, b, c, d)`);
  return new Set(parts as Part[]);
}

const parts = selectedParts(process.env.BENCH_ORCHESTRATOR_ONLY);

async function main(): Promise<void> {
  await enginesUp();
  await withCleanups(async (defer) => {
    const duo = await startOrchestrator(services.cluster, shared);
    defer(async () => {
      await stopOrchestrator(duo)();
      // Whatever an interrupted leg left behind: containers of this run's groups only.
      await enginesUp();
      await removeGroupsOf(shared, run);
    });
    const empty = await emptyFigures(duo);
    const figures: Record<string, number> = {};
    const ratios: Record<string, number> = {};
    const targets: Target[] = [];
    const notes: string[] = [];
    const med = (xs: number[]) => percentile(xs, 50);

    if (parts.has("a")) {
      // (a) with the private engine, Swarm and the single-engine orchestrator, all gone before (b):
      // an idle swarm manager and a second orchestrator would only add noise to what follows.
      const a = await withCleanups(async (deferA) => {
        const engine = await startPrivateEngine({ rootfsTar: `${services.dir}/busybox-rootfs.tar`, image: services.testImage });
        deferA(() => engine.stop());
        const swarm = await SwarmPeer.init(engine.docker);
        deferA(() => swarm.leave());
        const solo = await startOrchestrator(`${engine.name}=${engine.endpoint}`, { [engine.name]: engine.docker });
        deferA(stopOrchestrator(solo));
        deferA(async () => {
          await enginesUp();
          await removeLabelled(shared, `${benchLabel}=${run}`, concurrency);
        });
        return deployLegs(duo, solo, engine, swarm);
      });
      const capstan2 = med(a.capstan2.map((x) => x.statusMs));
      const capstan1 = med(a.capstan1.map((x) => x.statusMs));
      const raw2 = med(a.raw2);
      const raw1 = med(a.raw1);
      const swarm1 = med(a.swarm1.map((x) => x.tasksRunningMs));
      // The same comparisons made within each round, then the median: robust to load drifting
      // between rounds on a shared machine.
      const paired = (xs: number[], ys: number[]) => med(xs.map((x, i) => x / ys[i]!));
      Object.assign(figures, {
        instances,
        rounds,
        write_concurrency_per_engine: concurrency,
        capstan_2engines_ms: capstan2,
        capstan_2engines_started_ms: med(a.capstan2.map((x) => x.containersStartedMs)),
        raw_2engines_ms: raw2,
        capstan_1engine_ms: capstan1,
        capstan_1engine_started_ms: med(a.capstan1.map((x) => x.containersStartedMs)),
        raw_1engine_ms: raw1,
        swarm_1engine_ms: swarm1,
        swarm_1engine_started_ms: med(a.swarm1.map((x) => x.containersStartedMs)),
        paired_capstan_over_raw: paired(a.capstan2.map((x) => x.statusMs), a.raw2),
        paired_capstan_over_swarm: paired(a.capstan1.map((x) => x.statusMs), a.swarm1.map((x) => x.tasksRunningMs)),
        paired_capstan_1engine_over_raw: paired(a.capstan1.map((x) => x.statusMs), a.raw1),
      });
      Object.assign(ratios, {
        capstan_over_raw: capstan2 / raw2,
        capstan_over_swarm: capstan1 / swarm1,
        capstan_1engine_over_raw: capstan1 / raw1,
        capstan_2engines_over_swarm_1engine: capstan2 / swarm1,
      });
      targets.push({ name: "capstan_over_raw", kind: "max", value: 1.25 }, { name: "capstan_over_swarm", kind: "max", value: 1 });
      notes.push(
        `(a) ${instances} busybox containers (${command.join(" ")}); medians of ${rounds} rounds, order rotating`,
        "(a) capstan_over_raw: 2 shared engines, NetworkMode none; capstan_over_swarm: one private engine each, NetworkMode default (Swarm runs only there)",
        "(a) Capstan 'running' = its status record says every pod runs; Swarm = its task list; *_started_ms = the engines' start events",
      );
    }

    if (parts.has("b")) {
      const b = await repairLatency(duo);
      console.log(`repair: ${b.map((ms) => ms.toFixed(0)).join(" ")} ms`);
      Object.assign(figures, { repair_median_ms: med(b), repair_p90_ms: percentile(b, 90), repair_max_ms: Math.max(...b) });
      targets.push({ name: "repair_median_ms", kind: "max", value: 2_000 });
      notes.push(`(b) a container force-removed, until the engine starts its replacement; ${repairs} repairs, one per instance`);
    }

    if (parts.has("c")) {
      const c = await apiLatency(duo);
      const kinds = { api_noauth: c.byKind.none, api_auth: c.byKind.token } as const;
      for (const [prefix, l] of Object.entries(kinds)) {
        const legs = apiLegs.filter((k) => k === (prefix === "api_auth" ? "token" : "none")).length;
        Object.assign(figures, {
          [`${prefix}_p50_ms`]: percentile(l.all, 50),
          [`${prefix}_p99_ms`]: percentile(l.all, 99),
          [`${prefix}_post_p99_ms`]: percentile(l.post, 99),
          [`${prefix}_get_p99_ms`]: percentile(l.get, 99),
          [`${prefix}_requests_per_s`]: (legs * apiRequests) / (l.wallMs / 1000),
          [`${prefix}_errors`]: l.errors,
          // Where the time goes on a 2-core machine: CPU per request of the orchestrator (API, and the
          // controller reconciling each new group) and of this load generator.
          [`${prefix}_orchestrator_cpu_ms_per_request`]: (l.orchestratorCpuS * 1000) / (legs * apiRequests),
          [`${prefix}_orchestrator_system_cpu_ms_per_request`]: (l.orchestratorSystemCpuS * 1000) / (legs * apiRequests),
          [`${prefix}_client_cpu_ms_per_request`]: (l.clientCpuS * 1000) / (legs * apiRequests),
        });
      }
      const etcd = c.byKind.etcd;
      Object.assign(figures, {
        etcd_p50_ms: percentile(etcd.all, 50),
        etcd_p99_ms: percentile(etcd.all, 99),
        etcd_write_p99_ms: percentile(etcd.post, 99),
        etcd_read_p99_ms: percentile(etcd.get, 99),
      });
      const node = c.byKind.node;
      const nodeLegs = apiLegs.filter((k) => k === "node").length;
      if (nodeLegs > 0) Object.assign(figures, {
        node_passthrough_p50_ms: percentile(node.all, 50),
        node_passthrough_p99_ms: percentile(node.all, 99),
        node_passthrough_post_p99_ms: percentile(node.post, 99),
        node_passthrough_get_p99_ms: percentile(node.get, 99),
        node_passthrough_cpu_ms_per_request: (node.orchestratorCpuS * 1000) / (nodeLegs * apiRequests),
      });
      const p99 = (l: Latencies) => percentile(l.all, 99);
      const auth = c.byKind.token;
      const none = c.byKind.none;
      Object.assign(ratios, {
        api_auth_p99_over_api_noauth_p99: p99(auth) / p99(none),
        api_auth_post_p99_over_api_noauth_post_p99: percentile(auth.post, 99) / percentile(none.post, 99),
        api_auth_p99_over_etcd_p99: p99(auth) / p99(etcd),
        api_noauth_p99_over_etcd_p99: p99(none) / p99(etcd),
      });
      if (nodeLegs > 0) {
        Object.assign(ratios, {
          // The second floor against the first: above 1.3, no API in Node meets the target here.
          node_passthrough_p99_over_etcd_p99: p99(node) / p99(etcd),
          api_auth_p99_over_node_passthrough_p99: p99(auth) / p99(node),
        });
      }
      const cTargets: Target[] = [
        { name: "api_auth_p99_over_api_noauth_p99", kind: "max", value: 1.1 },
        { name: "api_auth_p99_over_etcd_p99", kind: "max", value: 1.3 },
      ];
      targets.push(...cTargets);
      console.log(
        `api: auth on p99 ${p99(auth).toFixed(1)} ms (POST ${percentile(auth.post, 99).toFixed(1)}), ` +
          `auth off p99 ${p99(none).toFixed(1)} ms (POST ${percentile(none.post, 99).toFixed(1)}), ` +
          `bare etcd p99 ${p99(etcd).toFixed(1)} ms` +
          (nodeLegs > 0 ? `, Node pass-through p99 ${p99(node).toFixed(1)} ms; pass-through / etcd ${(p99(node) / p99(etcd)).toFixed(3)}` : "") +
          `; auth / no-auth ${(p99(auth) / p99(none)).toFixed(3)}, auth / etcd ${(p99(auth) / p99(etcd)).toFixed(3)}`,
      );
      notes.push(
        `(c) ${apiRequests} requests per leg, 25% POST / 75% GET, ${apiConcurrency} at a time, after ${apiWarmup} of warm-up; legs ${apiLegs.join(", ")}: ` +
          "api_noauth_* = `-auth none`, api_auth_* = `-auth token` with an admin token on every request (each a fresh orchestrator on the same etcd), " +
          "etcd_* = the same mix as bare etcd ops with no orchestrator up, node_passthrough_* = the same requests to a bare node:http server doing those etcd ops " +
          "(bench/orchestrator/passthrough.ts, no orchestrator up); figures pool the legs of a kind",
        ...c.legs.map((l) => `(c) ${l}`),
        ...cTargets.map((t) => {
          const v = ratios[t.name]!;
          return `(c) ${t.name} = ${v.toFixed(3)}, target <= ${t.value}: ${v <= t.value ? "MET" : "MISSED"}`;
        }),
      );
    }

    if (parts.has("d")) {
      const d = await scaleFigures(duo, empty);
      Object.assign(figures, {
        groups_stored: storedGroups,
        rss_empty_mb: d.rssEmptyMb,
        rss_5000_groups_mb: d.rssMb,
        startup_5000_groups_ms: d.startupSyncMs,
        startup_5000_groups_cpu_s: d.startupCpuS,
        startup_empty_store_cpu_s: d.startupEmptyCpuS,
        refresh_cycle_ms: d.refreshCycleMs,
        refresh_cycle_cpu_s: d.refreshCpuS,
        refresh_cpu_ms_per_group: (d.refreshCpuS * 1000) / storedGroups,
        idle_cpu_s_per_s: d.idleCpuPerS,
      });
      notes.push(`(d) ${storedGroups} zero-instance groups; refresh interval ${refreshIntervalS}s; CPU from /proc/<pid>/stat`);
    }

    if (parts.size < allParts.length) notes.push(`only part(s) ${[...parts].join(", ")} (BENCH_ORCHESTRATOR_ONLY)`);
    // A partial run writes bench/results/orchestrator-<parts>.json, leaving the full run's file alone.
    const bench = parts.size < allParts.length ? `orchestrator-${[...parts].sort().join("")}` : "orchestrator";
    report({ bench, figures, ratios, targets, notes });
  });
}

await main();
