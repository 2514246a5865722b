// The registry's input grammar and header parsing (api/resources/registry-names.ts,
// api/registry/blobs.ts, transfer.ts, pagination.ts, manifests.ts): what is accepted, what is refused with which code.
import { describe, expect, it } from "vitest";
import { parseRange } from "../../../api/registry/blobs.ts";
import { RegistryError } from "../../../api/registry/errors.ts";
import { acceptable, parseManifest, storedMediaType } from "../../../api/registry/manifests.ts";
import { isRepositoryName, isTag, parseDigest, parseReference } from "../../../api/resources/registry-names.ts";
import { paginate, parsePage } from "../../../api/registry/pagination.ts";
import { parseContentRange } from "../../../api/registry/transfer.ts";

const hex64 = "a".repeat(64);

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return e instanceof RegistryError ? e.entries[0].code : "other";
  }
  return undefined;
}

describe("names", () => {
  it("repository names follow distribution's grammar", () => {
    for (const ok of ["a", "library/ubuntu", "a.b_c__d---e/f9", "0/1/2"]) expect(isRepositoryName(ok), ok).toBe(true);
    for (const bad of ["", "A", "a/", "/a", "a//b", "a/../b", "..", "a/.", "_a", "a_", "a___b", "a:b", "a%2Fb", "a".repeat(256)]) expect(isRepositoryName(bad), bad).toBe(false);
  });

  it("tags and digests", () => {
    expect(isTag("v1.0_RC-2")).toBe(true);
    for (const bad of ["", ".x", "-x", "a/b", "x".repeat(129)]) expect(isTag(bad), bad).toBe(false);
    expect(parseDigest(`sha256:${hex64}`)).toMatchObject({ algorithm: "sha256", hex: hex64 });
    expect(parseDigest(`sha512:${"b".repeat(128)}`)).toMatchObject({ algorithm: "sha512" });
    expect(parseDigest(`sha384:${"a".repeat(96)}`)).toBe("algorithm");
    for (const bad of [`sha256:${"A".repeat(64)}`, `sha256:${hex64}0`, "sha256:", "sha256", `SHA256:${hex64}`]) expect(parseDigest(bad), bad).toBe("format");
    expect(parseReference("latest")).toEqual({ kind: "tag", tag: "latest" });
    expect(parseReference("sha256:bad")).toBe("format");
    expect(parseReference("-x")).toBe("tag-invalid");
  });
});

describe("headers", () => {
  it("Range of a blob GET", () => {
    expect(parseRange(undefined, 10)).toBeUndefined();
    expect(parseRange("bytes=2-4", 10)).toEqual({ start: 2, end: 4 });
    expect(parseRange("bytes=2-", 10)).toEqual({ start: 2, end: 9 });
    expect(parseRange("bytes=-3", 10)).toEqual({ start: 7, end: 9 });
    expect(parseRange("bytes=-30", 10)).toEqual({ start: 0, end: 9 });
    expect(parseRange("bytes=5-50", 10)).toEqual({ start: 5, end: 9 });
    for (const u of ["bytes=10-", "bytes=5-2", "bytes=-0", "bytes=x-y", "bytes=-"]) expect(parseRange(u, 10), u).toBe("unsatisfiable");
    expect(parseRange("bytes=0-1,3-4", 10)).toBeUndefined();
    expect(parseRange("items=0-1", 10)).toBeUndefined();
  });

  it("Range of an empty blob: the whole (empty) blob for any well-formed range, as Go's ServeContent answers", () => {
    for (const r of ["bytes=0-", "bytes=0-0", "bytes=5-10", "bytes=-1", "bytes=-0"]) expect(parseRange(r, 0), r).toBeUndefined();
    for (const u of ["bytes=x-y", "bytes=-"]) expect(parseRange(u, 0), u).toBe("unsatisfiable");
  });

  it("Content-Range of a chunk", () => {
    expect(parseContentRange(undefined)).toBeUndefined();
    expect(parseContentRange("0-99")).toEqual({ start: 0, end: 99 });
    expect(parseContentRange("bytes 100-199/1000")).toEqual({ start: 100, end: 199 });
    expect(codeOf(() => parseContentRange("5-1"))).toBe("RANGE_INVALID");
    expect(codeOf(() => parseContentRange("abc"))).toBe("RANGE_INVALID");
  });

  it("pagination: n from 0 to the maximum, Link only when more remain", () => {
    const q = (o: Record<string, string>) => (k: string) => o[k];
    expect(parsePage(q({}), 100, 1000)).toEqual({ n: 100, last: undefined });
    expect(parsePage(q({ n: "5", last: "b" }), undefined, 1000)).toEqual({ n: 5, last: "b" });
    for (const n of ["-1", "1001", "x", "1.5"]) expect(codeOf(() => parsePage(q({ n }), 100, 1000)), n).toBe("PAGINATION_NUMBER_INVALID");
    expect(paginate(["a", "b", "c"], { n: 2, last: undefined }, "/v2/_catalog")).toEqual({ entries: ["a", "b"], link: '</v2/_catalog?last=b&n=2>; rel="next"' });
    expect(paginate(["a", "b", "c"], { n: 2, last: "a" }, "/p")).toEqual({ entries: ["b", "c"], link: undefined });
    expect(paginate(["a"], { n: 0, last: undefined }, "/p")).toEqual({ entries: [], link: undefined });
  });
});

