// bench:failover: how long the orchestrators are leaderless when the leader dies (docs/high-availability.md).
//
// Two `capstan orchestrator` processes on a private three-member etcd cluster, against the real
// engines, with -lease-duration BENCH_FAILOVER_LEASE (default 15s, the option's default). Each round
// waits a random part of the renewal interval (so the kill falls anywhere between two renewals, as
// a crash does), SIGKILLs the leader, and times from the kill to the other one's "elected leader"
// log line (its own clock, the same machine's). Then a fresh replica is started as the next
// follower. Median, lowest and highest of BENCH_FAILOVER_ROUNDS rounds (default 10).
//
// The bound is the lease: a SIGKILLed leader cannot revoke its lease, so the store expires it at
// most one lease after the last renewal it received (etcd checks expiries every 500 ms), and the
// follower, which watches the leader key, campaigns the moment the key goes.
import { startEtcdCluster } from "../test/helpers/etcd-process.ts";
import { leaderOf, orchestratorArgs, startOrchestrator, type Orchestrator } from "../test/helpers/ha-orchestrators.ts";
import { pollUntil } from "../test/helpers/poll.ts";
import { loadServices } from "../test/helpers/services.ts";
import { parseDuration } from "../runtime/duration.ts";
import { percentile, report } from "./lib/report.ts";

const rounds = Number(process.env.BENCH_FAILOVER_ROUNDS ?? 10);
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`BENCH_FAILOVER_ROUNDS must be a positive integer (got ${process.env.BENCH_FAILOVER_ROUNDS})`);
const lease = process.env.BENCH_FAILOVER_LEASE ?? "15s";
const leaseMs = parseDuration(lease);

const services = loadServices();
const etcd = await startEtcdCluster();
const running: Orchestrator[] = [];
const alive = () => running.filter((o) => o.child.exitCode === null && o.child.signalCode === null);
const start = async () => {
  const o = await startOrchestrator(orchestratorArgs(etcd.storeUrl, services, lease));
  running.push(o);
  return o;
};

const times: number[] = [];
try {
  await start();
  await pollUntil("the first orchestrator to lead", () => running[0]!.leading(), 30_000, 50);
  for (let round = 1; round <= rounds; round++) {
    while (alive().length < 2) await start();
    const leader = await pollUntil("a leader", () => leaderOf(alive()), 3 * leaseMs, 50);
    const follower = alive().find((o) => o !== leader)!;
    // Anywhere between two renewals (one every third of the lease).
    await new Promise((r) => setTimeout(r, Math.random() * (leaseMs / 3)));
    const killedAt = Date.now();
    await leader.kill();
    const electedAt = await pollUntil("the follower to be elected", async () => follower.electedAt(), 3 * leaseMs, 20);
    times.push(electedAt - killedAt);
    console.log(`round ${round}: leader killed -> other leading in ${electedAt - killedAt} ms`);
  }
} finally {
  await Promise.all(running.map((o) => o.kill()));
  await etcd.stop();
}

const median = percentile(times, 50);
const { met } = report({
  bench: "failover",
  figures: {
    rounds,
    lease_ms: leaseMs,
    failover_median_ms: median,
    failover_min_ms: Math.min(...times),
    failover_max_ms: Math.max(...times),
  },
  ratios: { median_over_lease: median / leaseMs, max_over_lease: Math.max(...times) / leaseMs },
  targets: [{ name: "median_over_lease", kind: "max", value: 1 }],
  notes: [
    `two orchestrators on a three-member etcd cluster on loopback, -lease-duration ${lease}; SIGKILL of the leader at a random point between renewals to the other's "elected leader" log line`,
    `every round: ${times.join(", ")} ms`,
  ],
});
process.exitCode = met ? 0 : 1;
