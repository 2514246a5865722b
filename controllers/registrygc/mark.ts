// The mark of one repository, read from storage (docs/registry-gc.md, "Marks"): its manifest
// revisions with what each references, its tags, and the blobs linked into it. The union of the
// marks of all repositories is what garbage collection keeps; distribution's mark phase reads the
// same links, for every repository on every run, where Capstan keeps the marks in the store and
// reads again only the repositories that changed.
import { PathNotFoundError, type StorageDriver } from "../../adapters/blobstore/driver.ts";
import { digestOrUndefined, type Digest } from "../../api/resources/registry-names.ts";
import * as paths from "../../api/resources/registry-paths.ts";
import { mapLimit } from "../../runtime/map-limit.ts";

export interface ManifestMark {
  /** Blobs it references: config and layers (an image), or nothing (an index). */
  refs: string[];
  /** Manifests it references (an index's children). */
  children: string[];
  subject?: string;
  /** Tags pointing at it. */
  tags: string[];
  /** When a mark first saw it without a tag (ms); absent while tagged. */
  untaggedSince?: number;
  /** The revision link exists but the manifest's bytes do not. */
  missing?: true;
}

export interface RepositoryMark {
  manifests: Record<string, ManifestMark>;
  /** Blobs linked into the repository (`_layers`). */
  layers: string[];
  /**
   * The store revision of the dirty keys this mark answers (read before storage was): a later
   * mark trusts this one's tags except those with a tag touch written after it.
   */
  asOf?: number;
}

/** What a manifest references, read leniently: whatever digests its fields hold (schema 1 included). */
export function referencesOf(bytes: Uint8Array): { refs: string[]; children: string[]; subject?: string } {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(Buffer.from(bytes).toString("utf8")) as Record<string, unknown>;
  } catch {
    return { refs: [], children: [] };
  }
  if (typeof m !== "object" || m === null) return { refs: [], children: [] };
  const digestOf = (d: unknown): string | undefined => {
    const v = typeof d === "object" && d !== null ? (d as { digest?: unknown }).digest : undefined;
    return typeof v === "string" && digestOrUndefined(v) !== undefined ? v : undefined;
  };
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const refs = [digestOf(m.config), ...list(m.layers).map(digestOf)];
  // schema 1: fsLayers[].blobSum
  for (const l of list(m.fsLayers)) {
    const v = typeof l === "object" && l !== null ? (l as { blobSum?: unknown }).blobSum : undefined;
    if (typeof v === "string" && digestOrUndefined(v) !== undefined) refs.push(v);
  }
  const children = list(m.manifests).map(digestOf);
  const subject = digestOf(m.subject);
  return {
    refs: [...new Set(refs.filter((d): d is string => d !== undefined))],
    children: [...new Set(children.filter((d): d is string => d !== undefined))],
    ...(subject !== undefined && { subject }),
  };
}

export interface MarkOptions {
  /** References of manifests already read, by digest (content addressed: the same bytes everywhere). */
  known?: Map<string, { refs: string[]; children: string[]; subject?: string }>;
  /** The repository's previous mark: untaggedSince carries over. */
  previous?: RepositoryMark;
  /** When a manifest was last touched (ms), if a touch record says. */
  touchedAt?: (digest: string) => number | undefined;
  now: number;
  /** Storage calls at once (default 16). */
  concurrency?: number;
  /**
   * Read only what changed since `previous` (an incremental run): a listed revision directory that
   * `previous` has is taken as that revision without reading its link (a deleted revision's
   * directory goes with it: links.ts), and a tag `previous` has keeps its digest unless its tag
   * touch is newer than `previous.asOf`. Every tag write writes its tag touch after the tag
   * (gc-journal.ts), so a tag changed after `previous` read it has one.
   */
  trust?: { tagTouchRevision: (tag: string) => number | undefined };
  /** Stored with the mark as `asOf`. */
  asOf?: number;
}

