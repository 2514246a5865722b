// Secrets service throughput against raw etcd (docs/benchmarks.md, "secrets"): PUT and GET of one record through the
// service over HTTP (the token checked from the store with its 2 s cache, AES-256-GCM on every
// record) versus raw etcd3 put and get of a value of the same size, on the same private etcd, in the
// same run, at the same concurrency. Target: the service keeps at least half of the raw throughput
// (put_throughput_ratio and get_throughput_ratio are the worse of the sizes).
//
// Deployed as operators run it: `capstan console` and `capstan secrets` each in its own process
// (the service's Secret-sync controller included, on the shared engines), both on the private etcd.
// This process is only the load: a node:http keep-alive client for the service and its own etcd3
// client for raw. CPU of the service process per request is reported (/proc/<pid>/stat).
//
//   npm run bench:secrets   [SECRETS_BENCH_OPS=2000 SECRETS_BENCH_CONCURRENCY=16]
//   BENCH_SECRETS_PROFILE=DIR: the service writes a V8 CPU profile there when it stops (slows it).
import { Etcd3 } from "etcd3";
import { readdir, readFile } from "node:fs/promises";
import { generateToken } from "../api/console/index.ts";
import { startEtcd } from "../test/helpers/etcd-process.ts";
import { loadServices } from "../test/helpers/services.ts";
import { CapstanProcess } from "./lib/capstan-process.ts";
import { closeConnections, httpCall } from "./lib/http.ts";
import { percentile, report } from "./lib/report.ts";

const ops = Number(process.env.SECRETS_BENCH_OPS ?? 2000);
const concurrency = Number(process.env.SECRETS_BENCH_CONCURRENCY ?? 16);
const rounds = 10;
const warmup = 8000;
const sizes: [string, number][] = [
  ["1KiB", 1024],
  ["16KiB", 16 * 1024],
];

interface Run {
  opsPerSec: number;
  p50: number;
  p99: number;
}

interface Sample {
  seconds: number;
  latencies: number[];
}

/** `n` calls of `op`, `concurrency` at a time: elapsed seconds and each call's latency in ms. */
async function measure(n: number, op: (i: number) => Promise<void>): Promise<Sample> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < n; i = next++) {
        const t = performance.now();
        await op(i);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { seconds: (performance.now() - started) / 1000, latencies };
}

