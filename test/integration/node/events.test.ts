// The node monitor's events against the real engines (docs/events.md): NodeReady for an engine
// that answers, NodeDown for one that does not, NodeTimedOut once it stays down past the node
// timeout, NodeRemoved when it leaves the cluster. Node records live at fixed keys, so this runs on
// a private embedded store (SQLite), not the shared etcd; events are read from the recorder's writes.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DockerCluster } from "../../../adapters/cluster/index.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { decodeEventRecord, eventsKeyPrefix, type EventRecord } from "../../../api/resources/event.ts";
import { createNodeMonitor } from "../../../controllers/node/monitor.ts";
import { EventRecorder } from "../../../controllers/shared/events.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const services = loadServices();
const run = uniqueName("nodeev");
const dir = mkdtempSync(join(tmpdir(), "capstan-node-events-"));
const store = new SqliteStore({ path: join(dir, "state.db") });
const prefix = eventsKeyPrefix();
const up = `n1=${services.engines.n1}`;
const withDown = `${up},gone=unix:///nonexistent/${run}.sock`;

afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function events(): Promise<EventRecord[]> {
  const { items } = await store.list(prefix);
  return items.map((kv) => decodeEventRecord(kv.value)!).filter((e) => e !== undefined);
}

async function monitoring(spec: string, body: () => Promise<void>): Promise<void> {
  const recorder = new EventRecorder({ store, prefix });
  const monitor = createNodeMonitor({ store, cluster: DockerCluster.fromSpec(spec), events: recorder, intervalMs: 200, nodeTimeoutMs: 1_000 });
  const abort = new AbortController();
  const running = monitor.start(abort.signal);
  try {
    await body();
  } finally {
    abort.abort();
    await running;
    await recorder.idle();
    recorder.close();
  }
}

describe("node monitor events", () => {
  it("NodeReady, NodeDown, NodeTimedOut, then NodeRemoved when the node leaves -cluster", async () => {
    await monitoring(withDown, async () => {
      await pollUntil("NodeTimedOut", async () => (await events()).some((e) => e.reason === "NodeTimedOut"), 20_000);
    });
    const first = await events();
    expect(first.find((e) => e.reason === "NodeReady")).toMatchObject({ type: "Normal", kind: "node", name: "n1", node: "n1" });
    expect(first.find((e) => e.reason === "NodeDown")).toMatchObject({ type: "Warning", kind: "node", name: "gone", node: "gone" });
    expect(first.find((e) => e.reason === "NodeDown")!.message).toMatch(/^unreachable: /);
    expect(first.find((e) => e.reason === "NodeTimedOut")).toMatchObject({ type: "Warning", name: "gone" });
    expect(first.every((e) => e.app === undefined)).toBe(true);
    // Steady state records nothing more: one event of each.
    expect(first.map((e) => e.reason).sort()).toEqual(["NodeDown", "NodeReady", "NodeTimedOut"]);

    // A new monitor (another leader) without the down node: it is removed; n1 is still ready (no event).
    await monitoring(up, async () => {
      await pollUntil("NodeRemoved", async () => (await events()).some((e) => e.reason === "NodeRemoved"), 20_000);
    });
    const second = await events();
    expect(second.find((e) => e.reason === "NodeRemoved")).toMatchObject({ type: "Normal", name: "gone" });
    expect(second.filter((e) => e.reason === "NodeReady")).toHaveLength(1);
  });
});
