// Secrets service throughput against raw etcd (issue 5): PUT and GET of one record through the
// service over HTTP (console on loopback deciding authorization, the 5 s role cache on, AES-256-GCM
// on every record) versus raw etcd3 put and get of a value of the same size, on the same private
// etcd, in the same run, at the same concurrency. Target: the service keeps at least half of the
// raw throughput (put_throughput_ratio and get_throughput_ratio are the worse of the sizes).
//
// The load runs in a worker thread (its own event loop, as a remote client would be): it calls the
// service over HTTP and etcd directly with its own etcd3 client. The main thread runs only the
// console and the secrets service, as their own process would.
//
//   npm run bench:secrets   [SECRETS_BENCH_OPS=2000 SECRETS_BENCH_CONCURRENCY=16]
import { serve, type ServerType } from "@hono/node-server";
import { Etcd3 } from "etcd3";
import type { Hono } from "hono";
import { Agent, request } from "node:http";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import type { AddressInfo } from "node:net";
import { EtcdStore } from "../adapters/store/etcd.ts";
import { createConsoleApi, ensureAdminToken, generateToken } from "../api/console/index.ts";
import { createSecretsService } from "../api/secrets/index.ts";
import { startEtcd } from "../test/helpers/etcd-process.ts";
import { percentile, report } from "./lib/report.ts";

const ops = Number(process.env.SECRETS_BENCH_OPS ?? 2000);
const concurrency = Number(process.env.SECRETS_BENCH_CONCURRENCY ?? 16);
const rounds = 10;
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

// The load generator's HTTP client: node:http with keep-alive (fetch/undici costs several times more
// CPU per request in Node 20, which this one-process benchmark would charge to the service).
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

function httpCall(url: string, method: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers: body === undefined ? headers : { ...headers, "content-length": String(Buffer.byteLength(body)) }, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${url} timed out`)));
    req.on("error", reject);
    req.end(body);
  });
}

function listen(app: Hono): Promise<{ base: string; server: ServerType }> {
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => resolve({ base: `http://127.0.0.1:${info.port}`, server }));
  });
}


interface LoadInput {
  secretsBase: string;
  token: string;
  etcdEndpoint: string;
}

/** The worker: warm up, then measure service and raw PUT and GET for every size. */
async function runLoad(input: LoadInput): Promise<Record<string, Run>> {
  const raw = new Etcd3({ hosts: input.etcdEndpoint });
  const out: Record<string, Run> = {};
  try {
    for (const [label, bytes] of sizes) {
      const content = "s".repeat(bytes);
      const body = JSON.stringify({ content });
      const proc = `bench.web.w${label.toLowerCase()}`;
      const getProc = `bench.get.w${label.toLowerCase()}`;
      const auth = { "access-token": input.token };
      const servicePut = async (i: number) => {
        const res = await httpCall(`${input.secretsBase}/v2/secrets?app=bench&proc=${proc}&path=f${i % 64}`, "PUT", { ...auth, "content-type": "application/json" }, body);
        if (res.status !== 200) throw new Error(`PUT answered ${res.status}`);
      };
      const rawPut = async (i: number) => {
        await raw.put(`/bench-raw/${label}/f${i % 64}`).value(content);
      };
      await raw.put(`/bench-raw/${label}/only`).value(content);
      const serviceGet = async () => {
        const res = await httpCall(`${input.secretsBase}/v2/secrets?app=bench&proc=${getProc}`, "GET", auth);
        const records = JSON.parse(res.text) as { content: string }[];
        if (res.status !== 200 || records[0]?.content.length !== bytes) throw new Error(`GET answered ${res.status}`);
      };
      const rawGet = async () => {
        const value = await raw.get(`/bench-raw/${label}/only`).string();
        if (value?.length !== bytes) throw new Error("raw get lost the value");
      };
      // Warm both paths (connections, JIT, the role cache), then measure.
      await measure(1000, servicePut);
      await measure(1000, rawPut);
      await measure(1000, serviceGet);
      await measure(1000, rawGet);
      // Short alternating rounds: the machine's load drifts (other processes share its cores), and
      // alternating exposes service and raw to the same drift instead of one of them to a burst.
      const samples: Record<string, Sample[]> = { putService: [], putRaw: [], getService: [], getRaw: [] };
      const perRound = Math.ceil(ops / rounds);
      for (let r = 0; r < rounds; r++) {
        samples.putService!.push(await measure(perRound, servicePut));
        samples.putRaw!.push(await measure(perRound, rawPut));
        samples.getService!.push(await measure(perRound, serviceGet));
        samples.getRaw!.push(await measure(perRound, rawGet));
      }
      out[`put_service_${label}`] = summarize(samples.putService!);
      out[`put_raw_${label}`] = summarize(samples.putRaw!);
      out[`get_service_${label}`] = summarize(samples.getService!);
      out[`get_raw_${label}`] = summarize(samples.getRaw!);
    }
    return out;
  } finally {
    agent.destroy();
    raw.close();
  }
}