function summarize(samples: Sample[]): Run {
  const latencies = samples.flatMap((s) => s.latencies);
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0);
  return { opsPerSec: latencies.length / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

interface LoadInput {
  secretsBase: string;
  token: string;
  etcdEndpoint: string;
  /** The service process, for its CPU per request. */
  service: CapstanProcess;
  /** etcd's pid, for its CPU per request. */
  etcdPid: number | undefined;
}

/** CPU seconds of this process, the service and etcd, to split a run's cost among them. */
interface CpuSplit {
  client: number;
  service: number;
  etcd: number;
}

/** Warm up, then measure service and raw PUT and GET for every size; `cpu_*` are ms per request. */
async function runLoad(input: LoadInput): Promise<{ runs: Record<string, Run>; cpu: Record<string, number> }> {
  const raw = new Etcd3({ hosts: input.etcdEndpoint });
  const runs: Record<string, Run> = {};
  const cpu: Record<string, number> = {};
  try {
    for (const [label, bytes] of sizes) {
      const content = "s".repeat(bytes);
      const body = JSON.stringify({ content });
      const proc = `bench.web.w${label.toLowerCase()}`;
      const getProc = `bench.get.w${label.toLowerCase()}`;
      const auth = { "access-token": input.token };
      const putHeaders = { ...auth, "content-type": "application/json" };
      const servicePut = async (i: number) => {
        const res = await httpCall(`${input.secretsBase}/v2/secrets?app=bench&proc=${proc}&path=f${i % 64}`, "PUT", { headers: putHeaders, body });
        if (res.status !== 200) throw new Error(`PUT answered ${res.status}: ${res.text.slice(0, 200)}`);
      };
      const rawPut = async (i: number) => {
        await raw.put(`/bench-raw/${label}/f${i % 64}`).value(content);
      };
      await raw.put(`/bench-raw/${label}/only`).value(content);
      const serviceGet = async () => {
        const res = await httpCall(`${input.secretsBase}/v2/secrets?app=bench&proc=${getProc}`, "GET", { headers: auth });
        const records = JSON.parse(res.text) as { content: string }[];
        if (res.status !== 200 || records[0]?.content.length !== bytes) throw new Error(`GET answered ${res.status}`);
      };
      const rawGet = async () => {
        const value = await raw.get(`/bench-raw/${label}/only`).string();
        if (value?.length !== bytes) throw new Error("raw get lost the value");
      };
      // Warm both paths (connections, the role cache, and the JIT: the service's CPU per PUT settles
      // only after several thousand calls, measured 1.3 ms over the first 3,000, 0.45-0.55 ms over
      // the next 3,000 and 0.26-0.35 ms from the 9,000th on), then measure: the figures are a
      // service that has been up for a while, as the raw client's are.
      for (const warm of [servicePut, rawPut, serviceGet, rawGet]) await measure(warmup, warm);
      // Short alternating rounds: the machine's load drifts (other processes share its cores), and
      // alternating exposes service and raw to the same drift instead of one of them to a burst.
      const legs = ["putService", "putRaw", "getService", "getRaw"] as const;
      const samples: Record<(typeof legs)[number], Sample[]> = { putService: [], putRaw: [], getService: [], getRaw: [] };
      const spent: Record<(typeof legs)[number], CpuSplit> = Object.fromEntries(legs.map((l) => [l, { client: 0, service: 0, etcd: 0 }])) as never;
      const cpuNow = async (): Promise<CpuSplit> => {
        const own = process.cpuUsage();
        return { client: (own.user + own.system) / 1e6, service: await input.service.cpuSeconds(), etcd: await processCpuSeconds(input.etcdPid) };
      };
      const op = { putService: servicePut, putRaw: rawPut, getService: serviceGet, getRaw: rawGet };
      const perRound = Math.ceil(ops / rounds);
      for (let r = 0; r < rounds; r++) {
        for (const leg of legs) {
          const before = await cpuNow();
          samples[leg].push(await measure(perRound, op[leg]));
          const after = await cpuNow();
          for (const k of ["client", "service", "etcd"] as const) spent[leg][k] += after[k] - before[k];
        }
      }
      const perRequestMs = (s: number) => (s * 1000) / (perRound * rounds);
      for (const leg of legs) {
        const name = leg.replace(/[A-Z]/, (c) => `_${c.toLowerCase()}`);
        cpu[`${name}_cpu_ms_per_request_client_${label}`] = perRequestMs(spent[leg].client);
        if (leg.endsWith("Service")) cpu[`${name}_cpu_ms_per_request_service_${label}`] = perRequestMs(spent[leg].service);
        cpu[`${name}_cpu_ms_per_request_etcd_${label}`] = perRequestMs(spent[leg].etcd);
      }
      runs[`put_service_${label}`] = summarize(samples.putService);
      runs[`put_raw_${label}`] = summarize(samples.putRaw);
      runs[`get_service_${label}`] = summarize(samples.getService);
      runs[`get_raw_${label}`] = summarize(samples.getRaw);
    }
    return { runs, cpu };
  } finally {
    raw.close();
  }
}

/** Linux reports process CPU in clock ticks; USER_HZ is 100 on every architecture Node runs on. */
async function processCpuSeconds(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) / 100;
}

/** The pid of the etcd serving `dataDir` (EtcdProcess does not expose its child), from /proc. */
async function etcdPidOf(dataDir: string): Promise<number | undefined> {
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (cmdline.startsWith("etcd\0") && cmdline.includes(dataDir)) return Number(entry);
  }
  return undefined;
}