/** Read the mark of `name` from storage. An empty mark when the repository is gone. */
export async function markRepository(driver: StorageDriver, name: string, o: MarkOptions): Promise<RepositoryMark> {
  const concurrency = o.concurrency ?? 16;
  const [revisions, tags, layers] = await Promise.all([
    digestsUnder(driver, `${paths.manifestsDir(name)}/revisions`),
    children(driver, paths.tagsDir(name)),
    digestsUnder(driver, `${paths.repository(name)}/_layers`),
  ]);
  const previous = o.trust !== undefined && o.previous?.asOf !== undefined ? o.previous : undefined;
  const previousTags = new Map<string, string>();
  for (const [d, m] of Object.entries(previous?.manifests ?? {})) for (const t of m.tags) previousTags.set(t, d);
  const tagTargets = await mapLimit(tags, concurrency, async (tag) => {
    const was = previousTags.get(tag);
    if (was !== undefined && (o.trust!.tagTouchRevision(tag) ?? 0) <= previous!.asOf!) return { tag, digest: digestOrUndefined(was) };
    return { tag, digest: await readLink(driver, paths.tagCurrentLink(name, tag)) };
  });
  const tagsOf = new Map<string, string[]>();
  for (const { tag, digest } of tagTargets) {
    if (digest === undefined) continue;
    tagsOf.set(digest.value, [...(tagsOf.get(digest.value) ?? []), tag]);
  }
  const manifests: Record<string, ManifestMark> = {};
  await mapLimit(revisions, concurrency, async (dir) => {
    // A revision is its link file (distribution's delete leaves the directory behind).
    const d = previous?.manifests[dir.value] !== undefined ? dir : await readLink(driver, paths.revisionLink(name, dir));
    if (d === undefined) return;
    let r = o.known?.get(d.value);
    let missing = false;
    if (r === undefined) {
      const bytes = await readManifest(driver, d);
      if (bytes !== undefined) {
        r = referencesOf(bytes);
        o.known?.set(d.value, r);
      } else {
        // Its references are unknown: nothing it might need is deleted while it is missing (the
        // marks of this repository keep no untagged manifest either: untaggedToDelete).
        r = { refs: [], children: [] };
        missing = true;
      }
    }
    const tags = (tagsOf.get(d.value) ?? []).sort();
    // Untagged since the previous mark saw it untagged, unless it was touched (pushed, tagged)
    // since: a tag that came and went between two marks starts the untagged grace again.
    const before = o.previous?.manifests[d.value];
    const touched = o.touchedAt?.(d.value);
    const untaggedSince = tags.length > 0 ? undefined : before?.untaggedSince === undefined ? o.now : Math.max(before.untaggedSince, Math.min(touched ?? 0, o.now));
    manifests[d.value] = {
      refs: r.refs,
      children: r.children,
      ...(r.subject !== undefined && { subject: r.subject }),
      tags,
      ...(untaggedSince !== undefined && { untaggedSince }),
      ...(missing && { missing: true as const }),
    };
  });
  return { manifests, layers: layers.map((d) => d.value).sort(), ...(o.asOf !== undefined && { asOf: o.asOf }) };
}

/** Every digest the repository keeps: its manifests and what they reference. */
export function keptDigests(mark: RepositoryMark): Set<string> {
  const out = new Set<string>();
  for (const [d, m] of Object.entries(mark.manifests)) {
    out.add(d);
    for (const r of m.refs) out.add(r);
    for (const c of m.children) out.add(c);
  }
  return out;
}

/**
 * The untagged manifests `--delete-untagged` may remove from this repository: untagged since
 * `untaggedBefore` or earlier, not used by a workload (by digest), not a child of a manifest that
 * stays, not a referrer of one that stays (distribution 3's rule for index children; referrers
 * follow their subject).
 */
export function untaggedToDelete(mark: RepositoryMark, untaggedBefore: number, inUse: (digest: string) => boolean = () => false): string[] {
  const removable = new Set(
    Object.entries(mark.manifests)
      // A manifest whose bytes are missing has unknown children: it and everything untagged stays.
      .filter(([d, m]) => m.tags.length === 0 && !m.missing && m.untaggedSince !== undefined && m.untaggedSince <= untaggedBefore && !inUse(d))
      .map(([d]) => d),
  );
  if (Object.values(mark.manifests).some((m) => m.missing)) return [];
  // Whatever a kept manifest needs stays; repeat until nothing changes (an index kept keeps its
  // children, a kept child keeps its referrers...).
  for (let changed = true; changed; ) {
    changed = false;
    for (const [d, m] of Object.entries(mark.manifests)) {
      if (removable.has(d)) continue;
      for (const c of m.children) if (removable.delete(c)) changed = true;
    }
    for (const [d, m] of Object.entries(mark.manifests)) {
      if (removable.has(d) && m.subject !== undefined && mark.manifests[m.subject] !== undefined && !removable.has(m.subject)) {
        removable.delete(d);
        changed = true;
      }
    }
  }
  return [...removable].sort();
}

// ---- storage reads

async function children(driver: StorageDriver, dir: string): Promise<string[]> {
  try {
    return (await driver.list(dir)).map((p) => p.slice(p.lastIndexOf("/") + 1));
  } catch (err) {
    if (err instanceof PathNotFoundError) return [];
    throw err;
  }
}

/** The digests of a `<dir>/<alg>/<hex>` tree (revisions, _layers): named by the path, as distribution's walk does. */
export async function digestsUnder(driver: StorageDriver, dir: string): Promise<Digest[]> {
  const out: Digest[] = [];
  for (const alg of await children(driver, dir)) {
    for (const hex of await children(driver, `${dir}/${alg}`)) {
      const d = digestOrUndefined(`${alg}:${hex}`);
      if (d !== undefined) out.push(d);
    }
  }
  return out;
}

/** A manifest's bytes, moved back from quarantine when a collection left them there; undefined when gone. */
async function readManifest(driver: StorageDriver, d: Digest): Promise<Buffer | undefined> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      return await driver.getContent(paths.blobData(d));
    } catch (err) {
      if (!(err instanceof PathNotFoundError)) throw err;
    }
    try {
      await driver.move(paths.quarantineData(d), paths.blobData(d));
    } catch (err) {
      if (!(err instanceof PathNotFoundError)) throw err;
      return undefined;
    }
  }
  return undefined;
}

async function readLink(driver: StorageDriver, path: string): Promise<Digest | undefined> {
  try {
    return digestOrUndefined((await driver.getContent(path)).toString("utf8").trim());
  } catch (err) {
    if (err instanceof PathNotFoundError) return undefined;
    throw err;
  }
}
