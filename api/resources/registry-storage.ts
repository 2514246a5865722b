// The registry's links and repositories as stored, read and written through a StorageDriver
// (docs/registry.md, "Layout"). Here in api/resources/ because the registry (api/registry/, e.g.
// catalog.ts) and its garbage collector (controllers/registrygc/) both
// work on them (docs/development.md, "Conventions").
//
// Every write of a link goes through here: a blob linked into a repository, a manifest revision, a
// tag, a referrer (docs/registry.md, "Layout"). Garbage collection needs to know which
// repositories changed: callers that change manifest, tag or referrer links tell its journal
// before and after (api/registry/manifest-store.ts, registry-gc.ts); blob links need no entry,
// since whoever links a blob touched it first (api/registry/uploads.ts).
//
// Reads of links are here too, so the link format (the digest string, no newline) lives in one
// module.
import { PathNotFoundError, type StorageDriver } from "../../adapters/blobstore/driver.ts";
import { mapLimit } from "../../runtime/map-limit.ts";
import { digestOrUndefined, type Digest } from "./registry-names.ts";
import * as paths from "./registry-paths.ts";
import { repositoriesRoot } from "./registry-paths.ts";

export class Links {
  constructor(
    private readonly driver: StorageDriver,
  ) {}

  // ---- blobs in a repository (_layers)

  async linkBlob(name: string, d: Digest): Promise<void> {
    await this.driver.putContent(paths.layerLink(name, d), encode(d));
  }

  /** False when the blob was not linked. */
  async unlinkBlob(name: string, d: Digest): Promise<boolean> {
    return this.remove(paths.layerLink(name, d));
  }

  /** The digest the repository's link for `d` names (normally `d`), or undefined. */
  readBlobLink(name: string, d: Digest): Promise<Digest | undefined> {
    return this.read(paths.layerLink(name, d));
  }

  // ---- manifest revisions

  async linkRevision(name: string, d: Digest): Promise<void> {
    await this.driver.putContent(paths.revisionLink(name, d), encode(d));
  }

  /**
   * The revision's whole directory goes (distribution removes only the link file): garbage
   * collection's incremental mark takes a listed revision directory for a revision.
   */
  async unlinkRevision(name: string, d: Digest): Promise<boolean> {
    if ((await this.read(paths.revisionLink(name, d))) === undefined) {
      await this.remove(paths.revisionDir(name, d)); // a directory left by distribution's delete
      return false;
    }
    return this.remove(paths.revisionDir(name, d));
  }

  readRevisionLink(name: string, d: Digest): Promise<Digest | undefined> {
    return this.read(paths.revisionLink(name, d));
  }

  // ---- tags

  /** Point `tag` at `d`: the history entry first, then `current` (distribution's order). */
  async tag(name: string, tag: string, d: Digest): Promise<void> {
    await this.driver.putContent(paths.tagIndexLink(name, tag, d), encode(d));
    await this.driver.putContent(paths.tagCurrentLink(name, tag), encode(d));
  }

  /** Remove the tag with its history, as distribution's Untag does. False when there was none. */
  async untag(name: string, tag: string): Promise<boolean> {
    return this.remove(paths.tagDir(name, tag));
  }

  readTag(name: string, tag: string): Promise<Digest | undefined> {
    return this.read(paths.tagCurrentLink(name, tag));
  }

  /** Tag names, sorted (Go's sort.Strings order); undefined when the repository has no tags directory. */
  async listTags(name: string): Promise<string[] | undefined> {
    const children = await this.children(paths.tagsDir(name));
    return children?.sort(byCodeUnit);
  }

  // ---- referrers (ours; distribution has no referrers API)

  async linkReferrer(name: string, subject: Digest, d: Digest): Promise<void> {
    await this.driver.putContent(paths.referrerLink(name, subject, d), encode(d));
  }

  async unlinkReferrer(name: string, subject: Digest, d: Digest): Promise<boolean> {
    return this.remove(paths.referrerLink(name, subject, d));
  }

  /** The manifests whose subject is `subject`, sorted by digest. */
  async listReferrers(name: string, subject: Digest): Promise<Digest[]> {
    const out: Digest[] = [];
    const dir = paths.referrersDir(name, subject);
    for (const alg of (await this.children(dir)) ?? []) {
      for (const hex of (await this.children(`${dir}/${alg}`)) ?? []) {
        const d = digestOrUndefined(`${alg}:${hex}`);
        if (d !== undefined && (await this.read(paths.referrerLink(name, subject, d))) !== undefined) out.push(d);
      }
    }
    return out.sort((a, b) => byCodeUnit(a.value, b.value));
  }

  // ----

  /** The digest in a link file; undefined when there is none (or it holds no valid digest). */
  private async read(path: string): Promise<Digest | undefined> {
    try {
      return digestOrUndefined((await this.driver.getContent(path)).toString("utf8").trim());
    } catch (err) {
      if (err instanceof PathNotFoundError) return undefined;
      throw err;
    }
  }

  private async remove(path: string): Promise<boolean> {
    try {
      await this.driver.delete(path);
      return true;
    } catch (err) {
      if (err instanceof PathNotFoundError) return false;
      throw err;
    }
  }

  /** Names of the direct children of `dir`; undefined when it does not exist. */
  private async children(dir: string): Promise<string[] | undefined> {
    try {
      return (await this.driver.list(dir)).map((p) => p.slice(p.lastIndexOf("/") + 1));
    } catch (err) {
      if (err instanceof PathNotFoundError) return undefined;
      throw err;
    }
  }
}

function encode(d: Digest): Buffer {
  return Buffer.from(d.value, "utf8");
}

/** Go's sort.Strings order for ASCII (what the OCI spec calls ASCIIbetical). */
export function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One repository name component (registry-names.ts's grammar): the only directories the walks of repositories/ descend into. */
export const componentRe = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/;

/**
 * Every repository name, in no particular order: the walk of GET /v2/_catalog
 * (api/registry/catalog.ts), with the subtrees read in parallel (garbage collection's full mark
 * reads all of them). Garbage collection also counts a directory with only blob links (`_layers`: uploads never referenced by a manifest) as a repository, so it
 * can remove the links of the blobs it deletes.
 */
export async function listRepositories(driver: StorageDriver, concurrency = 16): Promise<string[]> {
  const out: string[] = [];
  let level: { dir: string; name: string }[] = [{ dir: repositoriesRoot, name: "" }];
  while (level.length > 0) {
    const lists = await mapLimit(level, concurrency, async ({ dir }) => {
      try {
        return (await driver.list(dir)).map((p) => p.slice(p.lastIndexOf("/") + 1));
      } catch (err) {
        if (err instanceof PathNotFoundError) return [];
        throw err;
      }
    });
    const next: { dir: string; name: string }[] = [];
    level.forEach(({ dir, name }, i) => {
      const children = lists[i]!;
      if (name !== "" && (children.includes("_manifests") || children.includes("_layers"))) out.push(name);
      for (const child of children) if (componentRe.test(child)) next.push({ dir: `${dir}/${child}`, name: name === "" ? child : `${name}/${child}` });
    });
    level = next;
  }
  return out;
}
