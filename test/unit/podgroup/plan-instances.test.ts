// What a pass does to the instances (plan-instances.ts): the rows of the operations table in
// docs/podgroup-controller.md (deploy, scale up and down, refresh: missing / older format / not
// running) and R1, R5, R9, R10, R12, on a fake clock.
import { describe, expect, it } from "vitest";
import type { CachedContainer } from "../../../adapters/cluster/container-cache.ts";
import type { PodStatus } from "../../../api/resources/podgroup.ts";
import { defaultRestartBackoff } from "../../../controllers/shared/backoff.ts";
import { previousContainerName } from "../../../controllers/shared/previous.ts";
import { pausedError } from "../../../controllers/shared/containers.ts";
import {
  asap,
  busyRecheckMs,
  planInstances,
  planRenames,
  secretsRecheckMs,
  secretsWait,
  statefulNodes,
  unidentifiedNotes,
  type InstancesInput,
  type InstancesPlan,
} from "../../../controllers/podgroup/plan-instances.ts";
import type { SecretMarkerEntry } from "../../../controllers/podgroup/secret-marker.ts";
import type { DriftMove, InstanceRecord, Internal, RolloutStep, StoredPodGroup } from "../../../controllers/podgroup/stored.ts";
import { FakeClock } from "../../../runtime/clock.ts";
import { container, down, group, internalOf, reachable, viewOf } from "./plan-fixtures.ts";

const clock = new FakeClock(500_000);
const now = clock.now();
const wait = 10_000;

interface Case {
  spec?: StoredPodGroup;
  pods?: CachedContainer[];
  internal?: Internal;
  rolloutRemoval?: number;
  moving?: number[];
  lastPods?: PodStatus[];
  markers?: Record<string, SecretMarkerEntry>;
  maxDeploysPerPass?: number;
}

function decide(given: Case): InstancesPlan {
  const spec = given.spec ?? group(2);
  const input: InstancesInput = {
    spec,
    view: viewOf(spec, given.pods ?? []),
    internal: given.internal ?? internalOf(),
    rolloutRemoval: given.rolloutRemoval,
    moving: new Map((given.moving ?? []).map((i): [number, DriftMove] => [i, { task: "t", from: "n1", drift: 1 }])),
    lastPods: given.lastPods ?? [],
    secretMarker: (id) => given.markers?.[id],
    reachable,
    now,
    updateWaitMs: wait,
    backoff: defaultRestartBackoff,
    maxDeploysPerPass: given.maxDeploysPerPass ?? 64,
  };
  return planInstances(input);
}

const ids = (cs: CachedContainer[]) => cs.map((container) => container.id).sort();
const exited = (code: number, finishedAt = now - 100) => ({ state: "exited" as const, exitCode: code, startedAt: finishedAt - 50, finishedAt });
const record = (over: Partial<InstanceRecord> = {}): InstanceRecord => ({ restarts: 0, failures: 0, ...over });

describe("deploy, scale up and down (operations table)", () => {
  it("deploy, none exists / scale up: every missing instance 1..n is deployed", () => {
    expect(decide({ spec: group(3) }).deploy).toEqual([1, 2, 3]);
    expect(decide({ spec: group(3), pods: [container({ instance: 2 })] }).deploy).toEqual([1, 3]);
  });

  it("at most maxDeploysPerPass per pass; the rest in the next pass at once", () => {
    const plan = decide({ spec: group(5), maxDeploysPerPass: 2 });
    expect(plan.deploy).toEqual([1, 2]);
    expect(plan.wakeAt).toContain(now + asap);
  });

  it("scale down: the highest surplus instance, one per pass, and the next pass at once", () => {
    const pods = [1, 2, 3, 4].map((instance) => container({ instance }));
    const plan = decide({ spec: group(2), pods });
    expect(plan.surplus?.instance).toBe(4);
    expect(plan.wakeAt).toContain(now + asap);
    expect(decide({ spec: group(3), pods }).wakeAt).not.toContain(now + asap);
  });

  it("R5: a surplus instance only on an unreachable node is left until it answers", () => {
    expect(decide({ spec: group(1), pods: [container({ instance: 1 }), container({ instance: 2, node: down })] }).surplus).toBeUndefined();
  });

  it("R12: previous containers of instances scaled away go too; those of current instances stay", () => {
    const orphan = container({ instance: 4 }, { name: previousContainerName("web", 4, 0) });
    const kept = container({ instance: 1 }, { name: previousContainerName("web", 1, 0) });
    const plan = decide({ spec: group(1), pods: [container({ instance: 1 }), orphan, kept] });
    expect(ids(plan.orphans)).toEqual([orphan.id]);
    expect(plan.deploy).toEqual([]);
  });
});

