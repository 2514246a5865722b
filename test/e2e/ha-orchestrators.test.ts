// High availability for real (docs/high-availability.md): two `capstan orchestrator` processes on a
// private three-member etcd cluster, against the real engines. Only the leader reconciles, both
// serve the API; a leader SIGKILLed in the middle of a rolling update or a scale-up is replaced
// within the lease and the group converges with no duplicate and no orphan; the etcd Raft leader
// killed during a mass deploy loses no acknowledged write and redeploys nothing; an orchestrator cut
// off from etcd (a TCP proxy black-holes its connection) steps down before the other is elected,
// acts no more, and the store refuses its term's writes.
//
// Every claim is checked on the engines themselves (containers by label) and against the store.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import { fencedStore, NotLeaderError } from "../../adapters/store/fenced.ts";
import { openStore } from "../../adapters/store/open.ts";
import type { Store } from "../../adapters/store/store.ts";
import { orchestratorLeaderKey } from "../../cli/orchestrator.ts";
import { isPreviousContainer } from "../../controllers/shared/previous.ts";
import { startEtcdCluster, type EtcdCluster } from "../helpers/etcd-process.ts";
import {
  containersOf,
  leaderOf,
  orchestratorArgs,
  removeGroups,
  sleeperGroup,
  startOrchestrator,
  type Orchestrator,
} from "../helpers/ha-orchestrators.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.ts";

const services = loadServices();
const engines = DockerCluster.fromSpec(services.cluster);
/**
 * -lease-duration of every orchestrator here: a crashed leader is replaced within it. Its renew
 * deadline (2/3 of it, 4 s) stays above an etcd leader election on loopback (1-2 s), so an etcd
 * failover does not depose the orchestrator leader.
 */
const leaseMs = 6_000;
/** etcd expires a lease on its own 500 ms tick, then the follower's watch sees the key go. */
const takeoverSlackMs = 1_000;

interface PodStatusView {
  instanceNo: number;
  containers: { id: string }[];
}
interface GroupView {
  state: string;
  pods: PodStatusView[];
}

