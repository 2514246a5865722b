// The collector on real storage (filesystem) with a real embedded store, the registry serving over
// HTTP on loopback with its journal: what it deletes, what it keeps, dry runs, incremental runs,
// and the quarantine protocol's rescue.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { openRegistry } from "../../../api/registry/access.ts";
import { createRegistryApi } from "../../../api/registry/api.ts";
import { StoreGcJournal } from "../../../api/registry/gc-journal.ts";
import { gcKeys } from "../../../api/resources/registry-gc.ts";
import { digestOrUndefined } from "../../../api/resources/registry-names.ts";
import * as paths from "../../../api/resources/registry-paths.ts";
import { collect, CollectorState, type CollectOptions } from "../../../controllers/registrygc/collector.ts";
import { serveApp, type Served } from "../console/harness.ts";
import { Client, makeImage, makeIndex, type TestImage } from "../registry/harness.ts";

let dir: string;
let driver: FilesystemDriver;
let store: SqliteStore;
let served: Served;
let client: Client;
/** The registry's and the collector's clock (ms); tests move it forward. */
let clock: number;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-gc-"));
  driver = new FilesystemDriver({ rootDirectory: join(dir, "root") });
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

/** A run with grace 0 a minute after everything so far (touches expire after their resolution). */
const gc = (o: Partial<CollectOptions> = {}) => {
  clock += 60_000;
  return collect({ driver, store, mode: "full", dryRun: false, deleteUntagged: false, graceMs: 0, now: () => clock, ...o });
};

async function stored(digest: string): Promise<boolean> {
  try {
    await driver.stat(paths.blobData(digestOrUndefined(digest)!));
    return true;
  } catch {
    return false;
  }
}

