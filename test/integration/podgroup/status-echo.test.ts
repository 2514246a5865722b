// The controller's own status write must not reconcile its group a second time when its watch
// event (the echo) comes before the write's answer, as etcd often delivers them under load
// (controllers/shared/status-writes-in-flight.ts). Many zero-instance groups created at once: each
// is reconciled exactly once, for its spec, and then left alone.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupSpec, Harness } from "./harness.ts";

// No periodic refresh within the test: any second pass would be an echo taken for someone else's write.
const h = new Harness({ refreshIntervalMs: 600_000 });

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await h.cleanup();
});

describe("status echo", () => {
  it("60 new groups at once: one pass each, their own status writes reconcile nothing", async () => {
    const names = Array.from({ length: 60 }, () => h.name("echo"));
    await Promise.all(names.map((name) => h.put(groupSpec(name, { numInstances: 0 }))));
    await h.until("a status for every group", async () => (await Promise.all(names.map((n) => h.status(n)))).every((s) => s?.state === "running"), 30_000);
    // A pass started by an echo is enqueued as the echo arrives, right after the write, and runs at
    // once: the counts must then hold still (1 s unchanged; a second pass would show within it).
    let seen = "";
    let since = Date.now();
    await h.until(
      "the pass counts to hold still for 1 s",
      async () => {
        const now = names.map((name) => h.pg!.passesFinished(name)).join();
        if (now !== seen) [seen, since] = [now, Date.now()];
        return Date.now() - since >= 1_000;
      },
      15_000,
      50,
    );
    const passes = names.map((name) => h.pg!.passesFinished(name));
    expect(passes.filter((n) => n !== 1)).toEqual([]);
  }, 90_000);
});
