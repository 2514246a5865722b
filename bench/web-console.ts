// bench:web-console: the web console's pages with 5,000 PodGroups (docs/web-console.md, "Limits").
//
// One process serves, as `capstan up` does, the PodGroup API (informers over an embedded SQLite
// store, token authentication on) and the web console mounted beside it. The store holds 5,000
// groups with a status of two running pods each, written before the process starts. No controller
// runs: the figures are the pages' own cost, not a reconcile's.
//
// Timed over real HTTP on loopback, one request at a time (a person's clicks), N = BENCH_WEB_ROUNDS
// (default 40) each:
//   api_all        GET /api/podgroups/_all: what `capstan get podgroups` reads, the baseline
//   ui_overview    GET /ui/ (counts, first page of groups, nodes, events)
//   ui_filtered    GET /ui/podgroups?q=... (a filter that matches 1 group in 10)
//   ui_last_page   GET /ui/podgroups?page=100 (the last page)
//   ui_group       GET /ui/podgroups/NAME (one group, its history)
// Target: each page's p99 under 500 ms; the ratio of the overview to the API read it is built on
// says what the console adds.
import { serve, type ServerType } from "@hono/node-server";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { SqliteStore } from "../adapters/store/sqlite.ts";
import { hostAccessPolicy, tokenGate, TokenVerifier } from "../api/auth/index.ts";
import { ensureAdminToken } from "../api/console/admin-token.ts";
import { orchestratorInformers } from "../api/orchestrator/informers.ts";
import { createPodGroupApi } from "../api/orchestrator/podgroups.ts";
import { keys } from "../api/resources/keys.ts";
import type { PodGroupStatus, StoredPodGroup } from "../api/resources/podgroup.ts";
import { inProcessApi } from "../api/ui/api-client.ts";
import { createWebConsole } from "../api/ui/web-console.ts";
import { readFileSync } from "node:fs";
import { percentile, report } from "./lib/report.ts";
import { cleanUpOnSignals, runBench } from "./lib/signals.ts";

const groups = 5_000;
const rounds = Number(process.env.BENCH_WEB_ROUNDS ?? 40);
const dir = mkdtempSync(join(tmpdir(), "capstan-bench-web-"));
let server: ServerType | undefined;
let store: SqliteStore | undefined;

const cleanUp = async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
};
const signals = cleanUpOnSignals("the web console bench", cleanUp);

function group(i: number, now: string): { spec: StoredPodGroup; status: PodGroupStatus } {
  const app = `app${i % 50}`;
  const name = `${app}.web.g${String(i).padStart(5, "0")}`;
  const pod = { name, namespace: app, version: 1, containers: [{ image: "capstan/busybox:latest", command: ["sh", "-c", "sleep 1000000"], memoryLimit: 16 << 20 }] };
  const spec: StoredPodGroup = { name, namespace: app, numInstances: 2, restartPolicy: "always", pod, createdAt: now, updatedAt: now };
  const pods = [0, 1].map((n) => ({
    instanceNo: n,
    state: "running" as const,
    lastError: "",
    restartCount: 0,
    driftCount: 0,
    version: 1,
    node: `n${n + 1}`,
    containers: [{ id: `${i}`.padStart(64, "0"), name: `${name}.v1-i${n}-c0`, node: `n${n + 1}`, nodeIp: "127.0.0.1", ip: "", status: "running", startedAt: now }],
  }));
  return { spec, status: { state: "running", lastError: "", updatedAt: now, observedVersion: 1, pods } };
}

async function time(url: string, headers: Record<string, string>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < rounds + 3; i++) {
    const t0 = performance.now();
    const res = await fetch(url, { headers });
    const body = await res.text();
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${body.slice(0, 200)}`);
    if (i >= 3) out.push(ms); // the first calls warm the JIT and the caches
  }
  return out;
}

async function main(): Promise<void> {
  store = new SqliteStore({ path: join(dir, "state.db") });
  await ensureAdminToken({ store, adminTokenFile: join(dir, "admin-token") });
  const token = readFileSync(join(dir, "admin-token"), "utf8").trim();
  const now = new Date().toISOString();
  for (let start = 0; start < groups; start += 250) {
    const ops = [];
    for (let i = start; i < Math.min(groups, start + 250); i++) {
      const g = group(i, now);
      ops.push({ type: "put" as const, key: keys.podGroup(g.spec.name), value: JSON.stringify(g.spec) });
      ops.push({ type: "put" as const, key: keys.podGroupStatusOf(g.spec.name), value: JSON.stringify(g.status) });
    }
    await store.txn([], ops);
  }

  const informers = orchestratorInformers(store);
  for (const i of Object.values(informers)) i.start();
  await Promise.all(Object.values(informers).map((i) => i.waitForSync()));
  const verifier = new TokenVerifier({ store });
  const access = { gate: tokenGate(verifier), hostAccess: hostAccessPolicy([], []) };
  const app = new Hono();
  app.route("/", createPodGroupApi({ store, ...informers, access }));
  const sessions = { open: async () => ({ token }), close: async () => undefined };
  app.route("/", createWebConsole({ api: inProcessApi(app), verifier, sessions, authMode: "token", secure: false }));
  const base = await new Promise<string>((resolve) => {
    server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => resolve(`http://127.0.0.1:${info.port}`));
  });

  const api = { authorization: `Bearer ${token}` };
  const browser = { cookie: `capstan_session=${token}` };
  const sample = group(1234, now).spec.name;
  const runs: Record<string, number[]> = {
    api_all: await time(`${base}/api/podgroups/_all`, api),
    ui_overview: await time(`${base}/ui/`, browser),
    ui_filtered: await time(`${base}/ui/podgroups?q=app7.`, browser),
    ui_last_page: await time(`${base}/ui/podgroups?page=100`, browser),
    ui_group: await time(`${base}/ui/podgroups/${sample}`, browser),
  };
  const figures: Record<string, number> = { groups };
  for (const [k, v] of Object.entries(runs)) {
    figures[`${k}_p50_ms`] = round(percentile(v, 50));
    figures[`${k}_p99_ms`] = round(percentile(v, 99));
  }
  for (const i of Object.values(informers)) await i.stop();
  report({
    bench: "web-console",
    figures,
    ratios: { overview_over_api_all_p50: round(figures.ui_overview_p50_ms! / figures.api_all_p50_ms!) },
    targets: ["ui_overview", "ui_filtered", "ui_last_page", "ui_group"].map((k) => ({ name: `${k}_p99_ms`, kind: "max" as const, value: 500 })),
    notes: [`${rounds} sequential requests per page over loopback HTTP, ${groups} groups of 2 running pods, token authentication on; embedded SQLite store`],
  });
}

const round = (v: number) => Math.round(v * 100) / 100;

await runBench(main, signals, cleanUp);