import { createHash } from "node:crypto";
const digestOf = (b: Uint8Array | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

describe("garbage collection", () => {
  it("deletes the blobs of a deleted manifest and keeps what a kept image shares", async () => {
    const keep = makeImage({ layers: 2 });
    const gone = makeImage({ layers: 2 });
    // gone shares keep's first layer
    const shared = keep.blobs[1]!;
    const goneImage: TestImage = (() => {
      const img = makeImage({ layers: 1 });
      const manifest = JSON.parse(img.manifest);
      manifest.layers.push({ mediaType: manifest.layers[0].mediaType, digest: digestOf(shared), size: shared.byteLength });
      const text = JSON.stringify(manifest);
      return { blobs: [...img.blobs, shared], manifest: text, mediaType: img.mediaType, digest: digestOf(text) };
    })();
    void gone;
    await client.pushImage("app/keep", "v1", keep);
    await client.pushImage("app/gone", "v1", goneImage);
    expect((await client.req("DELETE", `/v2/app/gone/manifests/${goneImage.digest}`)).status).toBe(202);

    const dry = await gc({ dryRun: true });
    expect(dry.dryRun).toBe(true);
    const expected = [goneImage.digest, digestOf(goneImage.blobs[0]!), digestOf(goneImage.blobs[1]!)].sort();
    expect(dry.deleted.map((d) => d.digest).sort()).toEqual(expected);
    for (const d of expected) expect(await stored(d)).toBe(true); // a dry run deletes nothing

    const report = await gc();
    expect(report.deleted.map((d) => d.digest).sort()).toEqual(expected);
    expect(report.bytesDeleted).toBe(dry.bytesDeleted);
    for (const d of expected) expect(await stored(d)).toBe(false);
    expect(await stored(digestOf(shared))).toBe(true);
    expect(await client.pullsCompletely("app/keep", "v1", keep)).toBe(true);
    // the deleted image's repository no longer links the blobs
    expect((await client.req("HEAD", `/v2/app/gone/blobs/${digestOf(goneImage.blobs[1]!)}`)).status).toBe(404);
  });

  it("keeps unreferenced blobs within the grace, and deletes them on a later run", async () => {
    const img = makeImage({ layers: 1 });
    const orphan = await client.pushBlob("app/x", Buffer.from("orphan blob"));
    await client.pushImage("app/x", "v1", img);
    const state = new CollectorState();
    const first = await gc({ state, graceMs: 3_600_000 });
    expect(first.blobsDeleted).toBe(0);
    expect(first.pending).toBe(1);
    expect((await store.get(gcKeys.pendingOf(orphan))) !== null).toBe(true);
    clock += 2 * 3_600_000;
    const second = await gc({ state, mode: "incremental", graceMs: 3_600_000 });
    expect(second.mode).toBe("incremental");
    expect(second.deleted.map((d) => d.digest)).toEqual([orphan]);
    // its link in the repository it was uploaded to went with it
    await expect(driver.stat(paths.layerLink("app/x", digestOrUndefined(orphan)!))).rejects.toThrow(/not found/);
    expect(await client.pullsCompletely("app/x", "v1", img)).toBe(true);
  });

  it("an incremental run reads only the repositories that changed", async () => {
    const images: TestImage[] = [];
    for (let i = 0; i < 6; i++) {
      const img = makeImage({ layers: 1 });
      images.push(img);
      await client.pushImage(`app/r${i}`, "v1", img);
    }
    const state = new CollectorState();
    const full = await gc({ state });
    expect(full.repositoriesMarked).toBe(6);
    expect(full.blobsDeleted).toBe(0);
    expect(await store.list(gcKeys.dirty)).toMatchObject({ items: [] });

    expect((await client.req("DELETE", `/v2/app/r2/manifests/${images[2]!.digest}`)).status).toBe(202);
    const inc = await gc({ state, mode: "incremental" });
    expect(inc.repositoriesMarked).toBe(1);
    expect(inc.deleted.map((d) => d.digest).sort()).toEqual([images[2]!.digest, ...images[2]!.blobs.map((b) => digestOf(b))].sort());
    // a fresh process (new state) loads the marks from the store instead of reading storage
    const fresh = await gc({ state: new CollectorState(), mode: "incremental" });
    expect(fresh.repositoriesMarked).toBe(0);
    expect(fresh.repositories).toBe(6); // app/r2 is still a repository (distribution's catalog lists it too)
    for (const i of [0, 1, 3, 4, 5]) expect(await client.pullsCompletely(`app/r${i}`, "v1", images[i]!)).toBe(true);
  });

  it("--delete-untagged removes untagged manifests but keeps the children of a tagged index", async () => {
    const a = makeImage({ layers: 1 });
    const b = makeImage({ layers: 1 });
    const lone = makeImage({ layers: 1 });
    for (const img of [a, b, lone]) {
      for (const blob of img.blobs) await client.pushBlob("app/multi", blob);
      expect((await client.pushManifest("app/multi", img.digest, img.manifest, img.mediaType)).status).toBe(201);
    }
    const index = makeIndex([a, b]);
    expect((await client.pushManifest("app/multi", "v1", index.manifest, index.mediaType)).status).toBe(201);
    const report = await gc({ deleteUntagged: true, untaggedGraceMs: 0 });
    expect(report.manifestsDeleted).toEqual([{ repository: "app/multi", digest: lone.digest }]);
    expect(report.deleted.map((d) => d.digest).sort()).toEqual([lone.digest, ...lone.blobs.map((x) => digestOf(x))].sort());
    expect(await client.pullsCompletely("app/multi", a.digest, a)).toBe(true);
    expect(await client.pullsCompletely("app/multi", b.digest, b)).toBe(true);
    expect((await client.req("GET", `/v2/app/multi/manifests/${lone.digest}`, { headers: { accept: lone.mediaType } })).status).toBe(404);
  });

  it("a blob touched after the collector's first read is moved back from quarantine", async () => {
    const orphan = await client.pushBlob("app/y", Buffer.from("about to be used"));
    const state = new CollectorState();
    // The race, made deterministic: the collector's driver lets a HEAD in right after the move.
    const racing = Object.create(driver) as FilesystemDriver;
    racing.move = async (from: string, to: string) => {
      await driver.move(from, to);
      if (to.includes("_quarantine")) {
        const head = await client.req("HEAD", `/v2/app/y/blobs/${orphan}`);
        expect(head.status).toBe(200); // the HEAD moved it back itself and touched it
      }
    };
    clock += 60_000;
    const report = await collect({ driver: racing, store, state, mode: "full", dryRun: false, deleteUntagged: false, graceMs: 0, now: () => clock });
    expect(report.blobsDeleted).toBe(0);
    expect(report.rescued).toBe(1);
    expect(await stored(orphan)).toBe(true);
    expect((await client.req("HEAD", `/v2/app/y/blobs/${orphan}`)).status).toBe(200);
  });

  it("a run that fails after moving blobs to quarantine loses nothing a re-push made depend on them", async () => {
    const img = makeImage({ layers: 1 });
    await client.pushImage("app/a", "v1", img);
    const state = new CollectorState();
    await gc({ state });
    expect((await client.req("DELETE", `/v2/app/a/manifests/${img.digest}`)).status).toBe(202);
    // The run: at its first quarantine move the client pushes the image again; after the moves
    // the store fails (the re-read of the touches), so the run dies between act and re-check.
    let repushed = false;
    let moved = false;
    const racing = Object.create(driver) as FilesystemDriver;
    racing.move = async (from: string, to: string) => {
      if (to.includes("_quarantine") && !repushed) {
        repushed = true;
        expect((await client.pushManifest("app/a", "v1", img.manifest, img.mediaType)).status).toBe(201);
      }
      await driver.move(from, to);
      if (to.includes("_quarantine")) moved = true;
    };
    const flaky = Object.create(store) as SqliteStore;
    let failed = false;
    flaky.list = (async (prefix: string, o?: unknown) => {
      if (moved && !failed && prefix === gcKeys.touches) {
        failed = true;
        throw new Error("store: deadline exceeded");
      }
      return store.list(prefix, o as never);
    }) as SqliteStore["list"];
    clock += 60_000;
    await expect(collect({ driver: racing, store: flaky, state, mode: "incremental", dryRun: false, deleteUntagged: false, graceMs: 0, now: () => clock })).rejects.toThrow(/deadline/);
    // Later runs (a fresh state, as after a failure) put everything back, links included.
    for (let i = 0; i < 3; i++) {
      clock += 3_600_000;
      await collect({ driver, store, state: new CollectorState(), mode: "incremental", dryRun: false, deleteUntagged: false, graceMs: 0, now: () => clock });
    }
    expect(await client.pullsCompletely("app/a", "v1", img)).toBe(true);
  });

  it("-m keeps an untagged manifest a workload uses by digest, and restarts the untagged grace when a tag came and went", async () => {
    const pinned = makeImage({ layers: 1 });
    const current = makeImage({ layers: 1 });
    await client.pushImage("shop/web", "v1", pinned);
    await client.pushImage("shop/web", "v1", current); // the tag moves on: pinned is untagged
    const inUse = { usedBy: (repo: string, _tag: string, digest: string) => (repo === "shop/web" && digest === pinned.digest ? "podgroup shop.web.web" : undefined) };
    const state = new CollectorState();
    const run = () => collect({ driver, store, state, mode: "incremental", dryRun: false, deleteUntagged: true, untaggedGraceMs: 86_400_000, graceMs: 3_600_000, now: () => clock, inUse });
    clock += 60_000;
    await run();
    clock += 2 * 86_400_000;
    expect((await run()).manifestsDeleted).toEqual([]);
    expect(await client.pullsCompletely("shop/web", pinned.digest, pinned)).toBe(true);

    // Untagged for days, then tagged and untagged again between two runs: the grace starts again.
    const a = makeImage({ layers: 1 });
    await client.pushImage("app/x", a.digest, a); // by digest: untagged
    await client.pushImage("app/x", "prod", current);
    const plain = () => collect({ driver, store, state, mode: "incremental", dryRun: false, deleteUntagged: true, untaggedGraceMs: 86_400_000, graceMs: 3_600_000, now: () => clock, inUse: { usedBy: () => undefined } });
    clock += 60_000;
    await plain();
    clock += 3 * 86_400_000;
    expect((await client.pushManifest("app/x", "prod", a.manifest, a.mediaType)).status).toBe(201);
    clock += 60_000;
    expect((await client.pushManifest("app/x", "prod", current.manifest, current.mediaType)).status).toBe(201);
    clock += 2 * 3_600_000;
    expect((await plain()).manifestsDeleted.map((m) => m.digest)).not.toContain(a.digest);
    clock += 2 * 86_400_000;
    expect((await plain()).manifestsDeleted.map((m) => m.digest)).toContain(a.digest);
  });
});