describe("two orchestrators on a three-member etcd cluster", () => {
  const prefix = uniqueName("ha");
  const groups: string[] = [];
  const group = (suffix: string) => {
    const name = `${prefix}-${suffix}`;
    groups.push(name);
    return name;
  };
  let etcd: EtcdCluster;
  let store: Store;
  const orchestrators: Orchestrator[] = [];
  let proxy: TcpProxy | undefined;

  const start = async (storeUrl = etcd.storeUrl) => {
    const o = await startOrchestrator(orchestratorArgs(storeUrl, services, `${leaseMs / 1000}s`, ["-refresh-interval", "5s"]));
    orchestrators.push(o);
    return o;
  };
  const alive = () => orchestrators.filter((o) => o.child.exitCode === null && o.child.signalCode === null);
  const logs = () => orchestrators.map((o, i) => `--- orchestrator ${i}\n${o.log().slice(-3000)}`).join("\n");
  const leader = () => pollUntil("one orchestrator to lead", () => leaderOf(alive()), 20_000, 50);
  /** Two replicas again: a leader that lost its lease (a loaded machine, an etcd failover) exits, as designed. */
  const pair = async () => {
    while (alive().length < 2) await start();
    return leader();
  };
  /** `o` while it runs, else any orchestrator that does (every replica serves the API). */
  const orAny = (o: Orchestrator) => () => (alive().includes(o) ? o : alive()[0]!);

  /** The group's own instances on the engines (kept "previous" containers of a rollout aside). */
  const instancesOf = async (name: string): Promise<ContainerSummary[]> => (await containersOf(engines, name)).filter((c) => !isPreviousContainer(c));

  /**
   * The group converged: `n` running containers, one per instance number, all at `version`, and
   * the status the API serves names exactly those containers. Answers the container ids.
   */
  const converged = (via: () => Orchestrator, name: string, n: number, version?: number) =>
    pollUntil(
      `${name} to run ${n} instance(s)${version ? ` at version ${version}` : ""}`,
      async () => {
        const cs = await instancesOf(name);
        if (cs.length !== n || cs.some((c) => c.state !== "running")) return false;
        if (version !== undefined && cs.some((c) => c.labels["io.capstan.version"] !== String(version))) return false;
        if (new Set(cs.map((c) => c.labels["io.capstan.instance"])).size !== n) return false;
        const { status, body } = await orAny(via())().api("GET", `/api/podgroups?name=${name}`);
        if (status !== 200) return false;
        const ids = (body as GroupView).pods.flatMap((p) => p.containers.map((c) => c.id)).sort();
        const onEngines = cs.map((c) => c.id).sort();
        return JSON.stringify(ids) === JSON.stringify(onEngines) && onEngines;
      },
      60_000,
      200,
    );

  beforeAll(async () => {
    etcd = await startEtcdCluster();
    store = openStore(etcd.storeUrl);
    // One after the other: the first is the leader, so which one leads is known.
    await start();
    await pollUntil("the first orchestrator to lead", () => orchestrators[0]!.leading(), 20_000, 50);
    await start();
  }, 60_000);

  afterAll(async () => {
    await Promise.all(orchestrators.map((o) => o.kill()));
    await proxy?.close();
    await removeGroups(engines, groups);
    await store?.close();
    await etcd?.stop();
  }, 60_000);

  it("only the leader reconciles; both serve the API, and a write through either is acted on", async () => {
    const [first, second] = orchestrators as [Orchestrator, Orchestrator];
    expect(await first.leading()).toBe(true);
    expect(await second.leading()).toBe(false);
    const viaFollower = group("via-follower");
    const viaLeader = group("via-leader");
    expect((await second.api("POST", "/api/podgroups", sleeperGroup(viaFollower, services.testImage, 2))).status).toBe(202);
    expect((await first.api("POST", "/api/podgroups", sleeperGroup(viaLeader, services.testImage, 2))).status).toBe(202);
    // The follower's API answers from its own informers, with the leader's status of both.
    await converged(() => second, viaFollower, 2);
    await converged(() => second, viaLeader, 2);
    await converged(() => first, viaFollower, 2);
    expect(await first.reconciles()).toBeGreaterThan(0);
    // The follower never ran a reconcile: it makes no engine call and writes no status.
    expect(await second.reconciles(), logs()).toBe(0);
    expect(await second.reconciles("dependency")).toBe(0);
    expect(await second.leading()).toBe(false);
  }, 90_000);

  it("a leader SIGKILLed in the middle of a rolling update is replaced within the lease; the update completes with no duplicate and no orphan", async () => {
    const name = group("rolling");
    const old = await pair();
    expect((await old.api("POST", "/api/podgroups", sleeperGroup(name, services.testImage, 3, ["V=1"]))).status).toBe(202);
    await converged(() => old, name, 3, 1);
    const patch = await old.api("PATCH", `/api/podgroups?name=${name}&cmd=spec`, (sleeperGroup(name, services.testImage, 3, ["V=2"]) as { pod: unknown }).pod);
    expect(patch.status, JSON.stringify(patch.body)).toBe(202);
    // Mid-rollout: at least one instance replaced, at least one still at the old version.
    await pollUntil(
      "the rollout to be half done",
      async () => {
        const versions = (await instancesOf(name)).map((c) => c.labels["io.capstan.version"]);
        return versions.includes("2") && versions.includes("1");
      },
      30_000,
      20,
    );
    const killedAt = Date.now();
    await old.kill();
    const next = await leader();
    const tookOverMs = next.electedAt()! - killedAt;
    expect(tookOverMs, logs()).toBeLessThanOrEqual(leaseMs + takeoverSlackMs);
    await converged(() => next, name, 3, 2);
  }, 90_000);

  it("a leader SIGKILLed in the middle of a scale-up is replaced within the lease; the group reaches its count with no duplicate and no orphan", async () => {
    const name = group("scale");
    const old = await pair();
    expect((await old.api("POST", "/api/podgroups", sleeperGroup(name, services.testImage, 1))).status).toBe(202);
    await converged(() => old, name, 1);
    expect((await old.api("PATCH", `/api/podgroups?name=${name}&cmd=replica&num_instances=8`)).status).toBe(202);
    await pollUntil("the scale-up to have started", async () => (await instancesOf(name)).length > 1, 30_000, 10);
    const killedAt = Date.now();
    await old.kill();
    const midway = (await instancesOf(name)).length;
    const next = await pollUntil("another orchestrator to lead", () => leaderOf(alive().filter((o) => o !== old)), 20_000, 50);
    expect(next.electedAt()! - killedAt, logs()).toBeLessThanOrEqual(leaseMs + takeoverSlackMs);
    const ids = await converged(() => next, name, 8);
    // Nothing the dead leader created is left behind or doubled: 8 containers in all, running or not.
    expect((await instancesOf(name)).length).toBe(8);
    expect(ids).toHaveLength(8);
    expect(midway).toBeGreaterThan(1);
  }, 90_000);

  it("killing the etcd Raft leader during a mass deploy loses no acknowledged write and deploys nothing twice; informers resume", async () => {
    const leaderBefore = await pair();
    const followerBefore = alive().find((o) => o !== leaderBefore)!;
    const names = Array.from({ length: 30 }, (_, i) => group(`mass${i}`));
    const acknowledged: string[] = [];
    const failed: string[] = [];
    let next = 0;
    let killed: Promise<void> | undefined;
    const etcdLeader = await etcd.leader();
    const worker = async () => {
      for (let i = next++; i < names.length; i = next++) {
        const via = alive()[i % alive().length]!;
        const res = await via.api("POST", "/api/podgroups", sleeperGroup(names[i]!, services.testImage, 1), 20_000).catch((e: Error) => ({ status: 0, body: e.message }));
        (res.status === 202 ? acknowledged : failed).push(names[i]!);
        // A third of the way in, the Raft leader dies; the other two elect a new one.
        if (acknowledged.length === 10 && !killed) killed = etcdLeader.kill();
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    await killed;
    expect(etcdLeader.running()).toBe(false);
    expect(acknowledged.length, `failed: ${failed.join(",")}`).toBeGreaterThanOrEqual(15);
    // Every acknowledged create is in the store, and deployed exactly once.
    const stored = await pollUntil("a leader after the etcd failover", () => leaderOf(alive()), 30_000, 100);
    const ids = new Map<string, string>();
    for (const name of acknowledged) {
      const [id] = await converged(() => stored, name, 1);
      ids.set(name, id!);
    }
    // A create that failed may have been applied all the same (a write whose answer was lost). A
    // client retries it, as docs/high-availability.md says: 202, or 409 when the first one landed;
    // either way the group is deployed once.
    for (const name of failed) {
      // 503 means "unknown, retry": the client keeps retrying until it gets an answer.
      const retry = await pollUntil(`a retried create of ${name} to be answered`, async () => {
        const r = await stored.api("POST", "/api/podgroups", sleeperGroup(name, services.testImage, 1));
        return r.status !== 503 && r;
      }, 20_000, 200);
      expect([202, 409], JSON.stringify(retry.body)).toContain(retry.status);
      if (retry.status === 409) expect(retry.body).toMatchObject({ code: "NotAllowed", reason: "AlreadyExists" });
      ids.set(name, (await converged(() => stored, name, 1))[0]!);
    }
    // Informers resumed: a write through the follower's API now is acted on by the leader, and the
    // follower serves the leader's status of it.
    await etcdLeader.start();
    // The follower lived through it (a follower never exits over store errors) on the same informers.
    const follower = followerBefore;
    expect(alive()).toContain(follower);
    const scaled = acknowledged[0]!;
    expect((await follower.api("PATCH", `/api/podgroups?name=${scaled}&cmd=replica&num_instances=2`)).status).toBe(202);
    await converged(() => follower, scaled, 2);
    // Nothing was redeployed: the one container of every group is the one first seen, and no
    // group ever had a second one (removed ones would be gone, so count every container, any state).
    for (const [name, id] of ids) {
      const all = await containersOf(engines, name);
      if (name === scaled) expect(all.map((c) => c.id)).toContain(id);
      else expect(all.map((c) => c.id), name).toEqual([id]);
    }
  }, 120_000);

  it("an orchestrator cut off from etcd steps down before the other leads, acts no more, and the store refuses its term's writes", async () => {
    // A fresh pair: the one behind the proxy first, so that it leads.
    for (const o of alive()) await o.stop();
    proxy = await startTcpProxy((await etcd.leader()).endpoint);
    const cutOff = await start(`etcd://${proxy.endpoint}`);
    await pollUntil("the proxied orchestrator to lead", () => cutOff.leading(), 20_000, 50);
    const other = await start();
    const term = await store.get(orchestratorLeaderKey);
    expect(term?.value).toContain(String(cutOff.child.pid));
    const name = group("deposed");
    expect((await other.api("POST", "/api/podgroups", sleeperGroup(name, services.testImage, 2))).status).toBe(202);
    await converged(() => other, name, 2);
    expect(await other.reconciles()).toBe(0);

    proxy.blackhole();
    const cutAt = Date.now();
    // Its API cannot reach the store: a write through it fails cleanly (an error answer or a closed
    // connection as it exits), never a 2xx, and within the store's call timeout.
    const late = group("late");
    const lateAnswer = cutOff.api("POST", "/api/podgroups", sleeperGroup(late, services.testImage, 1), 20_000).catch((e: Error) => ({ status: 0, body: e.message }));

    // Once it has stepped down, and before the other is elected, a container of the group is
    // removed behind Capstan's back. A leader would put it back at once (it sees the engine's events
    // directly, not through etcd); the deposed one must not: the engines show no new container until
    // the next term begins.
    const steppedDown = /"time":(\d+)[^\n]*"msg":"stepping down"/;
    const downAt = await pollUntil("the cut-off orchestrator to step down", async () => {
      const m = steppedDown.exec(cutOff.log());
      return m ? Number(m[1]) : undefined;
    }, 10_000, 10);
    const [victim, survivor] = await instancesOf(name);
    await engines.remove(victim!, { force: true });
    const removedAt = Date.now();
    const seen = new Set<string>();
    while (other.electedAt() === undefined && Date.now() - cutAt < 20_000) {
      for (const c of await instancesOf(name)) seen.add(c.id);
      await new Promise((r) => setTimeout(r, 50));
    }
    const upAt = other.electedAt()!;
    expect(upAt, logs()).toBeDefined();
    // No overlap: the cut-off leader stopped acting before the store let anyone else be elected,
    // and the removal fell in between (else the check below proves nothing).
    expect(downAt).toBeLessThan(removedAt);
    expect(removedAt).toBeLessThan(upAt);
    expect(upAt - cutAt).toBeLessThanOrEqual(leaseMs + takeoverSlackMs);
    expect([...seen]).toEqual([survivor!.id]);
    const answer = await lateAnswer;
    expect(answer.status === 0 || answer.status >= 500, JSON.stringify(answer)).toBe(true);

    // A write under the deposed term is refused by the store itself, whatever its sender believes.
    const deposed = fencedStore(store, () => ({ key: orchestratorLeaderKey, createRevision: term!.createRevision }));
    await expect(deposed.put(`/platform/test/${prefix}/fenced`, "x")).rejects.toBeInstanceOf(NotLeaderError);
    expect(await store.get(`/platform/test/${prefix}/fenced`)).toBeNull();

    // The partition heals: what it sent in the meantime reaches etcd late. It has stopped (a
    // deposed orchestrator exits for its supervisor to restart it); the new leader repairs the group.
    proxy.restore();
    expect(await cutOff.exited, cutOff.log().slice(-3000)).toBe(1);
    expect(cutOff.log()).toContain("leadership lost; stopping");
    await converged(() => other, name, 2);
    expect((await instancesOf(name)).map((c) => c.id)).toContain(survivor!.id);
    // The write its API failed may still have reached etcd late (an unknown outcome, as for any
    // timed-out write): then it is deployed like any other, once.
    if ((await other.api("GET", `/api/podgroups?name=${late}`)).status === 200) await converged(() => other, late, 1);
    else expect(await instancesOf(late)).toEqual([]);
  }, 90_000);
});
