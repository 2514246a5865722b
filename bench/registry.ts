// Registry throughput against distribution (docs/benchmarks.md, "registry"): `capstan registry`
// and Debian's `docker-registry` (distribution 2.8.2), both with filesystem storage on the same
// disk (fresh root directories under one temporary directory), no auth, on 127.0.0.1 free ports,
// in the same run:
//
// - a 200 MiB single-layer image (random bytes in a tar, gzip -1; an OCI layout made once per run)
//   pushed with `skopeo copy oci:<dir>:img docker://<host>/bench/big:1` and pulled back into an
//   emptied `oci:` directory, each timed; N rounds, the registries' order alternating per round
//   (and the sink's place moving, so no leg always follows the same one); `sync` before each leg;
//   medians. Every round starts each registry afresh on an empty root, so the push really sends
//   the layer (a registry that has it answers skopeo's HEAD and nothing is sent);
// - the same 200 MiB through a plain HTTP client, so the registry's own cost shows (skopeo hashes
//   and writes on its side and takes most of the skopeo times): a GET of the layer blob, read and
//   dropped, and a push (POST, then PUT ?digest= with the body) of another 200 MiB random blob
//   streamed from a file; timed, informational (`capstan_raw_*`);
// - 32 blobs of 1 MiB pushed at once (POST then PUT ?digest= with the body, keep-alive node:http),
//   several batches per round after one warm-up batch: median batch time and blobs/s;
// - the registry process's peak RSS during the push (VmRSS every 50 ms, and VmHWM reset first).
//
// And the floor: the same push and pull against a sink that does no work (bench/registry/sink.ts),
// in the same rounds. distribution's time over the sink's is the best ratio any registry could
// reach with this client (`*_ratio_ceiling`): skopeo itself takes most of the time.
//
// Ratios are distribution time / Capstan time (> 1: Capstan is faster); target >= 1.2 for push and
// pull. Writes bench/results/registry.json.
//
//   npm run bench:registry   [BENCH_REGISTRY_ROUNDS=3 BENCH_REGISTRY_BLOB_ROUNDS=5 BENCH_REGISTRY_IMAGE_MB=200
//                             BENCH_REGISTRY_PARALLEL=32 BENCH_REGISTRY_BLOB_KB=1024]
//   BENCH_REGISTRY_PROFILE=DIR: the Capstan processes write V8 CPU profiles there (slows them).
//   BENCH_REGISTRY_FLOOR=0: leave the sink out.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { BlobPusher, randomBlobs } from "./registry/blobs.ts";
import { imageTag, makeImage, makeRandomFile, type BenchImage } from "./registry/image.ts";
import { codeState, describeCodeState } from "./lib/code-state.ts";
import { startSink } from "./registry/sink.ts";
import { distributionBin, memoryOf, registryCodePaths, RssSampler, startRegistry, type RegistryKind, type RegistryUnderTest } from "./registry/servers.ts";
import { cpuSecondsOf } from "./lib/proc.ts";
import { percentile, report, type Target } from "./lib/report.ts";
import { cleanUpOnSignals, runBench } from "./lib/signals.ts";

const rounds = Number(process.env.BENCH_REGISTRY_ROUNDS ?? 3);
const blobRounds = Number(process.env.BENCH_REGISTRY_BLOB_ROUNDS ?? 5);
const parallel = Number(process.env.BENCH_REGISTRY_PARALLEL ?? 32);
const blobBytes = Number(process.env.BENCH_REGISTRY_BLOB_KB ?? 1024) * 1024;
const imageBytes = Number(process.env.BENCH_REGISTRY_IMAGE_MB ?? 200) * 1024 * 1024;
const profileDir = process.env.BENCH_REGISTRY_PROFILE;
const withFloor = process.env.BENCH_REGISTRY_FLOOR !== "0";
const kinds: RegistryKind[] = ["capstan", "distribution"];
/**
 * The legs' order per round, cycled: capstan and distribution swap every round, and over six rounds
 * each leg takes every place once, so none always runs right after the same other (a leg's
 * clean-up, e.g. removing 400 MB of files, can weigh on the next).
 */
const legOrders: (RegistryKind | "floor")[][] = [
  ["capstan", "distribution", "floor"],
  ["distribution", "capstan", "floor"],
  ["floor", "capstan", "distribution"],
  ["floor", "distribution", "capstan"],
  ["capstan", "floor", "distribution"],
  ["distribution", "floor", "capstan"],
];
const MB = 1024 * 1024;

