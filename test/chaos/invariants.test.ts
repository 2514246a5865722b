// The chaos suite's invariant checker on hand-made inputs: a matching state passes, and each kind
// of violation is found when the input is broken in that one way.
import { describe, expect, it } from "vitest";
import { checkInvariants, type DesiredGroup, type ObservedContainer, type StatusGroup } from "./invariants.ts";

const file = "/platform/app/app.env";
const desired: DesiredGroup[] = [
  { name: "a.web.g1", numInstances: 2, version: 3, secretFiles: { [file]: "k=1" } },
  { name: "a.web.g2", numInstances: 1, version: 1, secretFiles: {} },
];
const container = (group: string, instance: number, version: number, id: string, more: Partial<ObservedContainer> = {}): ObservedContainer => ({
  id,
  name: `${group}.v${version}-i${instance}-d0`,
  node: "n1",
  group,
  instance: String(instance),
  version: String(version),
  state: "running",
  previous: false,
  files: { [file]: "k=1" },
  ...more,
});
const observed: ObservedContainer[] = [container("a.web.g1", 1, 3, "c1"), container("a.web.g1", 2, 3, "c2"), container("a.web.g2", 1, 1, "c3", { files: {} })];
const statusFor = (cs: ObservedContainer[]): StatusGroup[] =>
  desired.map((g) => ({
    name: g.name,
    pods: cs.filter((c) => c.group === g.name && !c.previous).map((c) => ({ instanceNo: Number(c.instance), containers: [{ id: c.id, status: c.state }] })),
  }));
const status = statusFor(observed);
const kinds = (d: DesiredGroup[], o: ObservedContainer[], s: StatusGroup[]) => checkInvariants(d, o, s).map((v) => v.kind);

describe("checkInvariants", () => {
  it("finds nothing when the engines, the status and the files match the desired state", () => {
    expect(checkInvariants(desired, observed, status)).toEqual([]);
  });

  it("a kept previous container is not an instance", () => {
    const prev = container("a.web.g1", 1, 2, "p1", { name: "a.web.g1.previous-i1", previous: true, state: "exited" });
    expect(checkInvariants(desired, [...observed, prev], status)).toEqual([]);
  });

  it("count: an instance missing, or not running", () => {
    const missing = observed.filter((c) => c.id !== "c2");
    expect(kinds(desired, missing, statusFor(missing))).toEqual(["count", "status"]);
    const stopped = observed.map((c) => (c.id === "c2" ? { ...c, state: "exited" } : c));
    expect(kinds(desired, stopped, statusFor(stopped))).toEqual(["count"]);
  });

  it("duplicate: one instance number twice, on any node", () => {
    const twice = [...observed, container("a.web.g1", 2, 3, "c4", { node: "n2" })];
    const found = checkInvariants(desired, twice, statusFor(twice));
    expect(found.map((v) => v.kind)).toContain("duplicate");
    expect(found.find((v) => v.kind === "duplicate")!.detail).toContain("@n2");
  });

  it("orphan: a container of a group nobody wants (deleted)", () => {
    const orphan = [...observed, container("a.web.gone", 1, 1, "c9")];
    expect(checkInvariants(desired, orphan, status)).toEqual([{ kind: "orphan", group: "a.web.gone", detail: expect.stringContaining("a.web.gone.v1-i1-d0") }]);
  });

  it("version: an instance left at an older version", () => {
    const stale = observed.map((c) => (c.id === "c1" ? { ...c, version: "2" } : c));
    expect(kinds(desired, stale, status)).toEqual(["version"]);
  });

  it("status: a container the engines do not hold, one it does not name, a state that differs, a deleted group still served", () => {
    const ghost = status.map((s) => (s.name === "a.web.g2" ? { ...s, pods: [{ instanceNo: 1, containers: [{ id: "gone", status: "running" }] }] } : s));
    expect(kinds(desired, observed, ghost)).toEqual(["status", "status"]);
    const wrongState = status.map((s) => (s.name === "a.web.g2" ? { ...s, pods: [{ instanceNo: 1, containers: [{ id: "c3", status: "exited" }] }] } : s));
    expect(checkInvariants(desired, observed, wrongState)).toEqual([{ kind: "status", group: "a.web.g2", detail: expect.stringContaining("its engine says running") }]);
    expect(kinds(desired, observed, [...status, { name: "a.web.old", pods: [] }])).toEqual(["status"]);
    expect(kinds(desired, observed, status.slice(1))).toEqual(["status"]);
  });

  it("secret: a file missing or differing from the store", () => {
    const noFile = observed.map((c) => (c.id === "c1" ? { ...c, files: { [file]: null } } : c));
    expect(checkInvariants(desired, noFile, status)).toEqual([{ kind: "secret", group: "a.web.g1", detail: expect.stringContaining("missing") }]);
    const old = observed.map((c) => (c.id === "c2" ? { ...c, files: { [file]: "k=0" } } : c));
    expect(checkInvariants(desired, old, status)).toEqual([{ kind: "secret", group: "a.web.g1", detail: expect.stringContaining("differs") }]);
  });
});