async function json(base: string, method: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const res = await httpCall(base + path, method, { headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (res.status !== 200 && res.status !== 201) throw new Error(`${method} ${path}: ${res.status} ${res.text.slice(0, 300)}`);
  return JSON.parse(res.text) as Record<string, unknown>;
}

async function main(): Promise<void> {
  const etcd = await startEtcd();
  const processes: CapstanProcess[] = [];
  try {
    const storeUrl = `etcd://${etcd.endpoint}`;
    const admin = generateToken().token;
    const consoleProc = await CapstanProcess.start("console", ["-store", storeUrl], { env: { ...process.env, CAPSTAN_ADMIN_TOKEN: admin } });
    processes.push(consoleProc);
    const profileDir = process.env.BENCH_SECRETS_PROFILE;
    const service = await CapstanProcess.start("secrets", ["-store", storeUrl, "-cluster", loadServices().cluster], {
      env: { ...process.env, CAPSTAN_ADMIN_TOKEN: "" },
      // Sealed until unsealed below; the status endpoint answers either way.
      readyPath: "/v2/sys/status",
      ...(profileDir ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] } : {}),
    });
    processes.push(service);
    const secretsBase = service.baseUrl;
    const adminHeaders = { "access-token": admin };
    const { keys } = (await json(secretsBase, "POST", "/v2/sys/init", { shares: 3, threshold: 2 }, adminHeaders)) as { keys: string[] };
    for (const key of keys.slice(0, 2)) await json(secretsBase, "POST", "/v2/sys/unseal", { key }, adminHeaders);

    await json(consoleProc.baseUrl, "POST", "/api/v1/apps", { appname: "bench", maintainers: ["bench@example.com"] }, adminHeaders);
    const { token } = (await json(consoleProc.baseUrl, "POST", "/api/v1/tokens", { user: "bench@example.com" }, adminHeaders)) as { token: string };

    for (const [label, bytes] of sizes) {
      // GET reads a proc holding exactly one record, the same work as one raw get.
      const seed = await httpCall(`${secretsBase}/v2/secrets?app=bench&proc=bench.get.w${label.toLowerCase()}&path=only`, "PUT", {
        headers: { "access-token": token },
        body: "s".repeat(bytes),
      });
      if (seed.status !== 200) throw new Error(`seeding the GET record: ${seed.status} ${seed.text}`);
    }
    const { runs: results, cpu } = await runLoad({ secretsBase, token, etcdEndpoint: etcd.endpoint, service, etcdPid: await etcdPidOf(etcd.dataDir) });
    const figures: Record<string, number> = { ops, concurrency, rounds, ...cpu };
    const ratios: Record<string, number> = {};
    let putWorst = Infinity;
    let getWorst = Infinity;
    for (const [label] of sizes) {
      const sp = results[`put_service_${label}`]!;
      const rp = results[`put_raw_${label}`]!;
      const sg = results[`get_service_${label}`]!;
      const rg = results[`get_raw_${label}`]!;
      for (const [name, r] of [["put_service", sp], ["put_raw", rp], ["get_service", sg], ["get_raw", rg]] as const) {
        figures[`${name}_ops_per_s_${label}`] = r.opsPerSec;
        figures[`${name}_p50_ms_${label}`] = r.p50;
        figures[`${name}_p99_ms_${label}`] = r.p99;
      }
      ratios[`put_service_over_raw_throughput_${label}`] = sp.opsPerSec / rp.opsPerSec;
      ratios[`get_service_over_raw_throughput_${label}`] = sg.opsPerSec / rg.opsPerSec;
      putWorst = Math.min(putWorst, sp.opsPerSec / rp.opsPerSec);
      getWorst = Math.min(getWorst, sg.opsPerSec / rg.opsPerSec);
    }
    ratios.put_throughput_ratio = putWorst;
    ratios.get_throughput_ratio = getWorst;
    report({
      bench: "secrets",
      figures,
      ratios,
      targets: [
        { name: "put_throughput_ratio", kind: "min", value: 0.5 },
        { name: "get_throughput_ratio", kind: "min", value: 0.5 },
      ],
      notes: [
        "private etcd; service = `capstan secrets` process (HTTP + token check from the store, 2 s cache + AES-256-GCM + etcd), `capstan console` process; raw = etcd3 put/get of the same value size",
        `load from this process (node:http keep-alive for the service, its own etcd3 client for raw), ${rounds} alternating rounds; GET reads a proc holding one record`,
        "throughput ratios are service/raw; *_throughput_ratio is the worse of the sizes",
      ],
    });
  } finally {
    closeConnections();
    for (const p of processes.reverse()) await p.stop();
    await etcd.stop();
  }
}

await main();
