// Build, release and push of a small app (docs/build.md; docs/benchmarks.md): Capstan's build
// pipeline (adapters/build/pipeline.ts: the engine calls `capstan build` and `capstan release`
// make, run in this process) against the same steps by hand with the `docker` CLI, on engine n1,
// in the same run, pushing to a `capstan registry` (no auth, loopback) started afresh for every
// leg, so each push sends every layer.
//
// The app: busybox base, a 3-line build script writing a file from the source, release.copy of
// that file into a fresh busybox. Cold: a new source each leg (nothing cached). Hand steps, as a
// user would type them: docker create (script as sh -c), docker cp of the source, docker start -a,
// docker commit; docker create of the build image, docker cp out, docker create of dest_base,
// docker cp in, docker commit; docker push of the release and of the build image; docker rm of
// the containers. Capstan also makes and pushes the meta image (the definition file).
// Warm: `build` again with nothing changed (the cache hit: no container runs).
//
// Targets, judged as whole commands, as a user runs them: Capstan cold (`capstan build` +
// `capstan release`) <= 1.2 x the hand steps; warm `capstan build` <= 10 % of cold. A third leg
// runs `capstan build` itself, as a process, cold and then warm; its release runs in this process
// (a `capstan release` process needs a console for the user's credentials), plus the start of
// `capstan release -h`, which loads what `capstan release` loads.
//
// Two floors under the warm command, spawned the same way in the same run: `node -e ""` (Node
// starting and doing nothing) and bench/build/warm-floor.cjs (the least a warm build can be in
// Node: read and hash the source with Node's own modules, ask the engine once; no YAML, no schema,
// no Docker client).
//
//   npm run bench:build   [BENCH_BUILD_ROUNDS=3]
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { connectEngine, removeContainer } from "../adapters/build/docker.ts";
import { build, release, type PipelineContext } from "../adapters/build/pipeline.ts";
import { labels } from "../adapters/build/plan.ts";
import { loadServices } from "../test/helpers/services.ts";
import { capstanBin, capstanEnv } from "./lib/capstan-process.ts";
import { percentile, report } from "./lib/report.ts";
import { startRegistry } from "./registry/servers.ts";

const run = promisify(execFile);
const rounds = Number(process.env.BENCH_BUILD_ROUNDS ?? 3);
const services = loadServices();
const engine = services.engines.n1!;
const base = services.testImage;
const script = ["mkdir -p out", 'echo "built from $(cat src.txt)" > out/hello.txt', "cat out/hello.txt"];

const definition = (app: string) => `appname: ${app}
build:
  base: ${base}
  script:
${script.map((l) => `    - ${JSON.stringify(l)}`).join("\n")}
release:
  dest_base: ${base}
  copy:
    - src: out/hello.txt
      dest: /hello.txt
`;

const docker = (args: string[]) => run("docker", ["-H", engine, ...args], { timeout: 120_000, env: { ...process.env, DOCKER_CONFIG: dockerConfig } });
let dockerConfig = "";

async function source(dir: string, app: string): Promise<string> {
  const src = join(dir, app);
  await mkdir(src, { recursive: true });
  await writeFile(join(src, "app.yaml"), definition(app));
  await writeFile(join(src, "src.txt"), `${app} ${Math.random()}\n`);
  return src;
}

async function byHand(dir: string, app: string, registry: string): Promise<number> {
  const src = await source(dir, app);
  const repo = `${registry}/${app}`;
  const t0 = performance.now();
  const c1 = (await docker(["create", "--label", `${labels.app}=${app}`, "-w", "/platform/app", base, "sh", "-c", script.join(" && ")])).stdout.trim();
  await docker(["cp", `${src}/.`, `${c1}:/platform/app`]);
  await docker(["start", "-a", c1]);
  await docker(["commit", c1, `${repo}:build-1`]);
  const c2 = (await docker(["create", `${repo}:build-1`])).stdout.trim();
  await docker(["cp", `${c2}:/platform/app/out/hello.txt`, join(dir, `${app}-hello.txt`)]);
  const c3 = (await docker(["create", "--label", `${labels.app}=${app}`, base])).stdout.trim();
  await docker(["cp", join(dir, `${app}-hello.txt`), `${c3}:/hello.txt`]);
  await docker(["commit", c3, `${repo}:release-1`]);
  await docker(["push", `${repo}:release-1`]);
  await docker(["push", `${repo}:build-1`]);
  await docker(["rm", "-f", c1, c2, c3]);
  return performance.now() - t0;
}

/** The pipeline's context for the app in `src`, as `capstan build` and `capstan release` make it. */
function pipelineContext(app: string, src: string): PipelineContext {
  return { docker: connectEngine(engine), def: { appname: app, build: { base, script }, release: { destBase: base, copy: [{ src: "out/hello.txt", dest: "/hello.txt" }] } }, sourceDir: src, out: () => {}, scriptTimeoutMs: 120_000 };
}

