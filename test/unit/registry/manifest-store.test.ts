// ManifestStore.delete (api/registry/manifest-store.ts) against a tag re-pointed while the delete
// runs: the delete lists the tags on the manifest, and a push moves one of them to another manifest
// before it is removed. The tag must stay, pointing at the new manifest. The storage is a
// FilesystemDriver on a temporary root, wrapped so that the push lands right after the delete has
// read the tag.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { StorageDriver } from "../../../adapters/blobstore/driver.ts";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";
import { Blobs } from "../../../api/registry/blobs.ts";
import { Links } from "../../../api/resources/registry-storage.ts";
import { ManifestStore } from "../../../api/registry/manifest-store.ts";
import { digestOf, type Digest } from "../../../api/resources/registry-names.ts";
import * as paths from "../../../api/resources/registry-paths.ts";

const mediaType = "application/vnd.oci.image.manifest.v1+json";

function manifest(config: Buffer): Buffer {
  return Buffer.from(
    JSON.stringify({ schemaVersion: 2, mediaType, config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: digestOf(config).value, size: config.length }, layers: [] }),
  );
}

describe("ManifestStore.delete", () => {
  let root: string;
  let inner: FilesystemDriver;
  /** Called after each getContent of the wrapped driver, with the path read. */
  let afterRead: (path: string) => Promise<void>;
  let links: Links;
  let store: ManifestStore;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "capstan-manifest-store-"));
    inner = new FilesystemDriver({ rootDirectory: root });
    afterRead = async () => {};
    const driver = new Proxy(inner, {
      get(target, prop) {
        if (prop === "getContent") {
          return async (path: string) => {
            const bytes = await target.getContent(path);
            await afterRead(path);
            return bytes;
          };
        }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as StorageDriver;
    links = new Links(driver);
    const blobs = new Blobs(driver, links);
    store = new ManifestStore(links, blobs);
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function push(name: string, tags: string[]): Promise<Digest> {
    const config = Buffer.from(JSON.stringify({ nonce: Math.random() }));
    const blobs = new Blobs(inner, new Links(inner));
    await blobs.putContent(digestOf(config), config);
    await new Links(inner).linkBlob(name, digestOf(config));
    return (await store.put(name, manifest(config), mediaType, undefined, tags)).digest;
  }

  it("keeps a tag that a push re-points to another manifest while the delete runs", async () => {
    const name = "a/app";
    const first = await push(name, ["latest", "v1"]);
    const second = await push(name, []);
    // The push of `second` as "latest" lands right after the delete has read "latest" the first time.
    let reads = 0;
    afterRead = async (path) => {
      if (path === paths.tagCurrentLink(name, "latest") && ++reads === 1) await new Links(inner).tag(name, "latest", second);
    };
    expect(await store.delete(name, first)).toBe(true);
    expect((await links.readTag(name, "latest"))?.value).toBe(second.value);
    expect(await links.readTag(name, "v1")).toBeUndefined();
    expect(await store.exists(name, first)).toBe(false);
    expect(await store.exists(name, second)).toBe(true);
    expect(await links.listTags(name)).toEqual(["latest"]);
  });

  it("removes every tag still on the manifest", async () => {
    const name = "a/app";
    const first = await push(name, ["a", "b"]);
    const second = await push(name, ["c"]);
    expect(await store.delete(name, first)).toBe(true);
    expect(await links.listTags(name)).toEqual(["c"]);
    expect((await links.readTag(name, "c"))?.value).toBe(second.value);
  });
});
