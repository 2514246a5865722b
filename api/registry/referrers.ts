// GET /v2/<name>/referrers/<digest>[?artifactType=] (OCI distribution-spec 1.1; docs/registry.md,
// "Referrers"): an OCI image index listing the manifests of `name` whose `subject` is <digest>.
//
// distribution has no referrers API, so the index is ours: a manifest PUT with a subject writes
// `_referrers/<subject alg>/<subject hex>/<alg>/<hex>/link` (links.ts), its DELETE removes it. The
// descriptors are built from the referring manifests at read time, so they always match the stored
// bytes. A subject nobody refers to, or an unknown repository, answers an empty index (the OCI
// distribution spec forbids a 404 here: clients would fall back to the tag schema; docs/registry.md,
// "Referrers").
import type { Links } from "../resources/registry-storage.ts";
import type { ManifestStore } from "./manifest-store.ts";
import { mediaTypes, parseManifest } from "./manifests.ts";
import type { Digest } from "../resources/registry-names.ts";

export interface ReferrerDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
}

export interface ReferrersIndex {
  schemaVersion: 2;
  mediaType: typeof mediaTypes.ociIndex;
  manifests: ReferrerDescriptor[];
}

export async function listReferrers(
  links: Links,
  manifests: ManifestStore,
  name: string,
  subject: Digest,
  artifactType: string | undefined,
): Promise<ReferrersIndex> {
  const out: ReferrerDescriptor[] = [];
  for (const d of await links.listReferrers(name, subject)) {
    const stored = await manifests.get(name, d);
    if (stored === undefined) continue;
    let m;
    try {
      m = parseManifest(stored.bytes, stored.mediaType);
    } catch {
      continue;
    }
    if (m.subject?.digest.value !== subject.value) continue;
    // The spec: an image manifest without artifactType is described by its config's media type; an index's stays absent.
    const type = m.artifactType ?? (m.kind === "manifest" ? m.config?.mediaType : undefined);
    if (artifactType !== undefined && type !== artifactType) continue;
    out.push({
      mediaType: m.mediaType,
      digest: d.value,
      size: stored.bytes.byteLength,
      ...(type !== undefined && { artifactType: type }),
      ...(m.annotations !== undefined && { annotations: m.annotations }),
    });
  }
  return { schemaVersion: 2, mediaType: mediaTypes.ociIndex, manifests: out };
}
