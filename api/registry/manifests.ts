// Manifest formats (docs/registry.md, "Manifests"): Docker schema 2 manifest and manifest list, OCI
// image manifest and index. Parsing finds what a manifest references (config, layers, child
// manifests, subject) so a PUT can refuse one that points at blobs the repository lacks; the bytes
// themselves are stored exactly as sent. Schema 1 is served when an old root holds it but never
// accepted on PUT (distribution 3 dropped it too).
import { z } from "zod";
import { entry, RegistryError, registryError } from "./errors.ts";
import { parseDigest, type Digest } from "../resources/registry-names.ts";

export const mediaTypes = {
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  ociIndex: "application/vnd.oci.image.index.v1+json",
  schema1Signed: "application/vnd.docker.distribution.manifest.v1+prettyjws",
  schema1: "application/vnd.docker.distribution.manifest.v1+json",
} as const;

const pushable = new Set<string>([mediaTypes.dockerManifest, mediaTypes.dockerList, mediaTypes.ociManifest, mediaTypes.ociIndex]);
const indexTypes = new Set<string>([mediaTypes.dockerList, mediaTypes.ociIndex]);

/** distribution's maxManifestBodySize. */
export const maxManifestBytes = 4 << 20;

export interface Descriptor {
  mediaType: string;
  digest: Digest;
  size: number;
  urls?: string[];
  artifactType?: string;
  annotations?: Record<string, string>;
  platform?: { os?: string; architecture?: string };
}

export interface Manifest {
  mediaType: string;
  kind: "manifest" | "index";
  config?: Descriptor;
  layers: Descriptor[];
  /** An index's children. */
  manifests: Descriptor[];
  subject?: Descriptor;
  artifactType?: string;
  annotations?: Record<string, string>;
}

const DescriptorShape = z.looseObject({
  mediaType: z.string().min(1),
  digest: z.string(),
  size: z.number().int().nonnegative(),
  urls: z.array(z.string()).optional(),
  artifactType: z.string().optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  platform: z.looseObject({ os: z.string().optional(), architecture: z.string().optional() }).optional(),
});

