// The real `capstan orchestrator` on a fresh private etcd against the two shared engines, probed as
// a client that waits for readiness would (docs/orchestrator.md, "Readiness"):
//   - the first 200 of /readyz is followed by GET /api/nodes listing every engine of -cluster;
//   - a restart policy changed by PATCH ?cmd=replica applies to an instance that already exited
//     (never -> always: it is restarted; docs/podgroup-controller.md, "Restart policy");
//   - a deploy of more instances than Node's default listener limit, a scale-down and a delete
//     print no MaxListenersExceededWarning (nor does the start), in the process's stderr.
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster } from "../../adapters/cluster/index.ts";
import type { PodGroupWithSpec } from "../../api/resources/podgroup.ts";
import type { NodeRecord } from "../../api/resources/node.ts";
import { freePort } from "../../cli/free-port.ts";
import { capstanBin } from "../helpers/capstan-process.ts";
import { startEtcd, type EtcdProcess } from "../helpers/etcd-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const namespace = "e2estart";

describe("capstan orchestrator on a fresh etcd", () => {
  let etcd: EtcdProcess;
  let orchestrator: ChildProcess;
  let exited: Promise<number | null>;
  let stderr = "";
  let stdout = "";
  let base = "";
  let firstReady: { nodes: NodeRecord[]; afterMs: number } | undefined;
  const groups: string[] = [];

  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> => {
    const res = await fetch(base + path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, json: await res.json() };
  };
  const group = async (name: string) => (await call("GET", `/api/podgroups?name=${name}`)).json as PodGroupWithSpec;
  const containersOf = async (name: string) => cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${name}`] } });

  beforeAll(async () => {
    etcd = await startEtcd();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const started = Date.now();
    orchestrator = spawn(
      capstanBin,
      ["orchestrator", "-web", `127.0.0.1:${port}`, "-store", `etcd://${etcd.endpoint}`, "-cluster", services.cluster, "-auth", "none", "-update-wait", "1s", "-refresh-interval", "3s"],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CAPSTAN_WEB: "", CAPSTAN_STORE: "", CAPSTAN_CLUSTER: "", CAPSTAN_ADMIN_TOKEN: "" } },
    );
    orchestrator.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    orchestrator.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    exited = new Promise((resolve) => orchestrator.on("exit", (code) => resolve(code)));
    // Probe as a client that waits for readiness, from the moment the process starts; the nodes
    // are read right after the first 200, before anything else can happen.
    firstReady = await pollUntil(
      "the first 200 from /readyz",
      async () => {
        if (orchestrator.exitCode !== null) throw new Error(`the orchestrator exited: ${stderr}`);
        const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) });
        if (res.status !== 200) return undefined;
        const nodes = (await (await fetch(`${base}/api/nodes`, { signal: AbortSignal.timeout(2_000) })).json()) as NodeRecord[];
        return { nodes, afterMs: Date.now() - started };
      },
      60_000,
      20,
    );
  }, 90_000);

  afterAll(async () => {
    for (const name of groups) await call("DELETE", `/api/podgroups?name=${name}`).catch(() => undefined);
    await pollUntil("the test's containers removed", async () => {
      for (const name of groups) if ((await containersOf(name)).length > 0) return false;
      return true;
    }, 60_000, 250).catch(async () => {
      for (const name of groups) for (const c of await containersOf(name)) await cluster.remove(c, { force: true }).catch(() => undefined);
    });
    if (orchestrator && orchestrator.exitCode === null) {
      orchestrator.kill("SIGTERM");
      const timer = setTimeout(() => orchestrator.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    }
    await etcd?.stop();
  }, 120_000);

  it("the first 200 from /readyz comes with every node of -cluster listed", () => {
    const expected = cluster.nodeNames.sort();
    expect(firstReady!.nodes.map((n) => n.name).sort(), `ready after ${firstReady!.afterMs} ms`).toEqual(expected);
  });

  it("a restart policy changed from never to always restarts the instance that exited under never", async () => {
    const name = uniqueName("e2e-policy");
    groups.push(name);
    const created = await call("POST", "/api/podgroups", {
      name,
      namespace,
      numInstances: 1,
      restartPolicy: "never",
      pod: { namespace, network: "none", containers: [{ image: services.testImage, command: ["/bin/sh", "-c", "sleep 1; exit 3"] }] },
    });
    expect(created.status).toBe(202);
    await pollUntil("the instance failed under never", async () => {
      const pod = (await group(name)).pods[0];
      return pod?.state === "failed" && pod.lastError.includes("restart policy never: not restarted");
    }, 30_000);
    const patched = await call("PATCH", `/api/podgroups?name=${name}&cmd=replica&num_instances=1&restart_policy=always`);
    expect(patched.status).toBe(202);
    const restarted = await pollUntil("the instance restarted under always", async () => {
      const pod = (await group(name)).pods[0];
      return pod && pod.restartCount >= 1 ? pod : undefined;
    }, 20_000);
    expect(restarted.lastError).not.toContain("restart policy never");
    // The engine says so too: the container ran again (a new start after the first exit).
    const [container] = await containersOf(name);
    expect(container).toBeDefined();
  }, 60_000);

  it("a deploy, scale-down and delete of 24 instances print no MaxListenersExceededWarning", async () => {
    const name = uniqueName("e2e-many");
    groups.push(name);
    const stopsOnTerm = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
    const created = await call("POST", "/api/podgroups", {
      name,
      namespace,
      numInstances: 24,
      restartPolicy: "always",
      pod: { namespace, network: "none", containers: [{ image: services.testImage, command: ["/bin/sh", "-c", stopsOnTerm] }] },
    });
    expect(created.status).toBe(202);
    await pollUntil("24 instances running", async () => (await group(name)).pods.filter((p) => p.state === "running").length === 24, 90_000, 250);
    expect((await call("PATCH", `/api/podgroups?name=${name}&cmd=replica&num_instances=0`)).status).toBe(202);
    await pollUntil("scaled to 0", async () => (await containersOf(name)).length === 0, 90_000, 250);
    expect(stderr).not.toContain("MaxListenersExceededWarning");
    expect(stdout).not.toContain("MaxListenersExceededWarning");
    // Nor a pile-up of abort waiters behind the shared listener (runtime/abort-fanout.ts).
    expect(stderr).not.toContain("AbortWaitersWarning");
  }, 200_000);
});
