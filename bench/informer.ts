// Informer initial sync: time and retained heap to load 10,000 keys (~200-byte JSON values) from
// the shared etcd into an Informer's cache, against a bare etcd3 range read of the same prefix in
// the same run (`client.getAll().prefix(p).exec()`, then JSON.parse of every value into a Map, so
// the baseline does the same useful work: every object parsed and held by key).
//
// The informer pays for: paginated reads pinned at one revision (default pageSize 5000 => 2 round
// trips instead of one), its Entry records, the watch it opens after the list, and metrics. Rounds
// alternate which side goes first; medians are reported. Heap figures are what the result holds:
// heap after a forced GC with the result referenced, minus heap after it is dropped.
//
// Run: npm run bench:informer   (INFORMER_KEYS=..., INFORMER_ROUNDS=... to change the size)
import { Etcd3 } from "etcd3";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { EtcdStore } from "../adapters/store/etcd.ts";
import type { Op } from "../adapters/store/store.ts";
import { Informer } from "../runtime/informer.ts";
import { loadServices, uniqueName } from "../test/helpers/services.ts";
import { report } from "./lib/report.ts";

const KEYS = Number(process.env.INFORMER_KEYS ?? 10_000);
const ROUNDS = Number(process.env.INFORMER_ROUNDS ?? 7);
const PAGE_SIZE = process.env.INFORMER_PAGE_SIZE ? Number(process.env.INFORMER_PAGE_SIZE) : undefined;

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function settleHeap(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** Heap held by a result: heap with it referenced minus heap after `drop` released it. */
async function retainedMb(drop: () => void): Promise<number> {
  await new Promise((r) => setTimeout(r, 50)); // let closed streams release their closures
  const held = settleHeap();
  drop();
  const released = settleHeap();
  return (held - released) / 2 ** 20;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const { etcdEndpoints } = loadServices();
const prefix = `/bench/${uniqueName("informer")}/`;
const store = new EtcdStore({ endpoints: etcdEndpoints, callTimeoutMs: 30_000 });
const client = new Etcd3({ hosts: etcdEndpoints, grpcOptions: { "grpc.max_receive_message_length": -1 } });

function value(i: number): string {
  const v = JSON.stringify({
    name: `podgroup-${i}`,
    namespace: "bench",
    numInstances: 3,
    restartPolicy: "always",
    pod: { image: "capstan/busybox:latest", env: [`INDEX=${i}`], memoryLimit: 67108864 },
    annotation: "",
  });
  // Distinct text per object, as real annotations are (identical strings would be shared by V8's
  // JSON parser and understate the heap).
  let text = "";
  while (text.length < 200 - v.length) text += ((i * 2654435761 + text.length * 40503) >>> 0).toString(36);
  return v.replace('"annotation":""', `"annotation":"${text.slice(0, Math.max(0, 200 - v.length))}"`);
}

async function informerRound(round: number): Promise<{ ms: number; heapMb: number; size: number }> {
  const t0 = performance.now();
  let informer: Informer<unknown> | undefined = new Informer<unknown>({
    name: `bench-${round}`,
    source: store,
    prefix,
    decode: (kv) => JSON.parse(kv.value) as unknown,
    ...(PAGE_SIZE !== undefined && { pageSize: PAGE_SIZE }),
  });
  informer.start();
  await informer.waitForSync(undefined, 60_000);
  const ms = performance.now() - t0;
  const size = informer.size;
  await informer.stop(); // the cache stays readable and referenced
  const heapMb = await retainedMb(() => (informer = undefined));
  return { ms, heapMb, size };
}

async function bareRound(): Promise<{ ms: number; heapMb: number; size: number }> {
  const t0 = performance.now();
  const res = await client.getAll().prefix(prefix).exec();
  let objects: Map<string, unknown> | undefined = new Map<string, unknown>();
  for (const kv of res.kvs) objects.set(kv.key.toString(), JSON.parse(kv.value.toString()) as unknown);
  const ms = performance.now() - t0;
  const size = objects.size;
  const heapMb = await retainedMb(() => (objects = undefined));
  return { ms, heapMb, size };
}

async function main(): Promise<void> {
  for (let i = 0; i < KEYS; i += 128) {
    const ops: Op[] = [];
    for (let j = i; j < Math.min(KEYS, i + 128); j++) ops.push({ type: "put", key: `${prefix}${String(j).padStart(6, "0")}`, value: value(j) });
    await store.txn([], ops);
  }
  const valueBytes = value(0).length;
  try {
    // Warm-up: connections, JIT.
    await bareRound();
    await informerRound(-1);
    const inf: { ms: number; heapMb: number }[] = [];
    const bare: { ms: number; heapMb: number }[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? (["informer", "bare"] as const) : (["bare", "informer"] as const);
      for (const side of order) {
        const result = side === "informer" ? await informerRound(r) : await bareRound();
        if (result.size !== KEYS) throw new Error(`${side} saw ${result.size} keys, expected ${KEYS}`);
        (side === "informer" ? inf : bare).push(result);
      }
    }
    const informerMs = median(inf.map((x) => x.ms));
    const bareMs = median(bare.map((x) => x.ms));
    const informerHeap = median(inf.map((x) => x.heapMb));
    const bareHeap = median(bare.map((x) => x.heapMb));
    report({
      bench: "informer",
      figures: {
        keys: KEYS,
        value_bytes: valueBytes,
        rounds: ROUNDS,
        informer_ms: informerMs,
        bare_ms: bareMs,
        informer_heap_mb: informerHeap,
        bare_heap_mb: bareHeap,
        rss_mb: process.memoryUsage().rss / 2 ** 20,
      },
      ratios: {
        informer_over_bare: informerMs / bareMs,
        informer_heap_over_bare: informerHeap / bareHeap,
      },
      targets: [{ name: "informer_over_bare", kind: "max", value: 1.5 }],
      notes: [
        "medians of alternating rounds; informer = paginated list pinned at one revision + cache + watch start",
        "heap = heap held by the result (forced GC with it referenced, minus after dropping it)",
      ],
    });
  } finally {
    await store.deletePrefix(prefix);
    await store.close();
    client.close();
  }
}

await main();
