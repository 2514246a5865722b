// Crash safety: the orchestrator (a child process running the PodGroup controller) is SIGKILLed in
// the middle of a rolling update and in the middle of a scale-up, at moments picked from the
// engines' own event streams; after a restart the group must converge with exactly the right
// containers: one per instance, at the right version, no duplicates, no orphans.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ContainerEvent, Subscription } from "../../../adapters/cluster/index.ts";
import { labelKeys } from "../../../controllers/podgroup/naming.ts";
import { groupSpec, Harness, services, timeAndPass, type Actual } from "./harness.ts";

const fixture = fileURLToPath(new URL("./fixtures/orchestrator.ts", import.meta.url));
const h = new Harness();
const children = new Set<ChildProcess>();
/** Passes of each group a child orchestrator reported finished ({"event":"passes"} lines). */
const passesOf = new Map<ChildProcess, Map<string, number>>();

/**
 * Start an orchestrator process; resolves once its caches have synced. The container cache is
 * leader-only, so that is also once it leads: after a SIGKILL, when the killed process's lease
 * has expired (its TTL is 3 s), well within the 30 s allowed here.
 */
async function startOrchestrator(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", fixture], {
    // An update wait long enough that "killed in the wait" holds even on a loaded machine.
    env: { ...process.env, ETCD_ENDPOINTS: services.etcdEndpoints.join(","), CLUSTER: services.cluster, ROOT: h.root, UPDATE_WAIT_MS: "1500" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  const lines = createInterface({ input: child.stdout! });
  const passes = new Map<string, number>();
  passesOf.set(child, passes);
  lines.on("line", (line) => {
    let report: { event?: string; group?: string; count?: number } = {};
    try {
      report = JSON.parse(line) as typeof report;
    } catch {
      return; // not one of the fixture's reports (a log line)
    }
    if (report.event === "passes" && report.group !== undefined && report.count !== undefined) passes.set(report.group, report.count);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("orchestrator did not sync within 30 s")), 30_000);
    lines.on("line", (line) => {
      if (line.includes('"synced"')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => reject(new Error(`orchestrator exited early with ${code}`)));
  });
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
}

/**
 * Wait until `ms` have passed since `since` and a pass of `group` that `child` began after that has
 * finished (harness.ts, timeAndPass; its reports lag by the 20 ms interval and the pipe).
 */
async function childWaitedAndLooked(child: ChildProcess, group: string, since: number, ms: number): Promise<void> {
  const passes = passesOf.get(child)!;
  await timeAndPass({ what: `${ms} ms and a pass of ${group}`, finished: () => passes.get(group) ?? 0, since, ms, lagMs: 250 });
}

/** Resolves with the first container event of `group` that `match` accepts; the stream is live once this returns. */
async function onEvent(group: string, match: (e: ContainerEvent) => boolean): Promise<{ seen: Promise<ContainerEvent>; sub: Subscription }> {
  let resolve!: (e: ContainerEvent) => void;
  const seen = new Promise<ContainerEvent>((r) => (resolve = r));
  const sub = await h.subscribe(
    (ev) => {
      if (ev.type === "container" && match(ev)) resolve(ev);
    },
    { filters: { label: [`${labelKeys.podGroup}=${group}`] } },
  );
  return { seen, sub };
}

/** Exactly one running container per instance 1..n, all at `version`; nothing else of the group. */
function expectExact(actual: Actual[], n: number, version: number): void {
  expect(actual.map((a) => [a.instance, a.version, a.c.state])).toEqual(Array.from({ length: n }, (_, i) => [i + 1, version, "running"]));
}

afterEach(async () => {
  await Promise.all([...children].map(kill));
});

afterAll(async () => {
  await h.cleanup();
});

describe("crash safety", () => {
  it("SIGKILL during a rolling update (in the update wait, then mid-deploy): converges to v2, one container per instance", async () => {
    const name = h.name("crashroll");
    await h.put(groupSpec(name, { numInstances: 4 }));
    let child = await startOrchestrator();
    await h.converged(name, 4, 1);

    // Sampled throughout, crashes included: never two instances without a running container.
    let sampling = true;
    let worst = 0;
    const sampler = (async () => {
      while (sampling) {
        const a = await h.actual(name).catch(() => undefined);
        if (a) {
          const up = new Set(a.filter((x) => x.c.state === "running").map((x) => x.instance));
          worst = Math.max(worst, [1, 2, 3, 4].filter((i) => !up.has(i)).length);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    // Kill 1: right after instance 2's v1 container is stopped and kept as its previous container
    // (renamed; the update wait has begun).
    let w = await onEvent(name, (e) => (e.action === "destroy" || e.action === "rename") && e.labels[labelKeys.instance] === "2" && e.labels[labelKeys.version] === "1");
    await h.updatePod(name, (pod) => (pod.containers[0]!.env = ["V=2"]));
    await w.seen;
    await kill(child);
    await w.sub.unsubscribe();
    let mid = await h.actual(name);
    expect(mid.filter((a) => a.instance === 2)).toEqual([]); // killed in the gap
    expect(mid.filter((a) => a.version === 2).map((a) => a.instance)).toEqual([1]);

    // Kill 2: the moment instance 3's v2 container is created (before it is started or recorded).
    child = await startOrchestrator();
    w = await onEvent(name, (e) => e.action === "create" && e.labels[labelKeys.instance] === "3" && e.labels[labelKeys.version] === "2");
    await w.seen;
    await kill(child);
    await w.sub.unsubscribe();
    mid = await h.actual(name);
    expect(mid.filter((a) => a.instance === 3).map((a) => a.version)).toEqual([2]);
    expect(mid.filter((a) => a.instance === 4).map((a) => a.version)).toEqual([1]);

    child = await startOrchestrator();
    const final = await h.converged(name, 4, 2, 30_000);
    sampling = false;
    await sampler;
    expect(worst).toBe(1);
    expectExact(final, 4, 2);
    // No duplicates appear later either: a refresh or two after convergence, and a pass since.
    await childWaitedAndLooked(child, name, Date.now(), 2_500);
    expectExact(await h.actual(name), 4, 2);
    await kill(child);
  }, 120_000); // a restarted orchestrator first waits out the killed one's lease

  it("SIGKILL in the middle of a scale-up to 6: converges with exactly 6, no duplicates, no orphans", async () => {
    const name = h.name("crashscale");
    await h.put(groupSpec(name, { numInstances: 1 }));
    let child = await startOrchestrator();
    const one = await h.converged(name, 1, 1);

    const w = await onEvent(name, (e) => e.action === "create");
    await h.patch(name, (s) => (s.numInstances = 6));
    await w.seen;
    await kill(child);
    await w.sub.unsubscribe();
    const mid = await h.actual(name);
    expect(mid.length).toBeGreaterThan(1);
    expect(mid.filter((a) => a.c.state === "running").length).toBeLessThan(6); // really killed mid-way

    child = await startOrchestrator();
    const final = await h.converged(name, 6, 1, 30_000);
    expectExact(final, 6, 1);
    expect(final[0]!.c.id).toBe(one[0]!.c.id);
    // Containers created before the kill were adopted, not replaced.
    for (const m of mid) expect(final.some((f) => f.c.id === m.c.id)).toBe(true);
    // No duplicates appear later either: a refresh or two after convergence, and a pass since.
    await childWaitedAndLooked(child, name, Date.now(), 2_500);
    expectExact(await h.actual(name), 6, 1);
    await kill(child);
  }, 120_000); // a restarted orchestrator first waits out the killed one's lease
});