async function main(): Promise<void> {
  const etcd = await startEtcd();
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  const servers: ServerType[] = [];
  try {
    const admin = generateToken();
    await ensureAdminToken({ store, envToken: admin.token });
    const consoleHttp = await listen(createConsoleApi({ store }));
    servers.push(consoleHttp.server);
    const { app: secretsApp, vault } = createSecretsService({ store, consoleUrl: consoleHttp.base });
    const secretsHttp = await listen(secretsApp);
    servers.push(secretsHttp.server);
    const { keys } = await vault.init(3, 2);
    await vault.unseal(keys[0]!);
    await vault.unseal(keys[1]!);

    const adminCall = async (path: string, body: unknown) => {
      const res = await fetch(consoleHttp.base + path, {
        method: "POST",
        headers: { "access-token": admin.token, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(5000),
      });
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { token?: string };
    };
    await adminCall("/api/v1/apps", { appname: "bench", maintainers: ["bench@example.com"] });
    const { token } = await adminCall("/api/v1/tokens", { user: "bench@example.com" });

    const secretsBase = secretsHttp.base;
    for (const [label] of sizes) {
      // GET reads a proc holding exactly one record, the same work as one raw get.
      const seed = await httpCall(`${secretsBase}/v2/secrets?app=bench&proc=bench.get.w${label.toLowerCase()}&path=only`, "PUT", { "access-token": token! }, "s".repeat(sizes.find((x) => x[0] === label)![1]));
      if (seed.status !== 200) throw new Error(`seeding the GET record: ${seed.status} ${seed.text}`);
    }
    const load: LoadInput = { secretsBase, token: token!, etcdEndpoint: etcd.endpoint };
    const results = await new Promise<Record<string, Run>>((resolve, reject) => {
      // tsx's loader hooks do not reach worker threads: the worker's entry registers them, then
      // imports this file.
      const entry = `import { register } from ${JSON.stringify(import.meta.resolve("tsx/esm/api"))}; register(); await import(${JSON.stringify(import.meta.url)});`;
      const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(entry)}`), { workerData: load });
      worker.once("message", (m: Record<string, Run>) => resolve(m));
      worker.once("error", reject);
      worker.once("exit", (code) => (code === 0 ? undefined : reject(new Error(`load worker exited with ${code}`))));
    });
    const figures: Record<string, number> = { ops, concurrency, rounds };
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
        "private etcd; service = HTTP + console role check (5 s cache) + AES-256-GCM + etcd; raw = etcd3 put/get of the same value size",
        `load from a worker thread (node:http keep-alive for the service, its own etcd3 client for raw), ${rounds} alternating rounds; GET reads a proc holding one record`,
        "throughput ratios are service/raw; *_throughput_ratio is the worse of the sizes",
      ],
    });
  } finally {
    for (const s of servers) {
      (s as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      s.close();
    }
    agent.destroy();
    await store.close();
    await etcd.stop();
  }
}

if (isMainThread) await main();
else parentPort!.postMessage(await runLoad(workerData as LoadInput));