/** The release's steps, pushed to `registry` (no auth: a loopback `capstan registry`). */
async function releaseAndPush(ctx: PipelineContext, registry: string): Promise<void> {
  await release(ctx, { registry, definitionFile: "app.yaml", definitionText: definition(ctx.def.appname), auth: { username: "bench", password: "x", serveraddress: registry }, pushTimeoutMs: 120_000 });
}

async function withCapstan(dir: string, app: string, registry: string): Promise<{ coldMs: number; warmMs: number }> {
  const src = await source(dir, app);
  const ctx = pipelineContext(app, src);
  const t0 = performance.now();
  const b = await build(ctx);
  if (!b || b.cached) throw new Error("the cold build was a cache hit");
  await releaseAndPush(ctx, registry);
  const coldMs = performance.now() - t0;
  const t1 = performance.now();
  const again = await build(ctx);
  const warmMs = performance.now() - t1;
  if (!again?.cached) throw new Error("the warm build was not a cache hit");
  return { coldMs, warmMs };
}

/** `capstan build` as a process, as a user runs it: its wall time, and whether it was a cache hit. */
async function buildCommand(src: string): Promise<{ ms: number; cached: boolean }> {
  const t0 = performance.now();
  const { stderr } = await run(process.execPath, [capstanBin, "build", "-f", join(src, "app.yaml"), "-docker", engine], { timeout: 120_000, env: capstanEnv() });
  const ms = performance.now() - t0;
  const cached = /unchanged, reused/.test(stderr);
  if (!cached && !/\bbuilt\b/.test(stderr)) throw new Error(`capstan build said neither built nor reused: ${stderr}`);
  return { ms, cached };
}

async function withCommands(dir: string, app: string, registry: string): Promise<{ coldMs: number; warmMs: number; releaseMs: number }> {
  const src = await source(dir, app);
  const ctx = pipelineContext(app, src);
  const cold = await buildCommand(src);
  if (cold.cached) throw new Error("the cold capstan build was a cache hit");
  const t0 = performance.now();
  await releaseAndPush(ctx, registry);
  const releaseMs = performance.now() - t0;
  const warm = await buildCommand(src);
  if (!warm.cached) throw new Error("the warm capstan build was not a cache hit");
  return { coldMs: cold.ms + releaseMs, warmMs: warm.ms, releaseMs };
}

/** A process spawned as `capstan build` is here: the median of 5 runs after one (which reads its files into the page cache). */
async function medianOfRuns(args: string[]): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 6; i++) {
    const t = performance.now();
    await run(process.execPath, args, { timeout: 30_000, env: capstanEnv() });
    if (i > 0) times.push(performance.now() - t);
  }
  return percentile(times, 50);
}