describe("manifests", () => {
  const desc = { mediaType: "application/vnd.oci.image.config.v1+json", digest: `sha256:${hex64}`, size: 2 };
  const oci = { schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", config: desc, layers: [desc] };
  const bytes = (o: unknown) => Buffer.from(JSON.stringify(o));

  it("takes the type from Content-Type, else mediaType, else the shape; refuses contradictions and schema 1", () => {
    expect(parseManifest(bytes(oci), "application/vnd.oci.image.manifest.v1+json; charset=utf-8").kind).toBe("manifest");
    const { mediaType: _m, ...bare } = oci;
    expect(parseManifest(bytes(bare), undefined).mediaType).toBe("application/vnd.oci.image.manifest.v1+json");
    expect(parseManifest(bytes({ schemaVersion: 2, manifests: [] }), "").mediaType).toBe("application/vnd.oci.image.index.v1+json");
    expect(codeOf(() => parseManifest(bytes(oci), "application/vnd.docker.distribution.manifest.v2+json"))).toBe("MANIFEST_INVALID");
    expect(codeOf(() => parseManifest(bytes({ ...bare, schemaVersion: 2 }), "application/vnd.docker.distribution.manifest.v2+json"))).toBe("MANIFEST_INVALID");
    expect(codeOf(() => parseManifest(bytes({ schemaVersion: 1 }), undefined))).toBe("MANIFEST_INVALID");
    expect(codeOf(() => parseManifest(bytes({ ...oci, layers: [{ ...desc, size: -1 }] }), undefined))).toBe("MANIFEST_INVALID");
    expect(storedMediaType(bytes(bare))).toBe("application/vnd.oci.image.manifest.v1+json");
    // Without a mediaType field a stored manifest is served as its shape says: the declared type must agree.
    const indexShaped = { ...bare, manifests: [] };
    expect(storedMediaType(bytes(indexShaped))).toBe("application/vnd.oci.image.index.v1+json");
    expect(codeOf(() => parseManifest(bytes(indexShaped), "application/vnd.oci.image.manifest.v1+json"))).toBe("MANIFEST_INVALID");
    expect(codeOf(() => parseManifest(bytes(bare), "application/vnd.oci.image.index.v1+json"))).toBe("MANIFEST_INVALID");
    // With the field, the field decides what is served, and it is the declared type.
    expect(parseManifest(bytes({ ...oci, manifests: [] }), "application/vnd.oci.image.manifest.v1+json").kind).toBe("manifest");
    expect(storedMediaType(bytes({ ...oci, manifests: [] }))).toBe("application/vnd.oci.image.manifest.v1+json");
    expect(storedMediaType(bytes({ schemaVersion: 1, signatures: [] }))).toBe("application/vnd.docker.distribution.manifest.v1+prettyjws");
  });

  it("Accept: OCI types only when accepted (or a wildcard), Docker types always", () => {
    expect(acceptable("application/vnd.oci.image.manifest.v1+json", [])).toBe(false);
    expect(acceptable("application/vnd.oci.image.manifest.v1+json", ["application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"])).toBe(true);
    expect(acceptable("application/vnd.oci.image.index.v1+json", ["*/*"])).toBe(true);
    expect(acceptable("application/vnd.docker.distribution.manifest.v2+json", [])).toBe(true);
  });
});
