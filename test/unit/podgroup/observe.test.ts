import { describe, expect, it } from "vitest";
import { classify } from "../../../controllers/podgroup/observe.ts";
import { cached } from "./fixtures.ts";

const opts = { group: "web", version: 2, podSize: 1, reachable: (n: string) => n !== "down" };

describe("classify", () => {
  it("keeps one pod per instance; duplicates on other nodes are extras", () => {
    const a = cached({ instance: 0, version: 2, node: "n1" });
    const dup = cached({ instance: 0, version: 2, node: "n2" });
    const b = cached({ instance: 1, version: 2, node: "n2" });
    const v = classify([dup, b, a], opts);
    expect(v.instances.get(0)!.kept!.node).toBe("n1"); // the older one, deterministically
    expect(v.instances.get(0)!.extras.map((o) => o.c.id)).toEqual([dup.id]);
    expect(v.instances.get(1)!.extras).toEqual([]);
  });

  it("prefers, in order: a reachable node, the spec's version, running containers", () => {
    const onDown = cached({ instance: 0, version: 2, node: "down" });
    const stale = cached({ instance: 0, version: 1, node: "n1" });
    expect(classify([onDown, stale], opts).instances.get(0)!.kept!.version).toBe(1);
    const exited = cached({ instance: 1, version: 2, node: "n1" }, { state: "exited", exitCode: 1 });
    const staleRunning = cached({ instance: 1, version: 1, node: "n2" });
    expect(classify([exited, staleRunning], opts).instances.get(1)!.kept!.version).toBe(2);
    const exitedToo = cached({ instance: 2, version: 2, node: "n1" }, { state: "exited", exitCode: 1 });
    const running = cached({ instance: 2, version: 2, node: "n2" });
    expect(classify([exitedToo, running], opts).instances.get(2)!.kept!.node).toBe("n2");
  });

  it("two containers in one slot: the running one, then the current format, stays", () => {
    const legacy = cached({ instance: 0, version: 2 }, { labels: { "io.capstan.podgroup": "web", "io.capstan.instance": "0", "io.capstan.version": "2" } });
    const current = cached({ instance: 1, version: 2 }); // the legacy one's label 0 is instance 1 (numbered from 0)
    const v = classify([legacy, current], opts).instances.get(1)!;
    expect(v.kept!.containers.get(0)!.c.id).toBe(current.id);
    expect(v.extras.map((o) => o.c.id)).toEqual([legacy.id]);
  });

  it("container indexes beyond the spec's pod are extras of a current-version pod", () => {
    const c0 = cached({ instance: 0, version: 2, index: 0 });
    const c1 = cached({ instance: 0, version: 2, index: 1 });
    const v = classify([c0, c1], opts).instances.get(0)!;
    expect([...v.kept!.containers.keys()]).toEqual([0]);
    expect(v.extras.map((o) => o.c.id)).toEqual([c1.id]);
  });

  it("containers of the group it cannot place are reported apart; other groups are ignored", () => {
    const broken = cached({ instance: 0 }, { labels: { "io.capstan.podgroup": "web", "io.capstan.format": "2" } });
    const other = cached({ group: "db", instance: 0 });
    const v = classify([broken, other], opts);
    expect(v.unidentified.map((c) => c.id)).toEqual([broken.id, other.id]);
    expect(v.instances.size).toBe(0);
  });
});