async function cleanImages(app: string): Promise<void> {
  const ids = (await docker(["images", "-q", "--filter", `label=${labels.app}=${app}`])).stdout.split("\n").filter(Boolean);
  const named = (await docker(["images", "--format", "{{.Repository}}:{{.Tag}}"])).stdout.split("\n").filter((n) => n.includes(`/${app}:`) || n.startsWith(`${app}:`));
  for (const ref of [...named, ...new Set(ids)]) await docker(["rmi", "-f", ref]).catch(() => {});
  // A parent goes only once its children are gone: a second pass for what is left.
  const left = (await docker(["images", "-q", "--filter", `label=${labels.app}=${app}`])).stdout.split("\n").filter(Boolean);
  for (const id of new Set(left)) await docker(["rmi", "-f", id]).catch(() => {});
  const containers = (await docker(["ps", "-aq", "--filter", `label=${labels.app}=${app}`])).stdout.split("\n").filter(Boolean);
  const e = connectEngine(engine);
  for (const c of containers) await removeContainer(e, c);
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-bench-build-"));
  dockerConfig = join(dir, "docker-config");
  await mkdir(dockerConfig);
  const hand: number[] = [];
  const cold: number[] = [];
  const warm: number[] = [];
  const commandsCold: number[] = [];
  const releaseSteps: number[] = [];
  const nodeStarts: number[] = [];
  const warmFloors: number[] = [];
  const commandsWarm: number[] = [];
  const apps: string[] = [];

  // The first start of a command makes its bundle (docs/cli.md): not counted.
  for (const command of ["build", "release"]) await run(process.execPath, [capstanBin, command, "-h"], { timeout: 60_000 });
  try {
    for (let r = 0; r < rounds; r++) {
      // A different leg goes first each round.
      const order: ("hand" | "capstan" | "commands")[] = ["hand", "capstan", "commands"];
      const legs = [...order.slice(r % 3), ...order.slice(0, r % 3)];
      for (const leg of legs) {
        const app = `benchbuild-${leg}-${process.pid}-${r}`;
        apps.push(app);
        const registry = await startRegistry("capstan", dir);
        try {
          if (leg === "hand") hand.push(await byHand(dir, app, registry.host));
          else if (leg === "commands") {
            const m = await withCommands(dir, app, registry.host);
            commandsCold.push(m.coldMs);
            releaseSteps.push(m.releaseMs);
            commandsWarm.push(m.warmMs);
          } else {
            const m = await withCapstan(dir, app, registry.host);
            cold.push(m.coldMs);
            warm.push(m.warmMs);
          }
        } finally {
          await registry.stop();
          await cleanImages(app);
        }
      }
      // The floors under the warm command, in the round's conditions (spawned as it is).
      const floorDir = await source(dir, `benchbuild-floor-${r}`);
      nodeStarts.push(await medianOfRuns(["-e", ""]));
      warmFloors.push(await medianOfRuns([join(import.meta.dirname, "build/warm-floor.cjs"), floorDir, engine, base]));
      console.log(
        `round ${r + 1}: hand ${hand.at(-1)!.toFixed(0)} ms; capstan steps cold ${cold.at(-1)!.toFixed(0)} ms, warm ${warm.at(-1)!.toFixed(0)} ms; capstan build process + release cold ${commandsCold.at(-1)!.toFixed(0)} ms, build process warm ${commandsWarm.at(-1)!.toFixed(0)} ms; floors ${nodeStarts.at(-1)!.toFixed(0)} / ${warmFloors.at(-1)!.toFixed(0)} ms`,
      );
    }
    // Each command's own start: node, the CLI and the command's modules (`capstan release -h` loads
    // what `capstan release` loads, then prints its usage).
    const buildStartMs = await medianOfRuns([capstanBin, "build", "-h"]);
    const releaseStartMs = await medianOfRuns([capstanBin, "release", "-h"]);
    const nodeStartMs = percentile(nodeStarts, 50);
    const warmFloorMs = percentile(warmFloors, 50);
    const [h, c, w] = [percentile(hand, 50), percentile(cold, 50), percentile(warm, 50)];
    // As a user runs them: `capstan build` then `capstan release` cold, `capstan build` warm.
    const coldCommands = percentile(commandsCold, 50) + releaseStartMs;
    const warmCommand = percentile(commandsWarm, 50);
    report({
      bench: "build",
      figures: {
        rounds,
        hand_ms_median: Math.round(h),
        capstan_cold_ms_median: Math.round(c),
        capstan_warm_ms_median: Math.round(w),
        capstan_release_steps_ms_median: Math.round(percentile(releaseSteps, 50)),
        build_command_start_ms: Math.round(buildStartMs),
        release_command_start_ms: Math.round(releaseStartMs),
        capstan_cold_commands_ms: Math.round(coldCommands),
        capstan_warm_command_ms: Math.round(warmCommand),
        floor_node_start_ms: Math.round(nodeStartMs),
        floor_warm_check_ms: Math.round(warmFloorMs),
        warm_target_ms: Math.round(coldCommands * 0.1),
      },
      ratios: {
        cold_over_hand: c / h,
        warm_over_cold: w / c,
        cold_commands_over_hand: coldCommands / h,
        warm_command_over_cold_commands: warmCommand / coldCommands,
        floor_node_start_over_cold_commands: nodeStartMs / coldCommands,
        floor_warm_check_over_cold_commands: warmFloorMs / coldCommands,
      },
      targets: [
        { name: "cold_commands_over_hand", kind: "max", value: 1.2 },
        { name: "warm_command_over_cold_commands", kind: "max", value: 0.1 },
      ],
      notes: [
        "capstan_cold/warm_ms: build + release + push of release, meta and build images, and build again, in this process (adapters/build/pipeline.ts): the steps without any command's start",
        "capstan_cold_commands_ms: a `capstan build` process (cold) + the release steps in this process + the start of `capstan release -h` (median of 5); capstan_warm_command_ms: a `capstan build` process with nothing changed",
        "not counted: release's console whoami round trip (loopback, a few ms)",
        "floors, each round the median of 5 after one unmeasured, then the median of the rounds: `node -e \"\"`, and bench/build/warm-floor.cjs (Node's own modules only: read + sha256 of the source, the base image and the image list from the engine), spawned as the warm command is",
        "hand: docker create/cp/start -a/commit, create/cp/create/cp/commit, push release and build, rm, with the docker CLI",
        `engine n1 (${engine}), base ${base}, a fresh capstan registry per leg`,
      ],
    });
  } finally {
    for (const app of apps) await cleanImages(app).catch(() => {});
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
