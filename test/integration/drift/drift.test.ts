// Every parameter combination of PATCH /api/nodes?cmd=drift on both real engines: from only (the
// scheduler picks, never `from`), from+to, pg, pg+pg_instance, and a stateful group that stays
// without force and moves with it. Each asserts on Docker's actual containers: what moved is now
// one running container on the other node with drift count 1 (and nothing of it is left on
// `from`), what did not move is the very same container; the task is deleted once done.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { useDriftHarness, type Actual } from "./harness.ts";

const capstan = fileURLToPath(new URL("../../../cli/bin/capstan.mjs", import.meta.url));
const exec = promisify(execFile);

const h = useDriftHarness();

const on = (a: Actual[], node: string) => a.filter((x) => x.c.node === node);

async function drifted(params: Record<string, string>): Promise<void> {
  const res = await h.drift({ cmd: "drift", ...params });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  await h.driftTasksDone();
}

async function remove(...names: string[]): Promise<void> {
  for (const n of names) await h.call("DELETE", `/api/podgroups?name=${n}`);
  await h.until("groups removed", async () => (await Promise.all(names.map((n) => h.actual(n)))).every((a) => a.length === 0));
}

describe("drift", () => {
  it("from only: the instance on `from` moves to a node the scheduler picks (never `from`); the others stay", async () => {
    const name = h.name("from");
    await h.create(name, 2);
    const before = await h.running(name, 2);
    expect(before.map((a) => a.c.node).sort()).toEqual(["n1", "n2"]); // the spread hint
    const moving = on(before, "n1")[0]!;
    const staying = on(before, "n2")[0]!;

    await drifted({ from: "n1" });
    const after = await h.running(name, 2);
    expect(on(after, "n1")).toEqual([]);
    const moved = after.find((a) => a.instance === moving.instance)!;
    expect(moved).toMatchObject({ drift: 1, c: { node: "n2" } });
    expect(after.find((a) => a.instance === staying.instance)!.c.id).toBe(staying.c.id);
    const s = (await h.status(name))!;
    expect(s.pods.map((p) => [p.instanceNo, p.node, p.driftCount])).toEqual(
      [1, 2].map((i) => [i, "n2", i === moving.instance ? 1 : 0]),
    );
    await remove(name);
  });

  it("from + to: every instance on `from` moves to `to`", async () => {
    const name = h.name("to");
    await h.create(name, 2);
    const before = await h.running(name, 2);
    const moving = on(before, "n2")[0]!;

    await drifted({ from: "n2", to: "n1" });
    const after = await h.running(name, 2);
    expect(after.map((a) => a.c.node)).toEqual(["n1", "n1"]);
    expect(after.find((a) => a.instance === moving.instance)!.drift).toBe(1);
    expect(after.find((a) => a.instance !== moving.instance)!.c.id).toBe(on(before, "n1")[0]!.c.id);
    await remove(name);
  });

  it("pg: only that group's instances move; another group's pod on `from` stays", async () => {
    const [a, b] = [h.name("pga"), h.name("pgb")];
    await h.create(a, 2);
    await h.create(b, 2);
    const [beforeA, beforeB] = [await h.running(a, 2), await h.running(b, 2)];

    await drifted({ from: "n1", pg: a });
    const afterA = await h.running(a, 2);
    expect(afterA.map((x) => x.c.node)).toEqual(["n2", "n2"]);
    expect(afterA.find((x) => x.instance === on(beforeA, "n1")[0]!.instance)!.drift).toBe(1);
    const afterB = await h.running(b, 2);
    expect(afterB.map((x) => x.c.id)).toEqual(beforeB.map((x) => x.c.id));
    await remove(a, b);
  });

  it("pg + pg_instance: only that instance moves, its sibling on the same node stays", async () => {
    const name = h.name("inst");
    await h.create(name, 4);
    const before = await h.running(name, 4);
    const onN1 = on(before, "n1");
    expect(onN1).toHaveLength(2);
    const [target, sibling] = onN1 as [Actual, Actual];

    await drifted({ from: "n1", pg: name, pg_instance: String(target.instance) });
    const after = await h.running(name, 4);
    expect(after.find((a) => a.instance === target.instance)).toMatchObject({ drift: 1, c: { node: "n2" } });
    for (const a of before.filter((x) => x.instance !== target.instance)) {
      expect(after.find((x) => x.instance === a.instance)!.c.id).toBe(a.c.id);
    }
    expect(after.find((a) => a.instance === sibling.instance)!.c.node).toBe("n1");
    await remove(name);
  });

  it("a stateful group stays without force (the task completes, nothing moves) and moves with force=true", async () => {
    const name = h.name("stateful");
    await h.create(name, 2, { stateful: true });
    const before = await h.running(name, 2);
    const onN1 = on(before, "n1")[0]!;

    await drifted({ from: "n1", pg: name });
    expect((await h.running(name, 2)).map((a) => a.c.id)).toEqual(before.map((a) => a.c.id));
    // A drift of every group (no pg) leaves it in place too.
    await drifted({ from: "n1" });
    expect((await h.running(name, 2)).map((a) => a.c.id)).toEqual(before.map((a) => a.c.id));

    await drifted({ from: "n1", pg: name, force: "true" });
    const after = await h.running(name, 2);
    expect(after.map((a) => a.c.node)).toEqual(["n2", "n2"]);
    expect(after.find((a) => a.instance === onN1.instance)!.drift).toBe(1);
    const s = (await h.status(name))!;
    expect(s.pods.find((p) => p.instanceNo === onN1.instance)).toMatchObject({ node: "n2", driftCount: 1, state: "running" });
    await remove(name);
  });

  it("capstan nodes prints the table; capstan drift -wait moves a group and returns once nothing is left on -from", async () => {
    const nodes = await exec(process.execPath, [capstan, "nodes", "-server", h.base], { timeout: 30_000 });
    const lines = nodes.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME +STATE +ADDRESS +CPUS +MEMORY +RESERVED +CONTAINERS$/);
    expect(lines.slice(1).map((l) => l.split(/ +/).slice(0, 3))).toEqual([
      ["n1", "ready", "127.0.0.1"],
      ["n2", "ready", "127.0.0.1"],
    ]);

    const name = h.name("cli");
    await h.create(name, 2);
    const before = await h.running(name, 2);
    const out = await exec(process.execPath, [capstan, "drift", "-from", "n2", "-pg", name, "-wait", "-timeout", "60s", "-server", h.base], { timeout: 90_000 });
    expect(out.stdout).toContain(`podgroup ${name}'s instances on n2 will move to other nodes`);
    expect(out.stdout).toContain("nothing left to move on n2");
    const after = await h.actual(name);
    expect(after.map((a) => a.c.node)).toEqual(["n1", "n1"]);
    expect(after.find((a) => a.instance === on(before, "n1")[0]!.instance)!.c.id).toBe(on(before, "n1")[0]!.c.id);

    const refused = await exec(process.execPath, [capstan, "drift", "-from", "n1", "-to", "n9", "-server", h.base]).catch((e: { code: number; stderr: string }) => e);
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining("no node n9 in the cluster") });
    await remove(name);
  });
});
