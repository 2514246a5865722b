// Manifests in a repository (docs/registry.md, "Manifests"): the bytes are a blob under blobs/, the
// repository holds a revision link to it, tags point at revisions, and a manifest with a `subject`
// also gets a link in the subject's referrers directory. Write order keeps every link pointing at
// something that exists: blob, revision, referrer, then tags; a delete undoes it in reverse.
import { PathNotFoundError } from "../../adapters/blobstore/driver.ts";
import type { Blobs } from "./blobs.ts";
import { entry, RegistryError, registryError, type ErrorEntry } from "./errors.ts";
import { noJournal, type GcJournal } from "./gc-journal.ts";
import type { Links } from "../resources/registry-storage.ts";
import { blobReferences, parseManifest, storedMediaType, type Manifest } from "./manifests.ts";
import { digestOf, type Digest } from "../resources/registry-names.ts";

export interface StoredManifest {
  digest: Digest;
  mediaType: string;
  bytes: Buffer;
}

/** How many referenced blobs are checked at once on a PUT. */
const checkConcurrency = 16;

export class ManifestStore {
  constructor(
    private readonly links: Links,
    private readonly blobs: Blobs,
    private readonly journal: GcJournal = noJournal,
  ) {}

  /** The manifest `d` of `name`; undefined unless the repository has that revision and its bytes exist. */
  async get(name: string, d: Digest): Promise<StoredManifest | undefined> {
    const target = await this.links.readRevisionLink(name, d);
    if (target === undefined) return undefined;
    let bytes: Buffer;
    try {
      bytes = await this.blobs.getContent(target);
    } catch (err) {
      if (!(err instanceof PathNotFoundError)) throw err;
      // Moved to quarantine by a collection while this repository still has it: moved back.
      if (!(await this.blobs.rescue(target))) return undefined;
      try {
        bytes = await this.blobs.getContent(target);
      } catch (again) {
        if (again instanceof PathNotFoundError) return undefined;
        throw again;
      }
    }
    return { digest: d, mediaType: storedMediaType(bytes), bytes };
  }

  async exists(name: string, d: Digest): Promise<boolean> {
    return (await this.links.readRevisionLink(name, d)) !== undefined;
  }

  /**
   * Validate and store a pushed manifest, then point `tags` at it. `expected` is the digest of a
   * PUT by digest (DIGEST_INVALID when the body hashes otherwise). Nothing is written unless every
   * check passes: the body parses, every config and layer is a blob of `name`, every child of an
   * index is a manifest of `name` (MANIFEST_BLOB_UNKNOWN, one entry each).
   */
  async put(name: string, bytes: Buffer, contentType: string | undefined, expected: Digest | undefined, tags: string[]): Promise<{ digest: Digest; manifest: Manifest }> {
    const digest = digestOf(bytes, expected?.algorithm ?? "sha256");
    if (expected !== undefined && digest.value !== expected.value) {
      throw registryError("DIGEST_INVALID", { expected: expected.value, actual: digest.value }, `the manifest's digest is ${digest.value}, not ${expected.value}`);
    }
    const manifest = parseManifest(bytes, contentType);
    // Touched before the references are checked (docs/registry-gc.md, "Why nothing is lost").
    const since = await this.journal.changing(name, {
      digests: [digest.value, ...blobReferences(manifest).map((d) => d.digest.value), ...manifest.manifests.map((d) => d.digest.value)],
      tags: tags.map((tag) => ({ tag, digest: digest.value })),
    });
    try {
      const missing = await this.missingReferences(name, manifest);
      if (missing.length > 0) throw new RegistryError(missing as [ErrorEntry, ...ErrorEntry[]]);

      await this.blobs.putContent(digest, bytes);
      await this.links.linkRevision(name, digest);
      if (manifest.subject !== undefined) await this.links.linkReferrer(name, manifest.subject.digest, digest);
      for (const tag of tags) await this.links.tag(name, tag, digest);
    } finally {
      await this.journal.changed(name, tags.map((tag) => ({ tag, digest: digest.value })), since);
    }
    return { digest, manifest };
  }

  /** Untag every tag pointing at `d`, drop its referrer link, then the revision. False when `name` has no such manifest. */
  async delete(name: string, d: Digest): Promise<boolean> {
    const stored = await this.get(name, d);
    if (stored === undefined && !(await this.exists(name, d))) return false;
    await this.journal.changing(name);
    try {
      return await this.deleteLinks(name, d, stored);
    } finally {
      await this.journal.changed(name);
    }
  }

  /** Remove a tag (DELETE by tag); false when there was none. */
  async untag(name: string, tag: string): Promise<boolean> {
    await this.journal.changing(name);
    try {
      return await this.links.untag(name, tag);
    } finally {
      await this.journal.changed(name);
    }
  }

  private async deleteLinks(name: string, d: Digest, stored: StoredManifest | undefined): Promise<boolean> {
    for (const tag of await this.tagsOf(name, d)) {
      // Read again right before removing: a tag re-pointed meanwhile (a push) is not this manifest's any more.
      if ((await this.links.readTag(name, tag))?.value !== d.value) continue;
      await this.links.untag(name, tag);
    }
    if (stored !== undefined) {
      const subject = subjectOf(stored.bytes, stored.mediaType);
      if (subject !== undefined) await this.links.unlinkReferrer(name, subject, d);
    }
    return this.links.unlinkRevision(name, d);
  }

  /** The tags of `name` that currently point at `d`. */
  async tagsOf(name: string, d: Digest): Promise<string[]> {
    const out: string[] = [];
    for (const tag of (await this.links.listTags(name)) ?? []) {
      if ((await this.links.readTag(name, tag))?.value === d.value) out.push(tag);
    }
    return out;
  }

  private async missingReferences(name: string, m: Manifest): Promise<ErrorEntry[]> {
    const checks: { digest: Digest; kind: "blob" | "manifest" }[] = [
      ...blobReferences(m).map((d) => ({ digest: d.digest, kind: "blob" as const })),
      ...m.manifests.map((d) => ({ digest: d.digest, kind: "manifest" as const })),
    ];
    const missing: ErrorEntry[] = [];
    for (let i = 0; i < checks.length; i += checkConcurrency) {
      const batch = checks.slice(i, i + checkConcurrency);
      const found = await Promise.all(
        batch.map((c) => (c.kind === "blob" ? this.blobs.statInRepository(name, c.digest).then((b) => b !== undefined) : this.exists(name, c.digest))),
      );
      batch.forEach((c, j) => {
        if (!found[j]) {
          const what = c.kind === "blob" ? "blob" : "manifest";
          missing.push(entry("MANIFEST_BLOB_UNKNOWN", c.digest.value, `manifest references a ${what} unknown to repository ${name}: ${c.digest.value}`));
        }
      });
    }
    return missing;
  }
}

/** The subject of a stored manifest, if it has a valid one. */
export function subjectOf(bytes: Uint8Array, mediaType: string): Digest | undefined {
  try {
    return parseManifest(bytes, mediaType).subject?.digest;
  } catch {
    return undefined;
  }
}
