// distribution's on-disk layout (registry/storage/paths.go), so a root written by distribution is
// served as it is and the other way round (docs/registry.md, "Layout"):
//
//   /docker/registry/v2/blobs/<alg>/<hex[0:2]>/<hex>/data                                 the bytes
//   /docker/registry/v2/repositories/<name>/_layers/<alg>/<hex>/link                       blob in repo
//   /docker/registry/v2/repositories/<name>/_manifests/revisions/<alg>/<hex>/link          manifest in repo
//   /docker/registry/v2/repositories/<name>/_manifests/tags/<tag>/current/link             tag -> digest
//   /docker/registry/v2/repositories/<name>/_manifests/tags/<tag>/index/<alg>/<hex>/link   tag history
//   /docker/registry/v2/repositories/<name>/_uploads/<id>/{data,startedat}                 an upload
//   /docker/registry/v2/repositories/<name>/_referrers/<alg>/<hex>/<alg>/<hex>/link        ours: referrers
//   /docker/registry/v2/_quarantine/<alg>/<hex>/data                                       ours: a blob being collected
//
// A link file holds the digest string without a newline. Only blobs/ fans out on hex[0:2]. Callers
// pass names, tags and ids already checked by registry-names.ts; the driver re-checks every path.
// Here in api/resources/ because the registry (api/registry/) and its garbage collector
// (controllers/registrygc/) both walk the layout.
import type { Digest } from "./registry-names.ts";

export const root = "/docker/registry/v2";
export const repositoriesRoot = `${root}/repositories`;

export function blobDir(d: Digest): string {
  return `${root}/blobs/${d.algorithm}/${d.hex.slice(0, 2)}/${d.hex}`;
}

export function blobData(d: Digest): string {
  return `${blobDir(d)}/data`;
}

/** Where garbage collection moves a blob before deleting it for good (docs/registry-gc.md). */
export function quarantineDir(d: Digest): string {
  return `${root}/_quarantine/${d.algorithm}/${d.hex}`;
}

export function quarantineData(d: Digest): string {
  return `${quarantineDir(d)}/data`;
}

export function repository(name: string): string {
  return `${repositoriesRoot}/${name}`;
}

export function layerLink(name: string, d: Digest): string {
  return `${repository(name)}/_layers/${d.algorithm}/${d.hex}/link`;
}

export function manifestsDir(name: string): string {
  return `${repository(name)}/_manifests`;
}

export function revisionDir(name: string, d: Digest): string {
  return `${manifestsDir(name)}/revisions/${d.algorithm}/${d.hex}`;
}

export function revisionLink(name: string, d: Digest): string {
  return `${revisionDir(name, d)}/link`;
}

export function tagsDir(name: string): string {
  return `${manifestsDir(name)}/tags`;
}

export function tagDir(name: string, tag: string): string {
  return `${tagsDir(name)}/${tag}`;
}

export function tagCurrentLink(name: string, tag: string): string {
  return `${tagDir(name, tag)}/current/link`;
}

export function tagIndexLink(name: string, tag: string, d: Digest): string {
  return `${tagDir(name, tag)}/index/${d.algorithm}/${d.hex}/link`;
}

export function uploadDir(name: string, id: string): string {
  return `${repository(name)}/_uploads/${id}`;
}

export function uploadData(name: string, id: string): string {
  return `${uploadDir(name, id)}/data`;
}

export function uploadStartedAt(name: string, id: string): string {
  return `${uploadDir(name, id)}/startedat`;
}

/** The directory holding one link per manifest whose `subject` is `subject`. */
export function referrersDir(name: string, subject: Digest): string {
  return `${repository(name)}/_referrers/${subject.algorithm}/${subject.hex}`;
}

export function referrerLink(name: string, subject: Digest, referrer: Digest): string {
  return `${referrersDir(name, subject)}/${referrer.algorithm}/${referrer.hex}/link`;
}
