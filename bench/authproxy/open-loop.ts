// The fixed-rate (open-loop) load generator of bench:authproxy, as its own process:
//
//   node --import tsx bench/authproxy/open-loop.ts '{"url":"http://127.0.0.1:PORT/","rate":2000,
//     "connections":32,"warmupSeconds":3,"seconds":10,"headers":{"cookie":"sso=..."},"expectBytes":1024}'
//
// wrk 4.1 runs closed loops only (each connection sends its next request when the previous answer
// is in), so at saturation its percentiles are mostly queueing: they measure throughput. This one
// sends GETs at a fixed rate whatever the answers do: request i is due at t0 + i / rate, and its
// latency is counted from that scheduled time, not from when it went out, so a stall delays every
// request due during it and shows in the percentiles (no coordinated omission, as wrk2 does).
//
// Connections: `connections` undici Clients (keep-alive, one request at a time each, driven through
// dispatch() with a handler object: the lightest way undici offers). A due request
// goes to the next idle connection in round-robin order, so the load spreads over all of them; when
// none is idle it waits in one FIFO queue, and that wait is part of its latency. Timers fire at
// 1 ms granularity, so requests go out in small bursts (2 per ms at 2,000/s), and later when this
// process does not get a core in time: how late the timer sent each (`late_*`) is reported, and it
// is in the latency of every leg alike. Prints one JSON line (OpenLoopResult) on stdout.
import { pathToFileURL } from "node:url";
import { Client, type Dispatcher } from "undici";
import { percentile } from "../lib/report.ts";

export interface OpenLoopOptions {
  url: string;
  /** Requests per second. */
  rate: number;
  connections: number;
  /** Sent at the rate but not counted. */
  warmupSeconds: number;
  /** Counted. */
  seconds: number;
  headers?: Record<string, string>;
  /** Body size every answer must have (the upstream's 1 KiB). */
  expectBytes?: number;
  timeoutMs?: number;
}

export interface OpenLoopResult {
  rate: number;
  connections: number;
  seconds: number;
  /** Requests due in the counted window. */
  measured: number;
  /** ... of which answered 200 with the expected body. */
  ok: number;
  errors: number;
  bad_status: number;
  bad_body: number;
  /** Counted requests / (time from the first due to the last answer). */
  achieved_rps: number;
  /** Latency from the scheduled time, ms. */
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
  mean_ms: number;
  /** Latency from when the request was handed to its connection, ms (what a closed loop would see). */
  service_p50_ms: number;
  service_p99_ms: number;
  /** How late the generator's timer sent requests (scheduled -> sent or queued), ms: the generator's own delay. */
  late_p50_ms: number;
  late_p99_ms: number;
  /** Counted requests that waited for an idle connection (all were busy), and the longest wait, ms. */
  queued: number;
  queued_max_ms: number;
  /** Connections that carried at least one counted request. */
  connections_used: number;
  /** First few error messages. */
  error_samples: string[];
}

