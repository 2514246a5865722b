// A drift survives an orchestrator restart mid-way. The pods ignore SIGTERM (busybox sleep as PID
// 1), so removing one on `from` takes its kill timeout (10 s): the orchestrator is stopped while
// the moves are under way (recorded, pods being stopped), then started again: once in process
// (the manager's stop, which aborts the reconcile), once as `capstan orchestrator` killed with
// SIGKILL (nothing is aborted; the next process leads once the dead one's lease expires). The task
// must complete with each moved instance exactly once on the other node, with the drift count the
// first run recorded (1, not 2), nothing of the group left on `from` and no duplicate anywhere.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { freePort } from "../../../cli/free-port.ts";
import { useDriftHarness, services } from "./harness.ts";

const capstan = fileURLToPath(new URL("../../../cli/bin/capstan.mjs", import.meta.url));

const h = useDriftHarness({}, 90_000);

describe("drift across an orchestrator restart", () => {
  it("completes after the restart: no duplicates, nothing left on `from`, drift counted once", async () => {
    const name = h.name("durable");
    await h.create(name, 4, { killTimeout: 10 }, { command: ["sleep", "3600"] });
    const before = await h.running(name, 4);
    const moving = before.filter((a) => a.c.node === "n1").map((a) => a.instance);
    expect(moving).toHaveLength(2);

    const res = await h.drift({ cmd: "drift", from: "n1", pg: name });
    expect(res.status).toBe(202);
    // The moves are recorded (status "drifting") before the old pods are touched; stop then.
    const s = await h.until("drifting", async () => {
      const st = await h.status(name);
      return moving.every((i) => st?.pods.find((p) => p.instanceNo === i)?.state === "drifting") ? st : undefined;
    }, 15_000, 50);
    expect(s.state).toBe("degraded");
    await h.stopOrchestrator();
    expect((await h.tasks()).filter((t) => t.kind === "drift")).toHaveLength(1); // still pending: durable

    await h.startOrchestrator();
    await h.driftTasksDone(60_000);
    const after = await h.running(name, 4, 30_000);
    expect(after.map((a) => a.c.node)).toEqual(["n2", "n2", "n2", "n2"]);
    for (const a of after) expect(a.drift).toBe(moving.includes(a.instance) ? 1 : 0);
    // Exactly one container per instance on any node (running() counted all states), none on n1.
    expect((await h.actual(name)).filter((a) => a.c.node === "n1")).toEqual([]);
    const status = (await h.status(name))!;
    expect(status.pods.map((p) => p.driftCount)).toEqual([1, 2, 3, 4].map((i) => (moving.includes(i) ? 1 : 0)));
  }, 120_000);

  it("completes after the orchestrator process is killed (SIGKILL) mid-drift", async () => {
    await h.stopOrchestrator();
    const child = await orchestratorProcess();
    try {
      const name = h.name("killed");
      await h.create(name, 4, { killTimeout: 10 }, { command: ["sleep", "3600"] });
      const before = await h.running(name, 4);
      const moving = before.filter((a) => a.c.node === "n2").map((a) => a.instance);
      expect(moving).toHaveLength(2);
      expect((await h.drift({ cmd: "drift", from: "n2", pg: name })).status).toBe(202);
      await h.until("drifting", async () => {
        const st = await h.status(name);
        return moving.every((i) => st?.pods.find((p) => p.instanceNo === i)?.state === "drifting");
      }, 15_000, 50);
      await kill(child, "SIGKILL");

      await h.startOrchestrator(); // leads once the killed process's lease (15 s) has expired
      await h.driftTasksDone(90_000);
      const after = await h.running(name, 4, 30_000);
      expect(after.map((a) => a.c.node)).toEqual(["n1", "n1", "n1", "n1"]);
      for (const a of after) expect(a.drift).toBe(moving.includes(a.instance) ? 1 : 0);
    } finally {
      await kill(child, "SIGKILL");
    }
  }, 150_000);
});

/** `capstan orchestrator` on the harness's etcd (-auth none on loopback: the harness calls without a token); h.base points at it once it answers. */
async function orchestratorProcess(): Promise<ChildProcess> {
  const port = await freePort();
  const args = ["orchestrator", "-web", `127.0.0.1:${port}`, "-store", `etcd://${h.etcd!.endpoint}`, "-cluster", services.cluster, "-auth", "none"];
  const child = spawn(process.execPath, [capstan, ...args, "-update-wait", "500ms", "-refresh-interval", "2s"], { stdio: "ignore" });
  h.base = `http://127.0.0.1:${port}`;
  await h.until("orchestrator process leading", async () => (await h.nodes()).length === 2, 30_000, 200);
  return child;
}

async function kill(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill(signal);
  await exited;
}

