// Secrets service throughput against raw etcd (issue 5): PUT and GET of one record through the
// service over HTTP (console on loopback deciding authorization, the 5 s role cache on, AES-256-GCM
// on every record) versus raw etcd3 put and get of a value of the same size, on the same private
// etcd, in the same run, at the same concurrency. Target: the service keeps at least half of the
// raw throughput (put_throughput_ratio and get_throughput_ratio are the worse of the sizes).
//
// Everything runs in this one Node process (load generator, both HTTP servers, etcd clients), so
// the service's figures also pay for the client side of HTTP; raw etcd pays for none of it.
//
//   npm run bench:secrets   [SECRETS_BENCH_OPS=2000 SECRETS_BENCH_CONCURRENCY=16]
import { serve, type ServerType } from "@hono/node-server";
import { Etcd3 } from "etcd3";
import type { Hono } from "hono";
import { Agent, request } from "node:http";
import type { AddressInfo } from "node:net";
import { EtcdStore } from "../adapters/store/etcd.ts";
import { createConsoleApi, ensureAdminToken, generateToken } from "../api/console/index.ts";
import { createSecretsService } from "../api/secrets/index.ts";
import { startEtcd } from "../test/helpers/etcd-process.ts";
import { percentile, report } from "./lib/report.ts";

const ops = Number(process.env.SECRETS_BENCH_OPS ?? 2000);
const concurrency = Number(process.env.SECRETS_BENCH_CONCURRENCY ?? 16);
const sizes: [string, number][] = [
  ["1KiB", 1024],
  ["16KiB", 16 * 1024],
];

interface Run {
  opsPerSec: number;
  p50: number;
  p99: number;
}

/** `n` calls of `op`, `concurrency` at a time; throughput and latency percentiles in ms. */
async function measure(n: number, op: (i: number) => Promise<void>): Promise<Run> {
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
  const seconds = (performance.now() - started) / 1000;
  return { opsPerSec: n / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
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

async function main(): Promise<void> {
  const etcd = await startEtcd();
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  const raw = new Etcd3({ hosts: etcd.endpoint });
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

    const figures: Record<string, number> = { ops, concurrency };
    const ratios: Record<string, number> = {};
    let putWorst = Infinity;
    let getWorst = Infinity;
    for (const [label, bytes] of sizes) {
      const content = "s".repeat(bytes);
      const body = JSON.stringify({ content });
      const proc = `bench.web.w${label.toLowerCase()}`;
      const secretsUrl = (path: string) => `${secretsHttp.base}/v2/secrets?app=bench&proc=${proc}&path=${path}`;
      const servicePut = async (i: number) => {
        const res = await httpCall(secretsUrl(`f${i % 64}`), "PUT", { "access-token": token!, "content-type": "application/json" }, body);
        if (res.status !== 200) throw new Error(`PUT answered ${res.status}`);
      };
      const rawPut = async (i: number) => {
        await raw.put(`/bench-raw/${label}/f${i % 64}`).value(content);
      };
      // GET reads a proc holding exactly one record, the same work as one raw get.
      const getProc = `bench.get.w${label.toLowerCase()}`;
      const put = await fetch(`${secretsHttp.base}/v2/secrets?app=bench&proc=${getProc}&path=only`, { method: "PUT", headers: { "access-token": token! }, body, signal: AbortSignal.timeout(10_000) });
      if (put.status !== 200) throw new Error(`seeding GET record: ${put.status}`);
      await raw.put(`/bench-raw/${label}/only`).value(content);
      const serviceGet = async () => {
        const res = await httpCall(`${secretsHttp.base}/v2/secrets?app=bench&proc=${getProc}`, "GET", { "access-token": token! });
        const records = JSON.parse(res.text) as { content: string }[];
        if (res.status !== 200 || records[0]?.content.length !== bytes) throw new Error(`GET answered ${res.status}`);
      };
      const rawGet = async () => {
        const value = await raw.get(`/bench-raw/${label}/only`).string();
        if (value?.length !== bytes) throw new Error("raw get lost the value");
      };

      // Warm both paths (connections, JIT, the role cache), then alternate measured runs.
      await measure(1000, servicePut);
      await measure(1000, rawPut);
      await measure(1000, serviceGet);
      await measure(1000, rawGet);
      const sp = await measure(ops, servicePut);
      const rp = await measure(ops, rawPut);
      const sg = await measure(ops, serviceGet);
      const rg = await measure(ops, rawGet);
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
        "one process runs the load generator (node:http keep-alive), both HTTP servers and the etcd clients; GET reads a proc holding one record",
        "throughput ratios are service/raw; *_throughput_ratio is the worse of the sizes",
      ],
    });
  } finally {
    for (const s of servers) {
      (s as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      s.close();
    }
    agent.destroy();
    raw.close();
    await store.close();
    await etcd.stop();
  }
}

await main();
