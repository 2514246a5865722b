// statusSource with the controller's writes in flight (controllers/shared/status-writes-in-flight.ts):
// the echo of an own write never enqueues the key, even when it comes before the write's answer;
// anyone else's write always does, held or not.
import { describe, expect, it } from "vitest";
import { statusSource } from "../../../controllers/shared/status-records.ts";
import { StatusWritesInFlight } from "../../../controllers/shared/status-writes-in-flight.ts";
import type { EventHandler, Informer } from "../../../runtime/informer.ts";

interface Entry {
  name: string;
  modRevision: number;
}

/** A status source over a hand-driven informer; `own` plays the reconciler's last written revision per key. */
function setup() {
  let handler: EventHandler<Entry> | undefined;
  const informer = { addEventHandler: (h: EventHandler<Entry>) => ((handler = h), () => (handler = undefined)) } as unknown as Informer<Entry>;
  const own = new Map<string, number>();
  const inFlight = new StatusWritesInFlight();
  const source = statusSource(informer, (name) => own.get(name), { name: "test", initialList: false, inFlight });
  const enqueued: string[] = [];
  void source.start((name) => enqueued.push(name));
  const event = (name: string, modRevision: number) => handler!.onUpdate!({ name, modRevision: modRevision - 1 }, { name, modRevision }, `k/${name}`);
  /** An own write of `name` committing at `revision` (undefined: nothing written or failed), with `during` run while it is in flight. */
  const write = (name: string, revision: number | undefined, during: () => void) => {
    const settled = inFlight.begin(name);
    during();
    if (revision !== undefined) own.set(name, revision);
    settled(revision);
  };
  return { source, event, write, own, enqueued };
}

describe("statusSource with writes in flight", () => {
  it("the echo of an own write, before the write's answer: not enqueued", () => {
    const t = setup();
    t.write("a", 10, () => t.event("a", 10));
    expect(t.enqueued).toEqual([]);
  });

  it("the echo after the write's answer: not enqueued (judged by revision, as before)", () => {
    const t = setup();
    t.write("a", 10, () => {});
    t.event("a", 10);
    expect(t.enqueued).toEqual([]);
  });

  it("someone else's write after ours, seen while ours was in flight: enqueued once ours settles", () => {
    const t = setup();
    t.write("a", 10, () => {
      t.event("a", 10);
      t.event("a", 11);
      expect(t.enqueued).toEqual([]); // held
    });
    expect(t.enqueued).toEqual(["a"]);
  });

  it("a write that failed or wrote nothing: whatever was held is enqueued", () => {
    const t = setup();
    t.write("a", undefined, () => t.event("a", 7));
    expect(t.enqueued).toEqual(["a"]);
    t.write("b", undefined, () => {});
    expect(t.enqueued).toEqual(["a"]); // nothing held, nothing enqueued
  });

  it("another key's events are judged at once; with no write in flight, a foreign revision is enqueued at once", () => {
    const t = setup();
    t.write("a", 10, () => t.event("b", 9));
    expect(t.enqueued).toEqual(["b"]);
    t.own.set("c", 3);
    t.event("c", 5);
    expect(t.enqueued).toEqual(["b", "c"]);
  });

  it("a held event judged foreign after the source stopped goes nowhere", () => {
    const t = setup();
    t.write("a", 10, () => {
      t.event("a", 12);
      void t.source.stop();
    });
    expect(t.enqueued).toEqual([]);
  });
});
