import { describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { planContainer, podRequest } from "../../../controllers/podgroup/container-spec.ts";
import type { StoredPodGroup } from "../../../controllers/podgroup/stored.ts";

function group(over: Partial<StoredPodGroup["pod"]> = {}): StoredPodGroup {
  return {
    name: "web",
    namespace: "shop",
    numInstances: 2,
    restartPolicy: "onfail",
    pod: {
      name: "web-pod",
      namespace: "shop",
      version: 4,
      containers: [
        {
          image: "img:1",
          command: ["serve", "--port", "80"],
          entrypoint: ["/init"],
          env: ["A=1", "CAPSTAN_INSTANCE_NO=99"],
          user: "app",
          workingDir: "/srv",
          cpuLimit: 0.5,
          memoryLimit: 128 << 20,
          expose: 8080,
          volumes: ["/data", "cache:/var/cache:ro"],
          systemVolumes: ["/etc/hosts:/etc/hosts:ro"],
          logConfig: { type: "json-file", config: { "max-size": "1m" } },
        },
        { image: "side:1", memoryLimit: 32 << 20 },
      ],
      network: "none",
      killTimeout: 30,
      ...over,
    },
    createdAt: "t",
    updatedAt: "t",
  };
}

describe("planContainer", () => {
  it("maps the container spec onto the engine's create request", () => {
    const p = planContainer(group(), 1, 0, 0);
    expect(p.name).toBe("web.v4-i1-d0");
    expect(p.limits).toEqual({ memoryBytes: 128 << 20, nanoCpus: 500_000_000 });
    expect(p.spec).toMatchObject({
      image: "img:1",
      cmd: ["serve", "--port", "80"],
      entrypoint: ["/init"],
      user: "app",
      workingDir: "/srv",
      memoryBytes: 128 << 20,
      nanoCpus: 500_000_000,
      networkMode: "none",
      expose: [{ containerPort: 8080 }],
      logConfig: { type: "json-file", config: { "max-size": "1m" } },
      stopTimeoutSeconds: 30,
      restartPolicy: { name: "no" },
    });
    // The user's own env first; ours set exactly once (a user value for our key is replaced).
    expect(p.spec.env).toEqual(["A=1", "CAPSTAN_INSTANCE_NO=1", "CAPSTAN_PODGROUP=web", "CAPSTAN_POD_NAME=web-pod", "CAPSTAN_POD_NAMESPACE=shop"]);
    expect(p.spec.binds).toEqual([expect.stringMatching(/^web\.i0\.data-[0-9a-f]{6}:\/data$/), "web.i0.cache:/var/cache:ro", "/etc/hosts:/etc/hosts:ro"]);
    expect(p.spec.labels).toMatchObject({ "io.capstan.podgroup": "web", "io.capstan.version": "4", "io.capstan.container-index": "0" });
  });

  it("names the second container -c1, leaves out what the spec leaves out, defaults the kill timeout to 10 s", () => {
    const p = planContainer(group({ network: undefined, killTimeout: undefined }), 1, 1, 0);
    expect(p.name).toBe("web.v4-i1-d0-c1");
    expect(p.spec.networkMode).toBeUndefined(); // the engine's default network
    expect(p.spec.cmd).toBeUndefined();
    expect(p.spec.nanoCpus).toBeUndefined();
    expect(p.spec.expose).toBeUndefined();
    expect(p.spec.stopTimeoutSeconds).toBe(10);
  });

  it("rejects an instance's container index the pod does not have", () => {
    expect(() => planContainer(group(), 1, 2, 0)).toThrow(RangeError);
    expect(() => planContainer(group(), 0, 0, 0)).toThrow(/numbered from 1/);
  });
});

describe("volumes and requests", () => {
  it("scopes named volumes to group, instance and container; the same path always gets the same name", () => {
    const g = group({ containers: [{ image: "img", volumes: ["/data", "/a/b:rw"] }, { image: "img" }, { image: "img", volumes: ["db:/var/lib/db"] }] });
    const binds = (instance: number, index: number) => planContainer(g, instance, index, 0).spec.binds;
    const sha6 = (p: string) => createHash("sha256").update(p).digest("hex").slice(0, 6);
    // The names existing volumes already have: a change would orphan every instance's data. The
    // slot is instanceNo - 1: instance 1 finds what instance 0 wrote when instances counted from 0.
    expect(binds(1, 0)).toEqual([`web.i0.data-${sha6("/data")}:/data`, `web.i0.a_b-${sha6("/a/b")}:/a/b:rw`]);
    expect(binds(2, 0)![0]).toBe(`web.i1.data-${sha6("/data")}:/data`);
    expect(binds(1, 1)).toBeUndefined();
    expect(binds(1, 2)).toEqual(["web.i0.c2.db:/var/lib/db"]);
    expect(() => planContainer(group({ containers: [{ image: "img", volumes: ["relative"] }] }), 1, 0, 0)).toThrow(TypeError);
  });

  it("a pod reserves the sum of its containers' limits", () => {
    expect(podRequest(group().pod)).toEqual({ memoryBytes: 160 << 20, nanoCpus: 500_000_000 });
  });
});