const ImageShape = z.looseObject({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  artifactType: z.string().optional(),
  config: DescriptorShape,
  layers: z.array(DescriptorShape),
  subject: DescriptorShape.optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

const IndexShape = z.looseObject({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  artifactType: z.string().optional(),
  manifests: z.array(DescriptorShape),
  subject: DescriptorShape.optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

/** The media type without parameters, lower case; "" when absent. */
export function baseMediaType(header: string | undefined): string {
  return (header ?? "").split(";")[0]!.trim().toLowerCase();
}

function invalid(detail: unknown, message?: string): RegistryError {
  return registryError("MANIFEST_INVALID", detail, message);
}

function parseJson(bytes: Uint8Array): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw invalid(e instanceof Error ? e.message : String(e), "manifest invalid: not UTF-8 JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid("not a JSON object", "manifest invalid: not a JSON object");
  return value as Record<string, unknown>;
}

/**
 * The media type a stored manifest is served with, from its content (distribution keeps no media
 * type beside the bytes): its `mediaType` field, else what its shape says.
 */
export function storedMediaType(bytes: Uint8Array): string {
  let obj: Record<string, unknown>;
  try {
    obj = parseJson(bytes);
  } catch {
    return mediaTypes.ociManifest;
  }
  if (typeof obj.mediaType === "string" && obj.mediaType !== "") return obj.mediaType;
  if (obj.schemaVersion === 1) return "signatures" in obj ? mediaTypes.schema1Signed : mediaTypes.schema1;
  return Array.isArray(obj.manifests) ? mediaTypes.ociIndex : mediaTypes.ociManifest;
}

/**
 * Parse a pushed manifest. The type is the Content-Type when it names a manifest type (the body's
 * `mediaType`, when present, must then agree), else the body's `mediaType`, else the shape (an
 * OCI manifest or index may leave `mediaType` out; Docker's must carry it). MANIFEST_INVALID on
 * anything else.
 */
export function parseManifest(bytes: Uint8Array, contentType: string | undefined): Manifest {
  const obj = parseJson(bytes);
  if (obj.schemaVersion === 1) throw invalid("schema1", "manifest invalid: Docker schema 1 manifests are not accepted; push schema 2 or OCI");
  const header = baseMediaType(contentType);
  const field = typeof obj.mediaType === "string" ? obj.mediaType : undefined;
  let mediaType: string;
  if (pushable.has(header)) {
    if (field !== undefined && field !== header) {
      throw invalid({ contentType: header, mediaType: field }, `manifest invalid: mediaType ${field} differs from Content-Type ${header}`);
    }
    mediaType = header;
  } else if (field !== undefined) {
    if (!pushable.has(field)) throw invalid({ mediaType: field }, `manifest invalid: unsupported manifest media type ${field}`);
    mediaType = field;
  } else if (header !== "" && header !== "application/json" && header !== "application/octet-stream") {
    throw invalid({ contentType: header }, `manifest invalid: unsupported manifest media type ${header}`);
  } else {
    mediaType = Array.isArray(obj.manifests) ? mediaTypes.ociIndex : mediaTypes.ociManifest;
  }
  if ((mediaType === mediaTypes.dockerManifest || mediaType === mediaTypes.dockerList) && field !== mediaType) {
    throw invalid({ mediaType: field ?? null }, `manifest invalid: a Docker ${mediaType} must carry "mediaType": "${mediaType}"`);
  }
  // Without a `mediaType` field the stored manifest is served as its shape says (storedMediaType):
  // the declared type must be that one, or what was checked would not be what is served.
  const shape = Array.isArray(obj.manifests) ? mediaTypes.ociIndex : mediaTypes.ociManifest;
  if (field === undefined && mediaType !== shape) {
    const has = shape === mediaTypes.ociIndex ? "has a manifests array (an index)" : "has no manifests array (not an index)";
    throw invalid({ contentType: mediaType, shape }, `manifest invalid: declared ${mediaType} but the body ${has} and no mediaType field; add "mediaType": "${mediaType}" or send it as ${shape}`);
  }

  const isIndex = indexTypes.has(mediaType);
  const parsed = (isIndex ? IndexShape : ImageShape).safeParse(obj);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "manifest"}: ${i.message}`);
    throw invalid(problems, `manifest invalid: ${problems.slice(0, 3).join("; ")}`);
  }
  const m = parsed.data as z.output<typeof ImageShape> & z.output<typeof IndexShape>;
  const problems: string[] = [];
  const desc = (d: z.output<typeof DescriptorShape>, where: string): Descriptor => {
    const digest = parseDigest(d.digest);
    if (typeof digest === "string") {
      problems.push(`${where}.digest: ${JSON.stringify(d.digest)} is not a sha256 or sha512 digest`);
      return { mediaType: d.mediaType, digest: { algorithm: "sha256", hex: "", value: d.digest }, size: d.size };
    }
    return {
      mediaType: d.mediaType,
      digest,
      size: d.size,
      ...(d.urls !== undefined && { urls: d.urls }),
      ...(d.artifactType !== undefined && { artifactType: d.artifactType }),
      ...(d.annotations !== undefined && { annotations: d.annotations }),
      ...(d.platform !== undefined && { platform: d.platform }),
    };
  };
  const out: Manifest = {
    mediaType,
    kind: isIndex ? "index" : "manifest",
    layers: isIndex ? [] : m.layers.map((l, i) => desc(l, `layers[${i}]`)),
    manifests: isIndex ? m.manifests.map((l, i) => desc(l, `manifests[${i}]`)) : [],
    ...(!isIndex && { config: desc(m.config, "config") }),
    ...(m.subject !== undefined && { subject: desc(m.subject, "subject") }),
    ...(m.artifactType !== undefined && { artifactType: m.artifactType }),
    ...(m.annotations !== undefined && { annotations: m.annotations }),
  };
  if (problems.length > 0) throw new RegistryError([entry("MANIFEST_INVALID", problems, `manifest invalid: ${problems[0]}`)]);
  return out;
}

/** The blobs a manifest needs in its repository: config and layers, except layers fetched from their `urls`. */
export function blobReferences(m: Manifest): Descriptor[] {
  const out = m.config ? [m.config] : [];
  for (const l of m.layers) if (!l.urls?.length) out.push(l);
  return out;
}

/**
 * Accept negotiation (distribution's): the Docker types are always served; an OCI manifest or index
 * only to a client that accepts it, by name or with a wildcard (`*` or `application/*`, ours).
 * `accept` is every Accept header's value.
 */
export function acceptable(mediaType: string, accept: readonly string[]): boolean {
  if (mediaType !== mediaTypes.ociManifest && mediaType !== mediaTypes.ociIndex) return true;
  const accepted = acceptedTypes(accept);
  return accepted.has(mediaType) || accepted.has("*/*") || accepted.has("application/*");
}

export function acceptedTypes(accept: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const header of accept) for (const part of header.split(",")) if (baseMediaType(part) !== "") out.add(baseMediaType(part));
  return out;
}

export function isIndexType(mediaType: string): boolean {
  return indexTypes.has(mediaType);
}