describe("R1: extras", () => {
  const dup = () => container({ instance: 1, node: "n2" }, { created: 1e12 }); // the younger copy is the extra
  const rows: { name: string; given: (duplicate: CachedContainer) => Case; removed: boolean }[] = [
    { name: "a duplicate on another node is removed", given: (duplicate) => ({ pods: [container({ instance: 1 }), duplicate, container({ instance: 2 })] }), removed: true },
    { name: "one on an unreachable node waits for it (R5)", given: () => ({ pods: [container({ instance: 1 }), container({ instance: 1, node: down }), container({ instance: 2 })] }), removed: false },
    { name: "not for the rollout step's instance (removed whole)", given: (duplicate) => ({ pods: [container({ instance: 1 }), duplicate], rolloutRemoval: 1 }), removed: false },
    { name: "not for a moving instance (removed whole)", given: (duplicate) => ({ pods: [container({ instance: 1 }), duplicate], moving: [1] }), removed: false },
  ];
  it.each(rows)("$name", (row) => {
    const duplicate = dup();
    const plan = decide(row.given(duplicate));
    expect(plan.extras.length > 0).toBe(row.removed);
    if (row.removed) expect(ids(plan.extras)).toEqual([duplicate.id]);
  });
});

describe("refresh rows: missing, not running, older format", () => {
  const spec = group(1, 1, { restartPolicy: "always" });
  const rows: {
    name: string;
    given: Case;
    want: Partial<{ deploy: number[]; starts: { instance: number; restart: boolean }[]; wakeAt: number[]; complete: number[] }>;
    recordError?: string | RegExp;
    /** No record is written for the instance (its exit is not counted). */
    noRecord?: boolean;
  }[] = [
    { name: "container missing: deployed again at once", given: { spec }, want: { deploy: [1] } },
    {
      name: "R9: missing but in deploy back-off: waits for it",
      given: { spec, internal: internalOf({ instances: { "1": record({ nextDeployAt: now + 4_000 }) } }) },
      want: { deploy: [], wakeAt: [now + 4_000] },
    },
    {
      name: "R5: missing from the cache but the last status has it on an unreachable node: not redeployed",
      given: { spec, lastPods: [{ instanceNo: 1, node: down, containers: [{}] } as unknown as PodStatus] },
      want: { deploy: [] },
    },
    {
      // Exited long ago (past any back-off): only R5 keeps it from being restarted or counted.
      name: "R5: kept pod on an unreachable node: nothing",
      given: { spec, pods: [container({ instance: 1, node: down }, exited(3, now - 3_600_000))] },
      want: { deploy: [], starts: [], wakeAt: [], complete: [] },
      noRecord: true,
    },
    { name: "created: started (not a restart)", given: { spec, pods: [container({ instance: 1 }, { state: "created", startedAt: undefined })] }, want: { starts: [{ instance: 1, restart: false }] } },
    {
      name: "exited under always, exit not yet counted: back-off starts (1 s), not restarted yet",
      given: { spec, pods: [container({ instance: 1 }, exited(3, now - 100))] },
      want: { starts: [], wakeAt: [now - 100 + 1_000] },
      recordError: /exited with code 3; restart 1 at/,
    },
    {
      name: "exited, back-off over: restarted",
      given: { spec, pods: [container({ instance: 1 }, exited(3, now - 5_000))] },
      want: { starts: [{ instance: 1, restart: true }] },
    },
    {
      name: "policy never: not restarted",
      given: { spec: group(1, 1, { restartPolicy: "never" }), pods: [container({ instance: 1 }, exited(3, now - 5_000))] },
      want: { starts: [], wakeAt: [] },
      recordError: /restart policy never: not restarted/,
    },
    {
      name: "policy onfail, exit 0: not restarted",
      given: { spec: group(1, 1, { restartPolicy: "onfail" }), pods: [container({ instance: 1 }, exited(0, now - 5_000))] },
      want: { starts: [] },
      recordError: /restart policy onfail: not restarted/,
    },
    {
      name: "policy onfail, exit 3: restarted",
      given: { spec: group(1, 1, { restartPolicy: "onfail" }), pods: [container({ instance: 1 }, exited(3, now - 5_000))] },
      want: { starts: [{ instance: 1, restart: true }] },
    },
    {
      name: "paused behind our back: reported, not started",
      given: { spec, pods: [container({ instance: 1 }, { state: "paused" })] },
      want: { starts: [] },
      recordError: pausedError,
    },
    { name: "the engine is busy with it: looked at again in a second", given: { spec, pods: [container({ instance: 1 }, { state: "restarting" })] }, want: { starts: [], wakeAt: [now + busyRecheckMs] } },
    {
      name: "a partial pod of the current version: its missing containers, on its node",
      given: { spec: group(1, 1, {}, { containers: [{ image: "a" }, { image: "b" }] }), pods: [container({ instance: 1, node: "n2" })] },
      want: { complete: [1], deploy: [] },
    },
    {
      name: "the rollout step's instance, old pod being removed: not deployed",
      given: { spec, internal: internalOf({ rollout: { instance: 1, toVersion: 1, phase: "removing", at: now } as RolloutStep }) },
      want: { deploy: [] },
    },
    {
      name: "the rollout step's instance in the update wait: not deployed",
      given: { spec, internal: internalOf({ rollout: { instance: 1, toVersion: 1, phase: "removed", at: now - wait + 1 } }) },
      want: { deploy: [] },
    },
    {
      name: "the rollout step's instance after the update wait: deployed",
      given: { spec, internal: internalOf({ rollout: { instance: 1, toVersion: 1, phase: "removed", at: now - wait } }) },
      want: { deploy: [1] },
    },
    { name: "a moving instance: its move deploys it", given: { spec, moving: [1] }, want: { deploy: [] } },
  ];
  it.each(rows)("$name", (row) => {
    const plan = decide(row.given);
    if (row.want.deploy) expect(plan.deploy).toEqual(row.want.deploy);
    if (row.want.starts) expect(plan.starts.map((start) => ({ instance: start.instance, restart: start.restart }))).toEqual(row.want.starts);
    if (row.want.wakeAt) expect(plan.wakeAt).toEqual(row.want.wakeAt);
    if (row.noRecord) expect(plan.records.has(1)).toBe(false);
    if (row.want.complete) {
      expect(plan.complete.map((pod) => pod.instance)).toEqual(row.want.complete);
      if (row.want.complete.length > 0) {
        expect(plan.complete[0]!.indexes).toEqual([1]);
        expect(plan.complete[0]!.pod.node).toBe("n2");
      }
    }
    if (row.recordError !== undefined) expect(plan.records.get(1)?.lastError).toMatch(row.recordError);
  });

  it("an exit already counted is not counted twice (R9)", () => {
    const c = container({ instance: 1 }, exited(3, now - 100));
    const first = decide({ spec, pods: [c] }).records.get(1)!;
    const again = decide({ spec, pods: [c], internal: internalOf({ instances: { "1": first } }) });
    expect(again.records.get(1)!.failures).toBe(first.failures);
  });

  it("older-format containers of kept pods on reachable nodes are renamed in place", () => {
    const legacyLabels = { "io.capstan.podgroup": "web", "io.capstan.instance": "0", "io.capstan.version": "1" };
    const legacy = container({ instance: 1 }, { name: "web-0-old", labels: legacyLabels });
    const legacyDown = container({ instance: 2, node: down }, { name: "web-1-old", labels: { ...legacyLabels, "io.capstan.instance": "1" } });
    const spec2 = group(2);
    const renames = planRenames(viewOf(spec2, [legacy, legacyDown]), reachable);
    expect(renames.map((row) => [row.instance, row.container.id, row.to])).toEqual([[1, legacy.id, "web.v1-i1-d0"]]);
    expect(decide({ spec: spec2, pods: [legacy, legacyDown] })).not.toHaveProperty("renames"); // the pass renames before it plans
  });
});