export async function openLoop(o: OpenLoopOptions): Promise<OpenLoopResult> {
  const target = new URL(o.url);
  const path = `${target.pathname}${target.search}`;
  const timeoutMs = o.timeoutMs ?? 10_000;
  const total = Math.round(o.rate * (o.warmupSeconds + o.seconds));
  const firstCounted = Math.round(o.rate * o.warmupSeconds);
  const intervalMs = 1000 / o.rate;
  const latency = new Float64Array(total).fill(NaN);
  const service = new Float64Array(total).fill(NaN);
  const late = new Float64Array(total).fill(NaN);
  /** How long a request waited for an idle connection; 0 when one was idle when it was due. */
  const queuedFor = new Float64Array(total).fill(0);
  const usedBy = new Int32Array(total).fill(-1);
  /** Per request: 0 not answered, 1 ok, 2 a status other than 200, 3 a body of another size, 4 failed. */
  const outcome = new Uint8Array(total);
  const errorSamples: string[] = [];
  let finished = 0;
  let lastDone = 0;

  const clients = Array.from({ length: o.connections }, () => new Client(target.origin, { pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }));
  const busy = new Array<boolean>(o.connections).fill(false);
  let rr = 0;
  const queue: number[] = [];
  let queueHead = 0;
  let t0 = 0;
  let resolveAll!: () => void;
  const allDone = new Promise<void>((r) => (resolveAll = r));

  const complete = (c: number) => {
    busy[c] = false;
    finished++;
    if (finished === total) {
      lastDone = performance.now();
      resolveAll();
      return;
    }
    if (queueHead < queue.length) {
      const next = queue[queueHead++]!;
      if (queueHead > 4096 && queueHead * 2 > queue.length) {
        queue.splice(0, queueHead);
        queueHead = 0;
      }
      queuedFor[next] = performance.now() - (t0 + next * intervalMs) - late[next]!;
      dispatch(next, c);
    }
  };

  const dispatch = (i: number, c: number) => {
    busy[c] = true;
    const due = t0 + i * intervalMs;
    const sent = performance.now();
    usedBy[i] = c;
    // undici's dispatch with a handler object: no promise, stream or async iterator per request,
    // which would cost this process (and so the servers sharing its cores) several times the CPU.
    let status = 0;
    let bytes = 0;
    let over = false;
    const end = (result: number, err?: Error) => {
      if (over) return;
      over = true;
      const t = performance.now();
      if (result !== 4) {
        latency[i] = t - due;
        service[i] = t - sent;
      } else if (errorSamples.length < 5) errorSamples.push(err?.message ?? "error");
      outcome[i] = result;
      complete(c);
    };
    const handler: Dispatcher.DispatchHandler = {
      // undici takes a handler as the new-style one only when it has onRequestStart.
      onRequestStart: () => {},
      onResponseStart: (_controller, statusCode) => void (status = statusCode),
      onResponseData: (_controller, chunk) => void (bytes += chunk.length),
      onResponseEnd: () => end(status !== 200 ? 2 : o.expectBytes !== undefined && bytes !== o.expectBytes ? 3 : 1),
      onResponseError: (_controller, err) => end(4, err),
    };
    clients[c]!.dispatch({ origin: target.origin, path, method: "GET", headers: o.headers ?? {} }, handler);
  };

  /** Hand request i to the next idle connection, or queue it. */
  const send = (i: number) => {
    late[i] = performance.now() - (t0 + i * intervalMs);
    for (let k = 0; k < o.connections; k++) {
      const c = (rr + k) % o.connections;
      if (!busy[c]) {
        rr = c + 1;
        dispatch(i, c);
        return;
      }
    }
    queue.push(i);
  };

  let nextIndex = 0;
  const tick = () => {
    const now = performance.now();
    while (nextIndex < total && t0 + nextIndex * intervalMs <= now) send(nextIndex++);
    if (nextIndex < total) setTimeout(tick, Math.max(0, t0 + nextIndex * intervalMs - performance.now()));
  };
  t0 = performance.now() + 50;
  setTimeout(tick, 50);
  const deadline = setTimeout(() => resolveAll(), (o.warmupSeconds + o.seconds) * 1000 + timeoutMs + 5_000);
  await allDone;
  clearTimeout(deadline);
  if (lastDone === 0) lastDone = performance.now();
  await Promise.all(clients.map((c) => c.close().catch(() => {})));

  const counted = (a: Float64Array) => Array.from(a.subarray(firstCounted)).filter((v) => !Number.isNaN(v));
  const lat = counted(latency);
  const svc = counted(service);
  const lt = counted(late);
  const waits = Array.from(queuedFor.subarray(firstCounted)).filter((v) => v > 0);
  const measured = total - firstCounted;
  const used = new Set(Array.from(usedBy.subarray(firstCounted)).filter((c) => c >= 0));
  const outcomes = [0, 0, 0, 0, 0];
  for (let i = firstCounted; i < total; i++) outcomes[outcome[i]!]!++;
  const windowMs = lastDone - (t0 + firstCounted * intervalMs);
  return {
    rate: o.rate,
    connections: o.connections,
    seconds: o.seconds,
    measured,
    ok: outcomes[1]!,
    errors: outcomes[4]! + outcomes[0]!,
    bad_status: outcomes[2]!,
    bad_body: outcomes[3]!,
    achieved_rps: lat.length / (windowMs / 1000),
    p50_ms: percentile(lat, 50),
    p90_ms: percentile(lat, 90),
    p99_ms: percentile(lat, 99),
    p999_ms: percentile(lat, 99.9),
    max_ms: lat.reduce((m, v) => Math.max(m, v), 0),
    mean_ms: lat.reduce((s, v) => s + v, 0) / lat.length,
    service_p50_ms: percentile(svc, 50),
    service_p99_ms: percentile(svc, 99),
    late_p50_ms: percentile(lt, 50),
    late_p99_ms: percentile(lt, 99),
    queued: waits.length,
    queued_max_ms: waits.reduce((m, v) => Math.max(m, v), 0),
    connections_used: used.size,
    error_samples: errorSamples,
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = JSON.parse(process.argv[2] ?? "{}") as OpenLoopOptions;
  process.stdout.write(`${JSON.stringify(await openLoop(options))}\n`);
}
