// The event pruner's bounds on a fake clock: age (the TTL, on lastTime) and count (the newest N),
// over a real embedded store (docs/events.md).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { eventsKeyPrefix, type EventRecord } from "../../../api/resources/event.ts";
import { EventPruner } from "../../../controllers/shared/event-pruner.ts";
import { eventId } from "../../../controllers/shared/events.ts";
import { FakeClock, flushMicrotasks } from "../../../runtime/clock.ts";

const epoch = Date.parse("2026-11-26T10:00:00Z");
const prefix = eventsKeyPrefix("/t/");
const minute = 60_000;

let store: SqliteStore;
let clock: FakeClock;

beforeEach(() => {
  store = new SqliteStore({ path: ":memory:" });
  clock = new FakeClock(0);
});
afterEach(async () => {
  await store.close();
});

/** An event first seen `firstAgoMs` and last seen `lastAgoMs` before the clock's now. */
async function put(message: string, lastAgoMs: number, firstAgoMs = lastAgoMs): Promise<string> {
  const now = epoch + clock.now();
  const id = eventId(now - firstAgoMs);
  const record: EventRecord = {
    id,
    type: "Normal",
    reason: "DeployStarted",
    kind: "podgroup",
    name: "shop.web",
    app: "shop",
    message,
    count: 1,
    firstTime: new Date(now - firstAgoMs).toISOString(),
    lastTime: new Date(now - lastAgoMs).toISOString(),
  };
  await store.put(`${prefix}${id}`, JSON.stringify(record));
  return id;
}

async function messages(): Promise<string[]> {
  const { items } = await store.list(prefix);
  return items.map((kv) => (JSON.parse(kv.value) as EventRecord).message).sort();
}

describe("EventPruner", () => {
  it("deletes events not seen for the TTL, by lastTime (an old event seen again stays)", async () => {
    const pruner = new EventPruner({ store, prefix, ttlMs: 60 * minute, clock, now: () => epoch + clock.now() });
    await put("fresh", 1 * minute);
    await put("old", 61 * minute);
    await put("old but seen again", 5 * minute, 300 * minute);
    await put("just inside", 59 * minute);
    expect(await pruner.prune()).toEqual({ deleted: 1, kept: 3 });
    expect(await messages()).toEqual(["fresh", "just inside", "old but seen again"]);
    await clock.advanceAsync(2 * minute);
    expect(await pruner.prune()).toEqual({ deleted: 1, kept: 2 });
    expect(await messages()).toEqual(["fresh", "old but seen again"]);
  });

  it("keeps at most maxEvents, the newest", async () => {
    const pruner = new EventPruner({ store, prefix, ttlMs: 60 * minute, maxEvents: 3, clock, now: () => epoch + clock.now() });
    for (let i = 0; i < 130; i++) await put(`e${String(i).padStart(3, "0")}`, (130 - i) * 1000); // e129 newest
    expect(await pruner.prune()).toEqual({ deleted: 127, kept: 3 }); // several transactions of at most 64
    expect(await messages()).toEqual(["e127", "e128", "e129"]);
  });

  it("deletes values under the prefix that are not event records", async () => {
    const pruner = new EventPruner({ store, prefix, clock, now: () => epoch + clock.now() });
    await put("fine", 0);
    await store.put(`${prefix}garbage`, "not json");
    expect(await pruner.prune()).toEqual({ deleted: 1, kept: 1 });
  });

  it("runs every interval until stopped", async () => {
    const pruner = new EventPruner({ store, prefix, ttlMs: 10 * minute, intervalMs: minute, clock, now: () => epoch + clock.now() });
    await put("a", 9.5 * minute);
    const stop = new AbortController();
    const running = pruner.start(stop.signal);
    const until = async (f: () => Promise<boolean>) => {
      for (let i = 0; i < 100 && !(await f()); i++) await new Promise((r) => setTimeout(r, 5));
    };
    await until(async () => clock.pendingTimers() > 0);
    expect(await messages()).toEqual(["a"]);
    await clock.advanceAsync(minute);
    await flushMicrotasks();
    await until(async () => (await messages()).length === 0);
    expect(await messages()).toEqual([]);
    stop.abort();
    await running;
  });
});