/** The 200 MiB random blob of the raw push. */
interface RawBlob {
  path: string;
  size: number;
  digest: string;
}

interface RoundResult {
  pushS: number;
  pullS: number;
  rawGetS: number;
  rawPushS: number;
  rawGetCpuS: number;
  rawPushCpuS: number;
  pushCpuS: number;
  pullCpuS: number;
  rssBeforePush: number;
  pushPeakRss: number;
  pushHwm: number;
  /** Seconds of each measured batch of `parallel` blobs. */
  batchS: number[];
}

function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** `skopeo --policy P ...args`: resolves when it exits 0, with its output in the error otherwise. */
function skopeo(policy: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("skopeo", ["--policy", policy, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (d: Buffer) => (output = (output + d.toString()).slice(-4000));
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    const timer = setTimeout(() => child.kill("SIGKILL"), 300_000);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`skopeo ${args.join(" ")} failed (${code ?? signal}): ${output}`));
    });
  });
}

/** `sync`: what earlier legs left for write-back is on disk before this one is timed. */
function syncDisks(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("sync", [], { stdio: "ignore" });
    child.on("error", reject);
    child.on("exit", () => resolve());
  });
}

/** A difference of CPU seconds counted in 10 ms ticks, without the float residue. */
function ticks(seconds: number): number {
  return Math.round(seconds * 100) / 100;
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

const running = new Set<RegistryUnderTest>();
let workDir: string | undefined;

async function cleanUp(): Promise<void> {
  for (const r of [...running]) {
    running.delete(r);
    await r.stop().catch((e: unknown) => console.error(`stopping ${r.kind}: ${String(e)}`));
  }
  if (workDir) await rm(workDir, { recursive: true, force: true });
  workDir = undefined;
}

const signals = cleanUpOnSignals("the registries", cleanUp);

/** One round of one registry: a fresh process on an empty root; push, pull, then the blob batches. */
async function oneRound(kind: RegistryKind, image: BenchImage, raw: RawBlob, policy: string, round: number): Promise<RoundResult> {
  const reg = await startRegistry(kind, workDir!, profileDir ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] } : {});
  running.add(reg);
  const pusher = new BlobPusher(reg.base, parallel);
  try {
    // Warm-up, not measured: connections opened, the upload path run once (and JIT-compiled).
    await pusher.pushAll("bench/small", randomBlobs(parallel, blobBytes));
    await syncDisks();

    const rssBeforePush = (await memoryOf(reg.pid)).rss;
    const sampler = new RssSampler(reg.pid, 50);
    await sampler.start();
    const cpu0 = await cpuSecondsOf(reg.pid);
    const ref = `docker://${reg.host}/bench/big:1`;
    const pushS = await timed(() => skopeo(policy, ["copy", "--dest-tls-verify=false", `oci:${image.dir}:${imageTag}`, ref]));
    const cpu1 = await cpuSecondsOf(reg.pid);
    const mem = await sampler.stop();
    const stored = await pusher.size("bench/big", image.layerDigest);
    if (stored !== image.layerBytes) throw new Error(`${kind}: the pushed layer is ${stored} bytes, not ${image.layerBytes}`);

    const out = join(workDir!, "pulled");
    await rm(out, { recursive: true, force: true });
    const pullS = await timed(() => skopeo(policy, ["copy", "--src-tls-verify=false", ref, `oci:${out}:${imageTag}`]));
    const cpu2 = await cpuSecondsOf(reg.pid);
    const pulled = await stat(join(out, "blobs", "sha256", image.layerDigest.slice("sha256:".length))).catch(() => undefined);
    if (pulled?.size !== image.layerBytes) throw new Error(`${kind}: the pulled layer is ${pulled?.size} bytes, not ${image.layerBytes}`);
    await rm(out, { recursive: true, force: true });

    let got = 0;
    const rawGetS = await timed(async () => void (got = await pusher.download("bench/big", image.layerDigest)));
    if (got !== image.layerBytes) throw new Error(`${kind}: GET of the layer gave ${got} bytes, not ${image.layerBytes}`);
    const cpu3 = await cpuSecondsOf(reg.pid);
    const rawPushS = await timed(() => pusher.pushFile("bench/raw", raw.path, raw.size, raw.digest));
    const cpu4 = await cpuSecondsOf(reg.pid);

    const batchS: number[] = [];
    for (let b = 0; b < blobRounds; b++) {
      const blobs = randomBlobs(parallel, blobBytes);
      batchS.push(await pusher.pushAll("bench/small", blobs));
    }
    const r: RoundResult = {
      pushS,
      pullS,
      rawGetS,
      rawPushS,
      rawGetCpuS: ticks(cpu3 - cpu2),
      rawPushCpuS: ticks(cpu4 - cpu3),
      pushCpuS: ticks(cpu1 - cpu0),
      pullCpuS: ticks(cpu2 - cpu1),
      rssBeforePush,
      pushPeakRss: mem.peak,
      pushHwm: mem.hwm,
      batchS,
    };
    console.log(
      `round ${round + 1} ${kind.padEnd(12)} push ${pushS.toFixed(3)} s (${(image.layerBytes / MB / pushS).toFixed(0)} MiB/s, registry CPU ${r.pushCpuS.toFixed(2)} s)` +
        `  pull ${pullS.toFixed(3)} s (${(image.layerBytes / MB / pullS).toFixed(0)} MiB/s, CPU ${r.pullCpuS.toFixed(2)} s)` +
        `  raw GET ${rawGetS.toFixed(3)} s, PUT ${rawPushS.toFixed(3)} s (CPU ${r.rawGetCpuS.toFixed(2)}/${r.rawPushCpuS.toFixed(2)} s)` +
        `  RSS ${(rssBeforePush / MB).toFixed(0)} -> peak ${(mem.peak / MB).toFixed(0)} MiB (HWM ${(mem.hwm / MB).toFixed(0)})` +
        `  ${parallel}x${blobBytes / 1024} KiB: ${batchS.map((s) => (s * 1000).toFixed(0)).join("/")} ms` +
        (profileDir && kind === "capstan" ? `  (profile of pid ${reg.pid})` : ""),
    );
    return r;
  } catch (err) {
    if (!signals.interrupted) console.error(`${kind} log tail:\n${await reg.logTail()}`);
    throw err;
  } finally {
    pusher.close();
    running.delete(reg);
    await reg.stop();
  }
}

