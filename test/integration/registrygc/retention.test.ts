// Retention policies applied by garbage collection runs, on real storage (filesystem) with a real
// store: a policy over a prepared set of tags removes exactly the expected ones, a tag a PodGroup
// uses survives, the dry run lists the same set the real run removes, and the images of removed
// tags are collected once untagged.
import { utimesSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { createPodGroup } from "../../../api/orchestrator/records.ts";
import { openRegistry } from "../../../api/registry/access.ts";
import { createRegistryApi } from "../../../api/registry/api.ts";
import { StoreGcJournal } from "../../../api/registry/gc-journal.ts";
import * as paths from "../../../api/resources/registry-paths.ts";
import { PodGroupSpecInput, type StoredPodGroup } from "../../../api/resources/podgroup.ts";
import { collect } from "../../../controllers/registrygc/collector.ts";
import { InUse } from "../../../controllers/registrygc/in-use.ts";
import { parsePolicy, type GcPolicy } from "../../../controllers/registrygc/policy.ts";
import { serveApp, type Served } from "../console/harness.ts";
import { Client, makeImage, type TestImage } from "../registry/harness.ts";

let dir: string;
let driver: FilesystemDriver;
let store: SqliteStore;
let served: Served;
let client: Client;
let clock: number;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-gc-ret-"));
  const root = join(dir, "root");
  driver = new FilesystemDriver({ rootDirectory: root });
  store = new SqliteStore({ path: join(dir, "state.db") });
  clock = Date.now();
  served = await serveApp(createRegistryApi({ driver, deleteEnabled: true, authorizer: openRegistry, journal: new StoreGcJournal(store, () => clock) }));
  client = new Client(served.base);
});
afterEach(async () => {
  await served.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const day = 86_400_000;

function podGroup(name: string, image: string): StoredPodGroup {
  const spec = PodGroupSpecInput.parse({ Name: name, Namespace: "shop", NumInstances: 1, RestartPolicy: 1, Pod: { Namespace: "shop", Containers: [{ Image: image }] } });
  const { version: _v, ...rest } = spec;
  return { ...rest, pod: { ...spec.pod, name: spec.name, version: 1 }, createdAt: "2026-01-01T00:00:00Z", updatedAt: "2026-01-01T00:00:00Z" };
}

/** Push `tag` with its own image, pushed `ageDays` ago (the tag link's mtime). */
async function pushTag(repo: string, tag: string, ageDays: number): Promise<TestImage> {
  const img = makeImage({ layers: 1 });
  await client.pushImage(repo, tag, img);
  const t = new Date(clock - ageDays * day);
  utimesSync(join(dir, "root", paths.tagCurrentLink(repo, tag)), t, t);
  return img;
}

function policy(json: unknown): GcPolicy {
  const p = parsePolicy(json);
  if (!p.ok) throw new Error(p.problems.join("; "));
  return p.policy;
}

describe("retention policies in a run", () => {
  it("removes exactly the expected tags, keeps the one in use, and the dry run lists the same", async () => {
    const ages: [string, number][] = [
      ["release-1", 50], ["release-2", 40], ["release-3", 30], ["release-4", 20], ["release-5", 10],
      ["build-1", 9], ["build-2", 8], ["build-3", 7], ["build-10", 7],
      ["latest", 100], ["v1.0", 100],
    ];
    const images = new Map<string, TestImage>();
    for (const [tag, age] of ages) images.set(tag, await pushTag("shop/web", tag, age));
    await pushTag("other/app", "release-1", 100); // another repository: not the policy's
    await createPodGroup(store, podGroup("shop.web.web", "127.0.0.1:5000/shop/web:release-1"));
    clock += 60_000;

    const p = policy({ name: "shop", repositories: "shop/**", keepNewest: { groups: ["^release-", "^build-"], count: 2 }, keepNewerThanDays: 8.5 });
    const retention = { policy: p, inUse: await InUse.read(store) };
    // release: newest 2 are 5 and 4; 1 is in use; 2 and 3 go. build (ages 9, 8, 7, 7): newest two
    // are build-10 and build-3 (a tie at 7 days, broken by name); build-2 is newer than 8.5 days;
    // build-1 goes. latest and v1.0 match no group.
    const expected = ["build-1", "release-2", "release-3"];

    const dry = await collect({ driver, store, mode: "full", dryRun: true, deleteUntagged: false, graceMs: 0, now: () => clock, retention });
    expect(dry.tagsDeleted.map((t) => `${t.repository}:${t.tag}`).sort()).toEqual(expected.map((t) => `shop/web:${t}`));
    expect(((await client.req("GET", "/v2/shop/web/tags/list")).json() as { tags: string[] }).tags).toHaveLength(ages.length); // nothing removed

    const real = await collect({ driver, store, mode: "full", dryRun: false, deleteUntagged: true, untaggedGraceMs: 0, graceMs: 0, now: () => clock, retention });
    expect(real.tagsDeleted.map((t) => `${t.repository}:${t.tag}`).sort()).toEqual(dry.tagsDeleted.map((t) => `${t.repository}:${t.tag}`).sort());
    const left = ((await client.req("GET", "/v2/shop/web/tags/list")).json() as { tags: string[] }).tags.sort();
    expect(left).toEqual(ages.map(([t]) => t).filter((t) => !expected.includes(t)).sort());
    expect(((await client.req("GET", "/v2/other/app/tags/list")).json() as { tags: string[] }).tags).toEqual(["release-1"]);
    // The removed tags' images were untagged, so -m deleted them and their blobs went too.
    expect(real.manifestsDeleted.map((m) => m.digest).sort()).toEqual(expected.map((t) => images.get(t)!.digest).sort());
    for (const t of expected) {
      const img = images.get(t)!;
      expect((await client.req("GET", `/v2/shop/web/manifests/${img.digest}`, { headers: { accept: img.mediaType } })).status).toBe(404);
    }
    const inUse = images.get("release-1")!;
    expect((await client.req("GET", "/v2/shop/web/manifests/release-1", { headers: { accept: inUse.mediaType } })).status).toBe(200);
  });

  it("a tag pushed again while the run removes it stays, pointing at the new push", async () => {
    for (const [tag, age] of [["release-1", 30], ["release-2", 20], ["release-3", 10]] as const) await pushTag("shop/api", tag, age);
    clock += 60_000;
    const p = policy({ name: "api", repositories: "shop/api", keepNewest: { groups: ["^release-"], count: 1 } });
    // The race: release-1 is pushed again right after the run read the tag touches.
    const fresh = makeImage({ layers: 1 });
    const racing = Object.create(driver) as FilesystemDriver;
    let pushed = false;
    racing.delete = async (path: string) => {
      if (!pushed && path === paths.tagDir("shop/api", "release-1")) {
        pushed = true;
        await client.pushImage("shop/api", "release-1", fresh);
      }
      return driver.delete(path);
    };
    const report = await collect({ driver: racing, store, mode: "full", dryRun: false, deleteUntagged: false, graceMs: 0, now: () => clock, retention: { policy: p, inUse: InUse.of([]) } });
    expect(pushed).toBe(true);
    expect(report.tagsDeleted.map((t) => t.tag)).toEqual(["release-2"]);
    const got = await client.req("GET", "/v2/shop/api/manifests/release-1", { headers: { accept: fresh.mediaType } });
    expect(got.status).toBe(200);
    expect(got.text).toBe(fresh.manifest);
  });
});
