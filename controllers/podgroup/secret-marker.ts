// The PodGroup half of the handshake with Secret-sync (docs/secret-sync.md). Secret-sync writes
// /platform/secret-sync/installed/<containerId> = {podGroup, files: [{path, digest}], error?, at,
// node} once it has put a container's secret files into it (or could not). A created container
// whose spec lists secretFiles is started only when that marker exists, has no `error` and names
// every listed path: a process must never start without its secrets. Controllers never import
// each other, so the marker is decoded here from its stored form, and only the fields the gate
// needs are read. Pure.

import { resolveSecretPath } from "../../api/resources/secret-path.ts";

export const defaultSecretMarkerPrefix = "/platform/secret-sync/installed/";

export interface SecretMarkerEntry {
  containerId: string;
  /** The group the marker names; undefined when the value cannot be read. */
  podGroup: string | undefined;
  paths: string[];
  error: string | undefined;
  /** The secrets service was sealed when looked up (withSealState): a wait for files says so. */
  sealed?: boolean;
}

/** Never throws: an unreadable marker names no group and no path, so it never lets a start through. */
export function decodeSecretMarker(kv: { key: string; value: string }): SecretMarkerEntry {
  const containerId = kv.key.slice(kv.key.lastIndexOf("/") + 1);
  const unreadable = { containerId, podGroup: undefined, paths: [], error: undefined };
  let v: unknown;
  try {
    v = JSON.parse(kv.value);
  } catch {
    return unreadable;
  }
  if (!v || typeof v !== "object") return unreadable;
  const m = v as { podGroup?: unknown; files?: unknown; error?: unknown };
  if (typeof m.podGroup !== "string" || !Array.isArray(m.files)) return unreadable;
  const paths = m.files.flatMap((f: unknown) => {
    const path = (f as { path?: unknown } | null)?.path;
    return typeof path === "string" ? [path] : [];
  });
  return { containerId, podGroup: m.podGroup, paths, error: typeof m.error === "string" ? m.error : undefined };
}

export const waitingForSecrets = "waiting for secret files";
export const secretsSealedNote = "secrets service sealed";

/**
 * The secrets leader's seal state, as it publishes it (docs/secrets.md, "Seeing the seal"):
 * /platform/secret-sync/seal/status = {sealed, at}. Decoded from its stored form (controllers do
 * not import the secrets service). Never throws: an unreadable record says nothing (not sealed).
 */
export const sealStatusPrefix = "/platform/secret-sync/seal/";
export function decodeSealStatus(kv: { value: string }): { sealed: boolean } {
  try {
    return { sealed: (JSON.parse(kv.value) as { sealed?: unknown } | null)?.sealed === true };
  } catch {
    return { sealed: false };
  }
}

/** Where the seal state is beside a marker prefix (…/installed/ -> …/seal/), so tests under their own root see their own. */
export function sealStatusPrefixOf(markerPrefix: string): string {
  const base = markerPrefix.endsWith("/") ? markerPrefix : `${markerPrefix}/`;
  return base.endsWith("/installed/") ? `${base.slice(0, -"installed/".length)}seal/` : sealStatusPrefix;
}

/** A marker lookup's answer with the seal state: sealed, a missing marker is a sealed placeholder. */
export function withSealState(marker: SecretMarkerEntry | undefined, containerId: string, sealed: boolean): SecretMarkerEntry | undefined {
  if (!sealed) return marker;
  return { ...(marker ?? { containerId, podGroup: undefined, paths: [], error: undefined }), sealed: true };
}

/**
 * Whether a created container of `group` that lists `secretFiles` may start: undefined when it
 * may, else why not (the marker's own error text when it has one).
 */
export function secretsNotReady(marker: SecretMarkerEntry | undefined, group: string, secretFiles: readonly string[]): string | undefined {
  if (secretFiles.length === 0) return undefined;
  // While sealed nothing installs files: the wait says why (docs/secrets.md, "Seeing the seal").
  const waiting = marker?.sealed === true ? `${waitingForSecrets}: ${secretsSealedNote}` : waitingForSecrets;
  if (!marker || marker.podGroup !== group) return waiting;
  if (marker.error !== undefined) return marker.error;
  // One file, either spelling (`secret.conf` is `/platform/app/secret.conf`: docs/secret-sync.md).
  const have = new Set(marker.paths.map((p) => resolveSecretPath(p) ?? p));
  return secretFiles.every((p) => have.has(resolveSecretPath(p) ?? p)) ? undefined : waiting;
}