interface FloorResult {
  pushS: number;
  pullS: number;
  rawGetS: number;
  rawPushS: number;
}

/** One round of the sink: the skopeo push and pull and the raw GET and push (no blob batches). */
async function floorRound(image: BenchImage, raw: RawBlob, policy: string, round: number): Promise<FloorResult> {
  const sink = await startSink(image);
  const pusher = new BlobPusher(sink.base, parallel);
  try {
    await syncDisks();
    const ref = `docker://${sink.host}/bench/big:1`;
    const pushS = await timed(() => skopeo(policy, ["copy", "--dest-tls-verify=false", `oci:${image.dir}:${imageTag}`, ref]));
    const out = join(workDir!, "pulled");
    await rm(out, { recursive: true, force: true });
    const pullS = await timed(() => skopeo(policy, ["copy", "--src-tls-verify=false", ref, `oci:${out}:${imageTag}`]));
    const pulled = await stat(join(out, "blobs", "sha256", image.layerDigest.slice("sha256:".length))).catch(() => undefined);
    if (pulled?.size !== image.layerBytes) throw new Error(`sink: the pulled layer is ${pulled?.size} bytes, not ${image.layerBytes}`);
    await rm(out, { recursive: true, force: true });
    const rawGetS = await timed(async () => void (await pusher.download("bench/big", image.layerDigest)));
    const rawPushS = await timed(() => pusher.pushFile("bench/raw", raw.path, raw.size, raw.digest));
    console.log(
      `round ${round + 1} ${"floor (sink)".padEnd(12)} push ${pushS.toFixed(3)} s (${(image.layerBytes / MB / pushS).toFixed(0)} MiB/s)  pull ${pullS.toFixed(3)} s (${(image.layerBytes / MB / pullS).toFixed(0)} MiB/s)` +
        `  raw GET ${rawGetS.toFixed(3)} s, PUT ${rawPushS.toFixed(3)} s`,
    );
    return { pushS, pullS, rawGetS, rawPushS };
  } finally {
    pusher.close();
    await sink.stop();
  }
}