describe("instance numbers: containers of the 0-based numbering (docs/podgroup-controller.md)", () => {
  const zeroBased = (instance: number, over: Partial<CachedContainer> = {}) => {
    const c = container({ instance });
    const labels: Record<string, string> = { ...c.labels, "io.capstan.instance": String(instance) };
    delete labels["io.capstan.numbering"];
    return { ...c, name: `web.v1-i${instance}-d0`, labels, ...over };
  };

  it("are adopted as instance + 1 (none deployed, none surplus) and renamed highest first", () => {
    const pods = [zeroBased(0), zeroBased(1), zeroBased(2, { node: "n2" })];
    const plan = decide({ spec: group(3), pods });
    expect(plan.deploy).toEqual([]);
    expect(plan.surplus).toBeUndefined();
    expect(plan.extras).toEqual([]);
    expect(planRenames(viewOf(group(3), pods), reachable).map((row) => [row.instance, row.container.name, row.to])).toEqual([
      [3, "web.v1-i2-d0", "web.v1-i3-d0"],
      [2, "web.v1-i1-d0", "web.v1-i2-d0"],
      [1, "web.v1-i0-d0", "web.v1-i1-d0"],
    ]);
  });

  it("read the same once renamed: nothing more to rename, nothing to deploy", () => {
    const renamed = [zeroBased(0, { name: "web.v1-i1-d0" }), zeroBased(1, { name: "web.v1-i2-d0" })];
    const plan = decide({ spec: group(2), pods: renamed });
    expect(planRenames(viewOf(group(2), renamed), reachable)).toEqual([]);
    expect(plan.deploy).toEqual([]);
  });

  it("one whose instance is in its name only is never renamed (the rollout replaces it)", () => {
    const nameOnly = container({ instance: 1 }, { name: "web.v1-i0-d0", labels: { "io.capstan.podgroup": "web", "io.capstan.version": "1" } });
    const view = viewOf(group(1), [nameOnly]);
    expect(view.instances.get(1)?.kept?.containers.get(0)?.id.instanceFromName).toBe(true);
    expect(planRenames(view, reachable)).toEqual([]);
  });

  it("a kept previous container of the 0-based numbering is mapped by its labels and renamed", () => {
    const previous = zeroBased(0, { name: previousContainerName("web", 0, 0), state: "exited" });
    const view = viewOf(group(1), [container({ instance: 1 }), previous]);
    expect([...view.previous.keys()]).toEqual([1]);
    expect(planRenames(view, reachable).map((row) => [row.instance, row.to])).toEqual([[1, previousContainerName("web", 1, 0)]]);
    const again = viewOf(group(1), [container({ instance: 1 }), { ...previous, name: previousContainerName("web", 1, 0) }]);
    expect([...again.previous.keys()]).toEqual([1]);
    expect(planRenames(again, reachable)).toEqual([]);
  });
});

