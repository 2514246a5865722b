// capstan backup and capstan restore of a running platform, on both stores, with real processes and
// engines (docs/backup.md): groups A and B run; backup; A is deleted and C created; restore. Then A
// runs again, C's containers are gone, and B was not touched (same containers, same start time).
// The embedded-store part also checks one process per role (a second `capstan up` on the same file
// fails at once, naming the holder; `capstan secrets` on it runs), one compactor for the two
// processes, and that `capstan up` leads at once after kill -9 (docs/store.md, "One process per role").
import { chmodSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import { compactorLeaderKey } from "../../runtime/compactor.ts";
import { orchestratorLeaderKey } from "../../cli/orchestrator.ts";
import { runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { startEtcd } from "../helpers/etcd-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const run = uniqueName("bk").replace(/[^a-z0-9]/g, "");
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
}, 60_000);

const sleeper = (name: string) => ({
  name,
  namespace: run,
  numInstances: 1,
  restartPolicy: "always",
  pod: { namespace: run, network: "none", containers: [{ image: services.testImage, command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"] }] },
});

async function api(p: CapstanProcess, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(p.url + path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, text: await res.text() };
}

const containersOf = (group: string): Promise<ContainerSummary[]> =>
  cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${group}`] } });

async function runningOne(group: string): Promise<ContainerSummary | undefined> {
  const all = await containersOf(group);
  return all.length === 1 && all[0]!.state === "running" ? all[0] : undefined;
}

async function metric(p: CapstanProcess, line: string): Promise<boolean> {
  const text = await (await fetch(`${p.url}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  return text.split("\n").some((l) => l.trim() === line);
}
const leads = (p: CapstanProcess, key: string) => metric(p, `leader_election_master_status{name="${key}"} 1`);
/** Leading and ready (/readyz: the nodes are known, so a create can be placed). */
const leadsAndReady = async (p: CapstanProcess) => (await leads(p, orchestratorLeaderKey)) && (await api(p, "GET", "/readyz")).status === 200;

/** A, B running; backup; A deleted, C created; restore; then A back, C gone, B untouched. */
async function backupDeleteCreateRestore(store: string, start: () => Promise<CapstanProcess>, dir: string): Promise<void> {
  let p = await start();
  const [a, b, c] = ["a", "b", "c"].map((x) => `${run}.${x}${store.startsWith("etcd") ? "e" : "s"}`) as [string, string, string];
  cleanups.push(async () => {
    for (const g of [a, b, c]) for (const ct of await containersOf(g)) await cluster.remove(ct, { force: true, volumes: true }).catch(() => undefined);
  });
  for (const g of [a, b]) {
    const created = await api(p, "POST", "/api/podgroups", sleeper(g));
    expect(created.status, created.text).toBe(202);
  }
  const bBefore = await pollUntil(`${a} and ${b} running`, async () => ((await runningOne(a)) ? runningOne(b) : undefined), 60_000);
  const bStarted = (await cluster.inspect(bBefore)).status.startedAt;

  const file = join(dir, "platform.backup");
  const backup = await runCapstan(["backup", "-store", store, "-o", file]);
  expect(backup.code, backup.stderr).toBe(0);
  expect(backup.stderr).toMatch(/backed up \d+ keys of .* at revision \d+ to /);
  expect(statSync(file).mode & 0o777).toBe(0o600);

  expect((await api(p, "DELETE", `/api/podgroups?name=${a}`)).status).toBeLessThan(300);
  expect((await api(p, "POST", "/api/podgroups", sleeper(c))).status).toBe(202);
  await pollUntil(`${a} removed and ${c} running`, async () => (await containersOf(a)).length === 0 && (await api(p, "GET", `/api/podgroups?name=${a}`)).status === 404 && (await runningOne(c)), 60_000);

  const dry = await runCapstan(["restore", "-store", store, "-dry-run", file]);
  expect(dry.code, dry.stderr).toBe(0);
  expect(dry.stdout).toContain(`marked for deletion (their controllers remove them): podgroup ${c}`);
  const restore = await runCapstan(["restore", "-store", store, file]);
  expect(restore.code, restore.stderr).toBe(0);
  expect(restore.stdout).toMatch(/^restored .* puts, \d+ deletes in \d+ transactions/);

  await pollUntil(
    `${a} running again and ${c} removed`,
    async () => (await runningOne(a)) !== undefined && (await containersOf(c)).length === 0 && (await api(p, "GET", `/api/podgroups?name=${c}`)).status === 404,
    60_000,
  );
  const aStatus = JSON.parse((await api(p, "GET", `/api/podgroups?name=${a}`)).text) as { state: string };
  expect(aStatus.state).toBe("running");
  // B: the same container, never restarted.
  const bAfter = await containersOf(b);
  expect(bAfter.map((x) => x.id)).toEqual([bBefore.id]);
  expect((await cluster.inspect(bBefore)).status.startedAt).toBe(bStarted);

  // The controllers finished C's removal (its keys are gone): nothing is left for a restore to mark.
  const again = await runCapstan(["restore", "-store", store, "-dry-run", file]);
  expect(again.code, again.stderr).toBe(0);
  expect(again.stdout).not.toContain("marked for deletion");
  await p.stop();
  p = await start();
  await p.stop();
}

describe("capstan backup and restore of a running platform", () => {
  it("on the embedded store, with capstan up: one process per role, one compactor, leading at once after kill -9", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-backup-sqlite-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const data = join(dir, "data");
    const store = `sqlite://${data}/state.db`;
    const upArgs = ["-data", data, "-cluster", services.cluster, "-auth", "none", "-registry-web", "", "-refresh-interval", "2s"];
    const up = await startCapstan("up", upArgs);
    cleanups.push(() => up.stop());
    await pollUntil("capstan up to lead", () => leads(up, orchestratorLeaderKey), 30_000);
    // Private files: the directory it made 0700, the database and its WAL files 0600.
    expect(statSync(data).mode & 0o777).toBe(0o700);
    for (const f of ["state.db", "state.db-wal", "state.db-shm"]) expect(statSync(join(data, f)).mode & 0o777, f).toBe(0o600);

    // A second capstan up on the same file fails at once, naming the file and the holder.
    const second = await runCapstan(["up", "-web", "127.0.0.1:0", ...upArgs], { CAPSTAN_WEB: "", CAPSTAN_STORE: "" }, 30_000);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`${store.replace("sqlite://", "sqlite://")} is in use as orchestrator by process ${up.child.pid}`);
    expect(second.stderr).toContain(`${join(data, "state.db")}.orchestrator.lock`);

    // The secrets service is another role: it runs on the same file, and the two share one compactor.
    const secrets = await startCapstan("secrets", ["-store", store, "-cluster", services.cluster, "-auth", "none"]);
    cleanups.push(() => secrets.stop());
    await pollUntil("one compactor between the two", async () => (await leads(up, compactorLeaderKey)) !== (await leads(secrets, compactorLeaderKey)), 30_000);
    expect((await leads(up, compactorLeaderKey)) && (await leads(secrets, compactorLeaderKey))).toBe(false);
    await secrets.stop();

    // kill -9, and a new capstan up on the same directory leads at once (not after the dead one's 15 s lease).
    up.child.kill("SIGKILL");
    await up.exited;
    // A data directory others may read (made by hand, or by an older release) is made private again.
    chmodSync(data, 0o755);
    const killedAt = Date.now();
    let restarted: CapstanProcess | undefined;
    await backupDeleteCreateRestore(
      store,
      async () => {
        const p = await startCapstan("up", upArgs);
        cleanups.push(() => p.stop());
        if (!restarted) {
          restarted = p;
          await pollUntil("the restarted capstan up to lead", () => leads(p, orchestratorLeaderKey), 30_000, 50);
          // Before the role lock it followed the dead process's 15 s lease, renewed every 5 s: at least 10 s.
          expect(Date.now() - killedAt).toBeLessThan(9_500);
          expect(statSync(data).mode & 0o777).toBe(0o700);
        }
        await pollUntil("capstan up to lead and be ready", () => leadsAndReady(p), 30_000, 50);
        return p;
      },
      dir,
    );
  }, 240_000);

  it("on a private etcd, with capstan orchestrator", async () => {
    const etcd = await startEtcd();
    cleanups.push(() => etcd.stop());
    const dir = mkdtempSync(join(tmpdir(), "capstan-backup-etcd-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const store = `etcd://${etcd.endpoint}`;
    await backupDeleteCreateRestore(
      store,
      async () => {
        const p = await startCapstan("orchestrator", ["-store", store, "-cluster", services.cluster, "-auth", "none", "-refresh-interval", "2s"]);
        cleanups.push(() => p.stop());
        await pollUntil("the orchestrator to lead and be ready", () => leadsAndReady(p), 30_000, 50);
        return p;
      },
      dir,
    );
  }, 240_000);
});
