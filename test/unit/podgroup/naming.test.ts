import { describe, expect, it } from "vitest";
import { containerLabels, containerName, identify, labelKeys } from "../../../controllers/podgroup/naming.ts";

describe("container names and labels", () => {
  it("names containers <group>.v<version>-i<instance>-d<drift>, -c<index> from the second container on", () => {
    expect(containerName({ group: "web", version: 3, instance: 1, drift: 0, index: 0 })).toBe("web.v3-i1-d0");
    expect(containerName({ group: "a.b", version: 1, instance: 12, drift: 2, index: 1 })).toBe("a.b.v1-i12-d2-c1");
  });

  it("labels every field plus the current data format", () => {
    expect(containerLabels({ group: "web", namespace: "ns", version: 3, instance: 1, drift: 0, index: 2 })).toEqual({
      "io.capstan.podgroup": "web",
      "io.capstan.namespace": "ns",
      "io.capstan.instance": "1",
      "io.capstan.version": "3",
      "io.capstan.drift": "0",
      "io.capstan.container-index": "2",
      "io.capstan.format": "2",
      "io.capstan.numbering": "1",
    });
  });
});

describe("identify", () => {
  const labels = containerLabels({ group: "web", namespace: "ns", version: 3, instance: 1, drift: 0, index: 0 });

  it("reads a current-format container from its labels, whatever its name", () => {
    expect(identify({ name: "renamed-by-hand", labels }, "web")).toEqual({ group: "web", instance: 1, version: 3, drift: 0, index: 0, format: "2" });
  });

  it("is not ours without our group label, even with our name", () => {
    expect(identify({ name: "web.v3-i1-d0", labels: {} }, "web")).toBeUndefined();
    expect(identify({ name: "web.v3-i1-d0", labels }, "other")).toBeUndefined();
  });

  it("refuses a current-format container with a broken label", () => {
    expect(identify({ name: "web.v3-i1-d0", labels: { ...labels, [labelKeys.instance]: "x" } }, "web")).toBeUndefined();
  });

  it("reads an older-format container from its labels where present, else from its name", () => {
    const old: Record<string, string> = { [labelKeys.podGroup]: "web", [labelKeys.version]: "2" };
    // Numbered from 0 (no io.capstan.numbering): i4 in its name is instance 5, read from the name.
    expect(identify({ name: "web-pod.v9-i4-d1-c1", labels: old }, "web")).toEqual({
      group: "web",
      instance: 5,
      version: 2,
      drift: 1,
      index: 1,
      format: "1",
      instanceFromName: true,
    });
    expect(identify({ name: "no-pattern", labels: { [labelKeys.podGroup]: "web" } }, "web")).toBeUndefined();
    expect(identify({ name: "x", labels: { ...old, [labelKeys.instance]: "0", [labelKeys.format]: "1" } }, "web")).toMatchObject({
      instance: 1,
      version: 2,
      drift: 0,
      index: 0,
      format: "1",
    });
  });
});

describe("instance numbers (docs/podgroup-controller.md, \"Instance numbers\")", () => {
  const current = containerLabels({ group: "web", namespace: "ns", version: 1, instance: 1, drift: 0, index: 0 });
  const zeroBased = (instance: number): Record<string, string> => {
    const l: Record<string, string> = { ...current, [labelKeys.instance]: String(instance) };
    delete l[labelKeys.numbering];
    return l;
  };

  it("a container labelled io.capstan.numbering=1 is read as it is", () => {
    expect(identify({ name: "web.v1-i1-d0", labels: current }, "web")?.instance).toBe(1);
  });

  it("a current-format container of the 0-based numbering (i0..iN-1) is instance 1..N, before and after its rename", () => {
    for (const k of [0, 1, 2]) {
      expect(identify({ name: `web.v1-i${k}-d0`, labels: zeroBased(k) }, "web")).toEqual({ group: "web", instance: k + 1, version: 1, drift: 0, index: 0, format: "2" });
      expect(identify({ name: `web.v1-i${k + 1}-d0`, labels: zeroBased(k) }, "web")?.instance).toBe(k + 1);
    }
  });
});