async function main(): Promise<void> {
  if (!existsSync(distributionBin)) throw new Error(`${distributionBin} is missing (apt-get install docker-registry)`);
  const load1Start = loadavg()[0]!;
  const codeAtStart = await codeState(registryCodePaths);
  console.log(`capstan registry code: ${describeCodeState(codeAtStart)}`);
  // Under the system temporary directory: the image, both registries' roots and the pulled copy
  // all on one filesystem.
  workDir = await mkdtemp(join(tmpdir(), "capstan-bench-registry-"));
  const policy = join(workDir, "policy.json");
  await writeFile(policy, JSON.stringify({ default: [{ type: "insecureAcceptAnything" }] }));
  const made = performance.now();
  const image = await makeImage(join(workDir, "image"), imageBytes);
  const rawPath = join(workDir, "raw.bin");
  const raw: RawBlob = { path: rawPath, size: imageBytes, digest: await makeRandomFile(rawPath, imageBytes) };
  console.log(`image: layer ${image.layerDigest} ${image.layerBytes} bytes; raw blob ${raw.size} bytes; made in ${((performance.now() - made) / 1000).toFixed(1)} s in ${workDir}`);

  const results: Record<RegistryKind, RoundResult[]> = { capstan: [], distribution: [] };
  const floor: FloorResult[] = [];
  for (let r = 0; r < rounds; r++) {
    // capstan and distribution swap places every round; the sink goes first or last.
    const order = legOrders[r % legOrders.length]!.filter((k) => k !== "floor" || withFloor);
    for (const kind of order) {
      if (kind === "floor") floor.push(await floorRound(image, raw, policy, r));
      else results[kind].push(await oneRound(kind, image, raw, policy, r));
    }
  }

  const figures: Record<string, number> = { image_layer_bytes: image.layerBytes, rounds, parallel_blobs: parallel, blob_bytes: blobBytes, blob_batches_per_round: blobRounds };
  const med: Record<RegistryKind, { push: number; pull: number; batch: number; rawGet: number; rawPush: number }> = {} as never;
  for (const kind of kinds) {
    const rs = results[kind];
    const push = median(rs.map((x) => x.pushS));
    const pull = median(rs.map((x) => x.pullS));
    const batch = median(rs.flatMap((x) => x.batchS));
    const rawGet = median(rs.map((x) => x.rawGetS));
    const rawPush = median(rs.map((x) => x.rawPushS));
    med[kind] = { push, pull, batch, rawGet, rawPush };
    figures[`${kind}_push_s`] = push;
    figures[`${kind}_push_s_min`] = Math.min(...rs.map((x) => x.pushS));
    figures[`${kind}_push_s_max`] = Math.max(...rs.map((x) => x.pushS));
    figures[`${kind}_push_mib_per_s`] = image.layerBytes / MB / push;
    figures[`${kind}_pull_s`] = pull;
    figures[`${kind}_pull_s_min`] = Math.min(...rs.map((x) => x.pullS));
    figures[`${kind}_pull_s_max`] = Math.max(...rs.map((x) => x.pullS));
    figures[`${kind}_pull_mib_per_s`] = image.layerBytes / MB / pull;
    figures[`${kind}_raw_get_s`] = rawGet;
    figures[`${kind}_raw_get_mib_per_s`] = image.layerBytes / MB / rawGet;
    figures[`${kind}_raw_push_s`] = rawPush;
    figures[`${kind}_raw_push_mib_per_s`] = raw.size / MB / rawPush;
    figures[`${kind}_raw_get_registry_cpu_s`] = median(rs.map((x) => x.rawGetCpuS));
    figures[`${kind}_raw_push_registry_cpu_s`] = median(rs.map((x) => x.rawPushCpuS));
    figures[`${kind}_push_registry_cpu_s`] = median(rs.map((x) => x.pushCpuS));
    figures[`${kind}_pull_registry_cpu_s`] = median(rs.map((x) => x.pullCpuS));
    figures[`${kind}_rss_before_push_mib`] = median(rs.map((x) => x.rssBeforePush)) / MB;
    figures[`${kind}_push_peak_rss_mib`] = Math.max(...rs.map((x) => x.pushPeakRss)) / MB;
    figures[`${kind}_push_vmhwm_mib`] = Math.max(...rs.map((x) => x.pushHwm)) / MB;
    figures[`${kind}_blobs${parallel}_batch_ms`] = batch * 1000;
    figures[`${kind}_blobs${parallel}_batch_ms_p90`] = percentile(rs.flatMap((x) => x.batchS), 90) * 1000;
    figures[`${kind}_blobs_per_s`] = parallel / batch;
  }
  if (floor.length > 0) {
    figures.floor_push_s = median(floor.map((x) => x.pushS));
    figures.floor_pull_s = median(floor.map((x) => x.pullS));
    figures.floor_push_mib_per_s = image.layerBytes / MB / figures.floor_push_s;
    figures.floor_pull_mib_per_s = image.layerBytes / MB / figures.floor_pull_s;
    figures.floor_raw_get_s = median(floor.map((x) => x.rawGetS));
    figures.floor_raw_push_s = median(floor.map((x) => x.rawPushS));
  }
  const codeAtEnd = await codeState(registryCodePaths);
  const codeNotes =
    codeAtEnd.hash === codeAtStart.hash
      ? [`capstan registry code: ${describeCodeState(codeAtStart)}`]
      : [
          `WARNING: the registry code changed during the run, so the rounds did not all run the same code`,
          `capstan registry code at the start: ${describeCodeState(codeAtStart)}`,
          `capstan registry code at the end: ${describeCodeState(codeAtEnd)}`,
        ];
  figures.load_avg_1m_start = load1Start;
  figures.load_avg_1m_end = loadavg()[0]!;

  const paired = (f: (x: RoundResult) => number) => median(results.capstan.map((c, i) => f(results.distribution[i]!) / f(c)));
  const ratios: Record<string, number> = {
    capstan_push_throughput_over_distribution: med.distribution.push / med.capstan.push,
    capstan_pull_throughput_over_distribution: med.distribution.pull / med.capstan.pull,
    capstan_blob_push_throughput_over_distribution: med.distribution.batch / med.capstan.batch,
    capstan_raw_get_throughput_over_distribution: med.distribution.rawGet / med.capstan.rawGet,
    capstan_raw_push_throughput_over_distribution: med.distribution.rawPush / med.capstan.rawPush,
    capstan_push_throughput_over_distribution_paired: paired((x) => x.pushS),
    capstan_pull_throughput_over_distribution_paired: paired((x) => x.pullS),
    capstan_push_peak_rss_over_distribution: figures.capstan_push_peak_rss_mib! / figures.distribution_push_peak_rss_mib!,
  };
  if (floor.length > 0) {
    // What a registry costing nothing would score: the most the targets can get with this client.
    ratios.push_ratio_ceiling = med.distribution.push / figures.floor_push_s!;
    ratios.pull_ratio_ceiling = med.distribution.pull / figures.floor_pull_s!;
  }
  const targets: Target[] = [
    { name: "capstan_push_throughput_over_distribution", kind: "min", value: 1.2 },
    { name: "capstan_pull_throughput_over_distribution", kind: "min", value: 1.2 },
  ];
  const verdicts = targets.map((t) => `${ratios[t.name]! >= t.value ? "MET" : "MISSED"}: ${t.name} = ${ratios[t.name]!.toFixed(3)} (target >= ${t.value})`);
  report({
    bench: "registry",
    figures,
    ratios,
    targets,
    notes: [
      ...verdicts,
      `capstan registry vs docker-registry (distribution 2.8.2), filesystem storage on one disk, no auth, log level warn, 127.0.0.1; each round a fresh process on an empty root`,
      `push/pull: skopeo copy oci: <-> docker:// of a ${(image.layerBytes / MB).toFixed(0)} MiB single-layer image, ${rounds} rounds, order cycled (capstan/distribution alternate); medians; *_paired = median of per-round ratios`,
      ...(floor.length > 0
        ? [`floor: the same skopeo push and pull against a sink that stores nothing (serves the layer from the image's file); *_ratio_ceiling = distribution / floor, the best ratio a registry could reach`]
        : []),
      `raw: node:http GET of the layer blob (bytes dropped) and POST + PUT ?digest= of a ${(raw.size / MB).toFixed(0)} MiB random blob streamed from a file; no target`,
      `blobs: ${parallel} x ${blobBytes / 1024} KiB at once (POST + PUT ?digest=), keep-alive node:http, ${blobRounds} batches per round after one warm-up batch; median batch`,
      `peak RSS: VmRSS every 50 ms during the push (max over rounds); VmHWM reset before the push via /proc/<pid>/clear_refs`,
      `load average (1 min) ${load1Start.toFixed(2)} at the start, ${figures.load_avg_1m_end.toFixed(2)} at the end`,
      ...codeNotes,
    ],
  });
}

await runBench(main, signals, cleanUp);
