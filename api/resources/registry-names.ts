// What a registry URL may name: repositories, tags, digests and upload ids, with distribution's
// grammar (docs/registry.md, "Names"). Everything that reaches a storage path passes one of these
// checks first, so no request can name a path outside the layout (`..`, upper case, `%2F` and the
// like never match). Here in api/resources/ because the registry (api/registry/) and its garbage
// collector (controllers/registrygc/) both check names with it.
import { createHash } from "node:crypto";

/** One path component: lower-case alphanumerics, separated by `.`, `_`, `__` or runs of `-`. */
const component = "[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*";
const nameRe = new RegExp(`^${component}(?:/${component})*$`);

/** distribution's limit on a whole repository name (the OCI spec says "less than 256"). */
export const maxNameLength = 255;

const tagRe = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;

/** The ids this registry hands out (randomUUID); distribution's are the same shape. */
const uploadIdRe = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isRepositoryName(name: string): boolean {
  return name.length > 0 && name.length <= maxNameLength && nameRe.test(name);
}

export function isTag(tag: string): boolean {
  return tagRe.test(tag);
}

export function isUploadId(id: string): boolean {
  return uploadIdRe.test(id);
}

export type DigestAlgorithm = "sha256" | "sha512";

/** Hex length of each supported algorithm. */
export const digestAlgorithms: Record<DigestAlgorithm, number> = { sha256: 64, sha512: 128 };

/** A parsed digest: `sha256:<64 lower-case hex>` or `sha512:<128 lower-case hex>`. */
export interface Digest {
  algorithm: DigestAlgorithm;
  hex: string;
  /** The canonical string, `algorithm:hex`. */
  value: string;
}

/** Why a string is not a digest this registry serves: "format" (not `alg:hex` at all) or "algorithm". */
export type DigestProblem = "format" | "algorithm";

/** The OCI grammar of any digest: `algorithm ":" encoded`. */
const anyDigestRe = /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;

export function parseDigest(s: string): Digest | DigestProblem {
  if (!anyDigestRe.test(s)) return "format";
  const i = s.indexOf(":");
  const algorithm = s.slice(0, i);
  const hex = s.slice(i + 1);
  if (algorithm !== "sha256" && algorithm !== "sha512") return "algorithm";
  if (hex.length !== digestAlgorithms[algorithm] || !/^[0-9a-f]+$/.test(hex)) return "format";
  return { algorithm, hex, value: s };
}

/** The digest, or undefined when `s` is not one this registry serves. */
export function digestOrUndefined(s: string): Digest | undefined {
  const d = parseDigest(s);
  return typeof d === "string" ? undefined : d;
}

/** A manifest reference: `<digest>` or `<tag>`; anything containing `:` is taken as a digest. */
export type Reference = { kind: "digest"; digest: Digest } | { kind: "tag"; tag: string };

export function parseReference(s: string): Reference | "tag-invalid" | DigestProblem {
  if (s.includes(":")) {
    const d = parseDigest(s);
    return typeof d === "string" ? d : { kind: "digest", digest: d };
  }
  return isTag(s) ? { kind: "tag", tag: s } : "tag-invalid";
}

/** The digest of `bytes` (small content: a manifest). */
export function digestOf(bytes: Uint8Array, algorithm: DigestAlgorithm = "sha256"): Digest {
  const hex = createHash(algorithm).update(bytes).digest("hex");
  return { algorithm, hex, value: `${algorithm}:${hex}` };
}
