import { describe, expect, it } from "vitest";
import type { KeyValue } from "../../../adapters/store/store.ts";
import { keys } from "../../../api/resources/keys.ts";
import { notifyKeys } from "../../../api/resources/notify.ts";
import { planRestore } from "../../../cli/restore-plan.ts";

const kv = (key: string, value: string, lease?: string): KeyValue => ({ key, value, createRevision: 2, modRevision: 3, version: 1, ...(lease && { lease }) });
const spec = (name: string, extra: object = {}) => JSON.stringify({ name, numInstances: 1, ...extra });
const now = "2026-01-01T00:00:00.000Z";

describe("planRestore", () => {
  it("puts back what differs or is gone, writes nothing for what is equal, deletes what the backup lacks", () => {
    const backup = new Map([
      [keys.podGroup("a.x"), spec("a.x")],
      [keys.podGroupStatusOf("a.x"), "{\"state\":\"running\"}"],
      [keys.podGroup("b.x"), spec("b.x")],
      ["/platform/console/apps/a", "{\"v\":1}"],
    ]);
    const current = [kv(keys.podGroup("b.x"), spec("b.x")), kv("/platform/console/apps/a", "{\"v\":2}"), kv("/platform/console/tokens/t1", "{}")];
    const plan = planRestore(current, backup, now);
    expect(plan).toMatchObject({ puts: 3, deletes: 1, unchanged: 1, removing: [] });
    const ops = plan.units.flat();
    expect(ops).toContainEqual({ type: "delete", key: "/platform/console/tokens/t1" });
    expect(ops.some((op) => op.type === "put" && op.key === keys.podGroup("b.x"))).toBe(false);
    // A group's spec and status come in one unit (one transaction).
    expect(plan.units.find((u) => u.some((op) => op.type === "put" && op.key === keys.podGroup("a.x")))).toHaveLength(2);
  });

  it("marks a group or dependency created since for deletion and keeps its status and history for the removal", () => {
    const current = [
      kv(keys.podGroup("c.x"), spec("c.x")),
      kv(keys.podGroupStatusOf("c.x"), "{}"),
      kv(`${keys.podGroupHistory}c.x/1`, "{}"),
      kv(`${keys.depends}redis`, JSON.stringify({ name: "redis" })),
      kv(`${keys.dependStatus}redis`, "{}"),
      kv(keys.podGroup("d.x"), spec("d.x", { deleting: true })),
    ];
    const plan = planRestore(current, new Map(), now);
    expect(plan.removing).toEqual(["dependency redis", "podgroup c.x", "podgroup d.x"]);
    expect(plan.deletes).toBe(0);
    const ops = plan.units.flat();
    expect(ops).toHaveLength(2);
    expect(JSON.parse((ops.find((o) => o.type === "put" && o.key === keys.podGroup("c.x")) as { value: string }).value)).toMatchObject({ name: "c.x", deleting: true, updatedAt: now });
    expect(JSON.parse((ops.find((o) => o.type === "put" && o.key === `${keys.depends}redis`) as { value: string }).value)).toMatchObject({ deleting: { force: false } });
  });

  it("leaves leased keys (leader keys) alone", () => {
    expect(planRestore([kv(keys.leader, "host:1:abc", "77")], new Map(), now).units).toEqual([]);
    // Even when the backup has the key without a lease (an old Capstan's leader key).
    expect(planRestore([kv(keys.leader, "host:1:abc", "77")], new Map([[keys.leader, "old"]]), now).units).toEqual([]);
  });

  it("leaves tasks and notify delivery markers as they are now, both ways", () => {
    const backup = new Map([
      [keys.task("drift-1"), "{\"kind\":\"drift\"}"],
      [notifyKeys.deliveredTo("e1", "webhook"), "{\"count\":1}"],
    ]);
    const current = [kv(keys.task("drift-2"), "{}"), kv(notifyKeys.deliveredTo("e1", "webhook"), "{\"count\":3}"), kv(notifyKeys.deliveredTo("e2", "webhook"), "{\"count\":1}")];
    const plan = planRestore(current, backup, now);
    expect(plan.units).toEqual([]);
    expect(plan).toMatchObject({ puts: 0, deletes: 0 });
  });

  it("keeps the status and history of a group whose spec is the backup's; puts back those of a changed one", () => {
    const backup = new Map([
      [keys.podGroup("same.x"), spec("same.x")],
      [keys.podGroupStatusOf("same.x"), "{\"state\":\"old\"}"],
      [`${keys.podGroupHistory}same.x/1`, "{}"],
      [keys.podGroup("changed.x"), spec("changed.x")],
      [keys.podGroupStatusOf("changed.x"), "{\"state\":\"old\"}"],
    ]);
    const current = [
      kv(keys.podGroup("same.x"), spec("same.x")),
      kv(keys.podGroupStatusOf("same.x"), "{\"state\":\"now\"}"),
      kv(`${keys.podGroupHistory}same.x/2`, "{}"),
      kv(keys.podGroup("changed.x"), spec("changed.x", { numInstances: 5 })),
      kv(keys.podGroupStatusOf("changed.x"), "{\"state\":\"now\"}"),
    ];
    const plan = planRestore(current, backup, now);
    const written = plan.units.flat().map((op) => (op.type === "deletePrefix" ? op.prefix : op.key));
    expect(written.sort()).toEqual([keys.podGroup("changed.x"), keys.podGroupStatusOf("changed.x")].sort());
  });

  it("expects every key it writes at its revision when planned, absent ones at 0", () => {
    const backup = new Map([
      ["/platform/console/apps/a", "{\"v\":1}"],
      ["/platform/console/apps/b", "{\"v\":1}"],
    ]);
    const current = [{ ...kv("/platform/console/apps/a", "{\"v\":2}"), modRevision: 41 }, { ...kv("/platform/console/apps/c", "{}"), modRevision: 42 }];
    expect(planRestore(current, backup, now).expected).toEqual(
      new Map([
        ["/platform/console/apps/a", 41],
        ["/platform/console/apps/b", 0],
        ["/platform/console/apps/c", 42],
      ]),
    );
  });
});
