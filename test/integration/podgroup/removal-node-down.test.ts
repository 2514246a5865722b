// PodGroup removal and an unreachable node (review finding 7, PodGroup part): removal waits only
// for a down node that may hold something of the group. A node that was listed since the
// orchestrator started and holds none of the group's containers is not waited for; one that has
// been down since the start (never listed: what runs there is unknown) is. Engine n2 is stopped
// with scripts/services and started again whatever happens.
import { describe, expect, it } from "vitest";
import { keys } from "../../../api/resources/keys.ts";
import { useDriftHarness } from "../drift/harness.ts";

const h = useDriftHarness({}, 120_000);

const gone = async (name: string) => !(await h.store!.get(keys.podGroup(name))) && (await h.status(name)) === undefined;

describe("removing a PodGroup while a node is down", () => {
  it("does not wait for a listed node that holds none of its containers, but does for one never listed", async () => {
    const pinned = h.name("pinned");
    await h.create(pinned, 2, { filters: ["node==n1"] });
    await h.running(pinned, 2);
    await h.stopEngine("n2");
    await h.until("n2 unreachable", async () => (await h.nodes()).find((n) => n.name === "n2" && n.state === "unreachable"), 30_000);
    expect((await h.call("DELETE", `/api/podgroups?name=${pinned}`)).status).toBe(202);
    await h.until("removed although n2 is down", async () => (await gone(pinned)) && (await h.actual(pinned)).length === 0, 20_000);

    // Restarted while n2 is down: n2 has not been listed since, so a removal waits for it.
    const later = h.name("later");
    await h.create(later, 1, { filters: ["node==n1"] });
    await h.running(later, 1);
    await h.stopOrchestrator();
    await h.startOrchestrator();
    expect((await h.call("DELETE", `/api/podgroups?name=${later}`)).status).toBe(202);
    const waiting = await h.until("waiting for n2", async () => {
      const s = await h.status(later);
      return s?.lastError.includes("waiting for node n2") && (await h.actual(later)).length === 0 ? s : undefined;
    }, 20_000);
    expect(waiting.state).toBe("removing");
    await h.startEngine("n2");
    await h.until("removed once n2 answers", () => gone(later), 30_000);
  }, 150_000);
});
