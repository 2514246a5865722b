// In-use protection: image references taken apart as the engine reads them, and the images of
// PodGroup and Dependency specs read from a real SqliteStore under the real keys, in the stored
// form the orchestrator API writes.
import { afterEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { createDependency } from "../../../api/orchestrator/depends-records.ts";
import { createPodGroup } from "../../../api/orchestrator/records.ts";
import { DependencySpecInput, dependencyLayout, type StoredDependency } from "../../../api/resources/dependency.ts";
import { keys } from "../../../api/resources/keys.ts";
import { PodGroupSpecInput, type StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { InUse, parseImageReference } from "../../../controllers/registrygc/in-use.ts";

const stores: SqliteStore[] = [];
const newStore = () => {
  const s = new SqliteStore({ path: ":memory:" });
  stores.push(s);
  return s;
};
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

const d1 = `sha256:${"a".repeat(64)}`;
const d2 = `sha256:${"b".repeat(64)}`;
const now = "2026-01-31T04:00:00.000Z";

/** The record POST /api/podgroups stores (api/orchestrator/podgroups.ts storedForm). */
function podGroup(name: string, images: string[], extra: Partial<StoredPodGroup> = {}): StoredPodGroup {
  const spec = PodGroupSpecInput.parse({
    Name: name,
    Namespace: name.split(".")[0],
    NumInstances: 1,
    RestartPolicy: 1,
    Pod: { Namespace: name.split(".")[0], Containers: images.map((image) => ({ Image: image })) },
  });
  const { version: _v, ...rest } = spec;
  return { ...rest, pod: { ...spec.pod, name: spec.name, version: 1 }, createdAt: now, updatedAt: now, ...extra };
}

/** The record POST /api/depends stores. */
function dependency(name: string, images: string[]): StoredDependency {
  const spec = DependencySpecInput.parse({ name, namespace: "shop", containers: images.map((image) => ({ image })) });
  return { ...spec, version: 1, createdAt: now, updatedAt: now };
}

describe("parseImageReference", () => {
  it.each([
    ["127.0.0.1:5000/shop/web:1.2", { host: "127.0.0.1:5000", repository: "shop/web", tag: "1.2" }],
    [`registry.example:5000/shop/web@${d1}`, { host: "registry.example:5000", repository: "shop/web", digest: d1 }],
    [`registry.example/shop/web:v1@${d1}`, { host: "registry.example", repository: "shop/web", tag: "v1", digest: d1 }],
    ["shop/web", { repository: "shop/web", tag: "latest" }],
    ["shop/web:release-3", { repository: "shop/web", tag: "release-3" }],
    ["localhost/shop/web:2", { host: "localhost", repository: "shop/web", tag: "2" }],
    ["localhost:5000/web", { host: "localhost:5000", repository: "web", tag: "latest" }],
    ["Registry.Example/shop/web", { host: "registry.example", repository: "shop/web", tag: "latest" }],
    ["[::1]:5000/shop/web:x", { host: "[::1]:5000", repository: "shop/web", tag: "x" }],
    ["nginx", { repository: "nginx", tag: "latest" }],
    ["nginx:1.27", { repository: "nginx", tag: "1.27" }],
    ["library/nginx:1.27", { repository: "library/nginx", tag: "1.27" }],
    ["shop/a.b_c__d-e/f", { repository: "shop/a.b_c__d-e/f", tag: "latest" }],
    ["a/b/c/d:tag_1.0-rc", { repository: "a/b/c/d", tag: "tag_1.0-rc" }],
  ])("%s", (image, expected) => {
    expect(parseImageReference(image)).toEqual(expected);
  });

  it.each(["", "Shop/Web", "shop/web:", "shop/web:-x", "shop//web", "shop/web@sha256", "shop/web@", "127.0.0.1:5000/", "shop/web:a:b", " shop/web"])("%j is no reference", (image) => {
    expect(parseImageReference(image)).toBeUndefined();
  });
});

describe("InUse", () => {
  it("names the first user of a tag or digest, ignoring the registry host", async () => {
    const store = newStore();
    await createPodGroup(store, podGroup("shop.web.web", ["127.0.0.1:5000/shop/web:1.2", `registry.example:5000/shop/api@${d1}`]));
    await createPodGroup(store, podGroup("shop.worker.worker", ["shop/web:1.2", "shop/tool"]));
    await createPodGroup(store, podGroup("gone.web.web", ["registry.example:5000/gone/web:3"], { deleting: true }));
    await createDependency(store, dependencyLayout(), dependency("redis", [`localhost:5000/shop/redis:7@${d2}`, "nginx:1.27"]));

    const inUse = await InUse.read(store);
    expect(inUse.unreadable).toEqual([]);
    expect(inUse.unparsable).toEqual([]);
    expect(inUse.revision).toBeGreaterThan(0);
    expect(inUse.usedBy("shop/web", "1.2", d2)).toBe("podgroup shop.web.web");
    expect(inUse.usedBy("shop/web", "1.3", d2)).toBeUndefined();
    expect(inUse.usedBy("shop/api", "anything", d1)).toBe("podgroup shop.web.web");
    expect(inUse.usedBy("shop/api", "latest", d2)).toBeUndefined();
    expect(inUse.usedBy("shop/tool", "latest", "")).toBe("podgroup shop.worker.worker");
    // a group being deleted still runs its containers
    expect(inUse.usedBy("gone/web", "3", "")).toBe("podgroup gone.web.web");
    // a dependency, by tag and by digest; an untagged manifest is asked about by digest alone
    expect(inUse.usedBy("shop/redis", "7", "")).toBe("dependency redis");
    expect(inUse.usedBy("shop/redis", "", d2)).toBe("dependency redis");
    expect(inUse.usedBy("shop/redis", "", d1)).toBeUndefined();
    // Docker Hub's official images have two spellings
    expect(inUse.usedBy("nginx", "1.27", "")).toBe("dependency redis");
    expect(inUse.usedBy("library/nginx", "1.27", "")).toBe("dependency redis");
    expect(inUse.usedBy("shop/web", "", "")).toBeUndefined();
  });

  it("reads past the first page of a large prefix", async () => {
    const store = newStore();
    const ops = Array.from({ length: 1100 }, (_, i) => {
      const name = `app${String(i).padStart(4, "0")}.web.web`;
      return { type: "put" as const, key: keys.podGroup(name), value: JSON.stringify(podGroup(name, [`127.0.0.1:5000/app/web:${i}`])) };
    });
    await store.txn([], ops);
    const inUse = await InUse.read(store);
    expect(inUse.usedBy("app/web", "0", "")).toBe("podgroup app0000.web.web");
    expect(inUse.usedBy("app/web", "1099", "")).toBe("podgroup app1099.web.web");
  });

  it("counts every image as in use while a record's images cannot be read, and names it", async () => {
    const store = newStore();
    await createPodGroup(store, podGroup("shop.web.web", ["shop/web:1"]));
    await store.put(keys.podGroup("shop.broken.web"), "{not json");
    const inUse = await InUse.read(store);
    expect(inUse.unreadable).toEqual([{ key: "/platform/orchestrator/podgroups/shop.broken.web", user: "podgroup shop.broken.web", reason: expect.stringMatching(/^not JSON/) }]);
    expect(inUse.usedBy("other/repo", "x", "")).toBe("podgroup shop.broken.web (unreadable record: its images are unknown, so any image may be in use)");

    await store.put(keys.podGroup("shop.broken.web"), JSON.stringify({ name: "shop.broken.web", pod: { containers: [{ image: "shop/ok:1" }, { cmd: ["x"] }] } }));
    const partly = await InUse.read(store);
    expect(partly.unreadable).toEqual([{ key: "/platform/orchestrator/podgroups/shop.broken.web", user: "podgroup shop.broken.web", reason: "pod.containers[1].image: not an image reference" }]);
    expect(partly.usedBy("other/repo", "x", "")).toMatch(/^podgroup shop\.broken\.web \(unreadable record/);

    await store.put(`${dependencyLayout().depends}cache`, JSON.stringify({ name: "cache" }));
    await store.delete(keys.podGroup("shop.broken.web"));
    const dep = await InUse.read(store);
    expect(dep.unreadable.map((u) => [u.user, u.reason])).toEqual([["dependency cache", "containers: not a list of containers"]]);

    await store.delete(`${dependencyLayout().depends}cache`);
    const fixed = await InUse.read(store);
    expect(fixed.unreadable).toEqual([]);
    expect(fixed.usedBy("other/repo", "x", "")).toBeUndefined();
    expect(fixed.usedBy("shop/web", "1", "")).toBe("podgroup shop.web.web");
  });

  it("skips references no engine could pull, listing them", () => {
    const inUse = InUse.of([{ user: "podgroup a", images: ["Shop/Web:1", "shop/web:2"] }]);
    expect(inUse.unparsable).toEqual([{ user: "podgroup a", image: "Shop/Web:1" }]);
    expect(inUse.usedBy("shop/web", "2", "")).toBe("podgroup a");
    expect(inUse.usedBy("shop/web", "1", "")).toBeUndefined();
  });
});
