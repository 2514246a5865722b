// bench:sqlite-restart: how long `capstan up` on the embedded store is leaderless after kill -9
// (docs/store.md, "One process per role").
//
// One `capstan up` on a fresh SQLite data directory against the real engines. Each round SIGKILLs
// it once it leads, starts a new one on the same directory at once, and times from the kill to the
// new process's "elected leader" log line for the orchestrator's key (its own clock, the same
// machine's); also from the new process's spawn. Median, lowest and highest of
// BENCH_SQLITE_RESTART_ROUNDS rounds (default 10).
//
// Before the role lock, the new process followed its dead predecessor's lease until it expired
// (-lease-duration, 15 s): about 10 s measured by hand. Now the OS lock proves the predecessor gone
// and the new process takes the leader key at once, so what is left is the process's own start.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { orchestratorLeaderKey } from "../cli/orchestrator.ts";
import { capstanBin } from "../test/helpers/capstan-process.ts";
import { pollUntil } from "../test/helpers/poll.ts";
import { loadServices } from "../test/helpers/services.ts";
import { percentile, report } from "./lib/report.ts";

const rounds = Number(process.env.BENCH_SQLITE_RESTART_ROUNDS ?? 10);
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`BENCH_SQLITE_RESTART_ROUNDS must be a positive integer (got ${process.env.BENCH_SQLITE_RESTART_ROUNDS})`);
const baselineMs = 10_000;

const services = loadServices();
const data = mkdtempSync(join(tmpdir(), "capstan-bench-sqlite-restart-"));

interface Up {
  spawnedAt: number;
  kill(): Promise<void>;
  electedAt(): number | undefined;
}

function startUp(): Up {
  const spawnedAt = Date.now();
  const child = spawn(capstanBin, ["up", "-web", "127.0.0.1:0", "-registry-web", "", "-data", data, "-cluster", services.cluster, "-auth", "none"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, CAPSTAN_WEB: "", CAPSTAN_ADMIN_TOKEN: "", CAPSTAN_STORE: "", CAPSTAN_CLUSTER: "" },
  });
  let log = "";
  child.stdout.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  return {
    spawnedAt,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    electedAt() {
      for (const line of log.split("\n")) {
        if (!line.includes('"msg":"elected leader"') || !line.includes(`"election":"${orchestratorLeaderKey}"`)) continue;
        try {
          return (JSON.parse(line) as { time: number }).time;
        } catch {
          // cut by the pipe: the next read has it whole
        }
      }
      if (child.exitCode !== null) throw new Error(`capstan up exited with ${child.exitCode}:\n${log}`);
      return undefined;
    },
  };
}

const sinceKill: number[] = [];
const sinceSpawn: number[] = [];
let up = startUp();
try {
  await pollUntil("the first capstan up to lead", async () => up.electedAt(), 60_000, 50);
  for (let round = 1; round <= rounds; round++) {
    // Let it run a moment (a renewal or two of its lease) before the crash.
    await new Promise((r) => setTimeout(r, 1_000));
    const killedAt = Date.now();
    await up.kill();
    up = startUp();
    const electedAt = await pollUntil("the restarted capstan up to lead", async () => up.electedAt(), 60_000, 20);
    sinceKill.push(electedAt - killedAt);
    sinceSpawn.push(electedAt - up.spawnedAt);
    console.log(`round ${round}: kill -9 -> leading in ${electedAt - killedAt} ms (${electedAt - up.spawnedAt} ms after the new process was spawned)`);
  }
} finally {
  await up.kill();
  rmSync(data, { recursive: true, force: true });
}

const median = percentile(sinceKill, 50);
const { met } = report({
  bench: "sqlite-restart",
  figures: {
    rounds,
    kill_to_leading_median_ms: median,
    kill_to_leading_min_ms: Math.min(...sinceKill),
    kill_to_leading_max_ms: Math.max(...sinceKill),
    spawn_to_leading_median_ms: percentile(sinceSpawn, 50),
    baseline_before_role_lock_ms: baselineMs,
  },
  ratios: { median_over_baseline: median / baselineMs },
  targets: [{ name: "kill_to_leading_median_ms", kind: "max", value: 5_000 }],
  notes: [
    "capstan up on a SQLite data directory, real engines; SIGKILL, then a new capstan up on the same directory at once; kill to its \"elected leader\" log line for /platform/orchestrator/leader",
    "baseline: before the role lock the new process followed the dead one's lease until it expired (-lease-duration 15s): about 10 s",
    `every round (from the kill): ${sinceKill.join(", ")} ms; from the spawn: ${sinceSpawn.join(", ")} ms`,
  ],
});
process.exitCode = met ? 0 : 1;
