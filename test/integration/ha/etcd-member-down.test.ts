// One etcd member of three down is no outage (docs/high-availability.md): the store, given every
// member's endpoint, keeps answering every call from the other two. etcd3 sends a call to the dead
// member now and then (its per-host circuit breaker opens after three failures and lets one call
// through again every 5 s); gRPC fails such a call before sending it, so the store sends it again
// to a live member instead of failing it. A read whose connection breaks under it is sent again
// too. A write is not (it may have been applied): the one write that meets the dead member's
// connection before the client has noticed the death may fail with StoreUnavailableError, as with
// etcd's own client; none after that.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../../adapters/store/open.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { startEtcdCluster, type EtcdCluster } from "../../helpers/etcd-process.ts";
import { uniqueName } from "../../helpers/services.ts";

describe("an etcd cluster with one member of three down", () => {
  let etcd: EtcdCluster;
  let store: Store;
  const prefix = `/platform/test/${uniqueName("member-down")}/`;

  beforeAll(async () => {
    etcd = await startEtcdCluster();
    store = openStore(etcd.storeUrl);
  }, 60_000);

  afterAll(async () => {
    await store?.close();
    await etcd?.stop();
  });

  it("answers every read and write from the other two, through the breaker's probes of the dead one", async () => {
    for (let i = 0; i < 5; i++) await store.put(`${prefix}warm${i}`, "1");
    // A follower: no Raft election, so any failure is the client's.
    const raftLeader = await etcd.leader();
    const victim = etcd.members.find((m) => m !== raftLeader)!;
    await victim.kill();
    const killedAt = Date.now();
    const readFailures: string[] = [];
    const writeFailures: { message: string; afterKillMs: number }[] = [];
    let calls = 0;
    // Past one probe of the dead member (5 s after its breaker opened).
    const until = Date.now() + 6_500;
    while (Date.now() < until) {
      calls += 2;
      await store
        .put(`${prefix}k`, String(calls))
        .catch((e: Error) => writeFailures.push({ message: e.message, afterKillMs: Date.now() - killedAt }));
      await store.get(`${prefix}k`).catch((e: Error) => readFailures.push(e.message));
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(calls).toBeGreaterThan(100);
    expect(readFailures).toEqual([]);
    expect(writeFailures.length, JSON.stringify(writeFailures)).toBeLessThanOrEqual(1);
    for (const failure of writeFailures) {
      expect(failure.message).toMatch(/UNAVAILABLE: Connection dropped/);
      expect(failure.afterKillMs).toBeLessThan(1_000);
    }
  }, 30_000);
});