describe("R10: secret files", () => {
  const spec = group(1, 1, {}, { containers: [{ image: "img", secretFiles: ["a.conf", "b.conf"] }] });
  const created = () => container({ instance: 1 }, { state: "created", startedAt: undefined });
  const marker = (paths: string[], over: Partial<SecretMarkerEntry> = {}): SecretMarkerEntry => ({ containerId: "", podGroup: "web", paths, error: undefined, ...over });
  const rows: { name: string; marker?: SecretMarkerEntry; waits: boolean }[] = [
    { name: "no marker: waits", waits: true },
    { name: "a marker missing a path: waits", marker: marker(["a.conf"]), waits: true },
    { name: "a marker of another group: waits", marker: marker(["a.conf", "b.conf"], { podGroup: "db" }), waits: true },
    { name: "an error marker: waits, with its error", marker: marker(["a.conf", "b.conf"], { error: "secret file b.conf is not written" }), waits: true },
    { name: "a marker covering every path: starts", marker: marker(["a.conf", "b.conf"]), waits: false },
  ];
  it.each(rows)("$name", (row) => {
    const c = created();
    const plan = decide({ spec, pods: [c], ...(row.marker && { markers: { [c.id]: row.marker } }) });
    expect(plan.starts.length).toBe(row.waits ? 0 : 1);
    expect(plan.waitingForSecrets.has(1)).toBe(row.waits);
    if (row.waits) expect(plan.wakeAt).toContain(now + secretsRecheckMs);
    if (row.marker?.error) expect(plan.waitingForSecrets.get(1)).toContain("secret file b.conf is not written");
  });

  it("a restart of an exited container does not wait", () => {
    const plan = decide({ spec, pods: [container({ instance: 1 }, exited(3, now - 5_000))] });
    expect(plan.starts).toHaveLength(1);
    expect(secretsWait(spec, "web", viewOf(spec, [container({ instance: 1 }, exited(3))]).instances.get(1)!.kept!, () => undefined)).toBeUndefined();
  });
});

describe("bookkeeping", () => {
  it("stateful: each kept pod's node is recorded (redeploys go back there)", () => {
    const spec = group(2, 1, {}, { stateful: true });
    const records = statefulNodes(spec, viewOf(spec, [container({ instance: 1, node: "n2" }), container({ instance: 3, node: "n1" })]), internalOf());
    expect([...records]).toEqual([[1, { restarts: 0, failures: 0, node: "n2" }]]);
    expect(statefulNodes(group(2), viewOf(group(2), [container({ instance: 1 })]), internalOf()).size).toBe(0);
  });

  it("containers with the group's label but no readable instance are reported, not touched", () => {
    const broken = container({ instance: 1 }, { name: "odd", labels: { "io.capstan.podgroup": "web", "io.capstan.format": "2" } });
    const spec = group(1);
    expect(unidentifiedNotes("web", viewOf(spec, [broken]))).toEqual([
      "container odd on n1 is labelled io.capstan.podgroup=web but its instance cannot be read; left alone",
    ]);
    const plan = decide({ spec, pods: [broken] });
    expect(plan.extras).toEqual([]);
    expect(plan.surplus).toBeUndefined();
  });
});
