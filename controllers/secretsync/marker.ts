// The installed marker: /platform/secret-sync/installed/<containerId>, the store half of the
// PodGroup <-> Secret-sync handshake (briefs/issue5.md). The PodGroup controller starts a
// container whose pod lists secret files only once this marker exists without `error` and names
// every listed path; with `error` it reports the error and leaves the container created.
import { createHash } from "node:crypto";
import { resolveSecretPath } from "../../api/resources/secret-path.ts";

export const defaultMarkerPrefix = "/platform/secret-sync/installed/";

export interface InstalledFile {
  /** The path as the PodGroup spec lists it (relative or absolute), not the resolved one. */
  path: string;
  /** digestOf(content, mode) of what was installed. */
  digest: string;
}

export interface Marker {
  podGroup: string;
  files: InstalledFile[];
  /** Set when the files could not be installed (then `files` is empty). */
  error?: string;
  /** ISO time of the write. */
  at: string;
  /** Node of the container (additive to the contract): lets the garbage collector look it up. */
  node?: string;
  /**
   * Container paths (resolved) of the secret files this controller put into the container and
   * has not removed, error or not (additive): what to remove when a record is deleted. A marker
   * without it records them in `files` only.
   */
  present?: string[];
  /**
   * Container paths of files of deleted secrets that were emptied because the container could not
   * remove them then (not running, say); removed once it runs (additive).
   */
  emptied?: string[];
}

export interface MarkerEntry {
  containerId: string;
  marker: Marker | undefined;
}

/**
 * sha256 over mode and content. The mode is part of it because a chmod-only change must reinstall
 * too; the NUL separator keeps ("40", "0x") and ("400", "x") apart.
 */
export function digestOf(content: string, mode: string): string {
  return createHash("sha256").update(mode).update("\0").update(content, "utf8").digest("hex");
}

/** Never throws: an unreadable marker is kept as undefined, so it is rewritten rather than trusted. */
export function decodeMarker(kv: { key: string; value: string }): MarkerEntry {
  const containerId = kv.key.slice(kv.key.lastIndexOf("/") + 1);
  try {
    const v = JSON.parse(kv.value) as Partial<Marker> | null;
    const ok =
      v !== null &&
      typeof v === "object" &&
      typeof v.podGroup === "string" &&
      Array.isArray(v.files) &&
      v.files.every((f) => typeof f?.path === "string" && typeof f.digest === "string") &&
      (v.error === undefined || typeof v.error === "string") &&
      [v.present, v.emptied].every((list) => list === undefined || (Array.isArray(list) && list.every((p) => typeof p === "string")));
    return { containerId, marker: ok ? (v as Marker) : undefined };
  } catch {
    return { containerId, marker: undefined };
  }
}

/** True when `marker` already records exactly `files` for `podGroup` without error: nothing to do. */
export function markerCovers(marker: Marker | undefined, podGroup: string, files: readonly InstalledFile[]): boolean {
  if (!marker || marker.error !== undefined || marker.podGroup !== podGroup || marker.files.length !== files.length) return false;
  const have = new Map(marker.files.map((f) => [f.path, f.digest]));
  return files.every((f) => have.get(f.path) === f.digest);
}

/** An error marker has nothing to compare but its text. */
export function markerHasError(marker: Marker | undefined, podGroup: string, error: string): boolean {
  return marker !== undefined && marker.podGroup === podGroup && marker.error === error;
}

/**
 * The container paths of the files the marker says are in the container: its `present`, or for a
 * marker written before that field, its files when it has no error (an older error marker knows
 * of none).
 */
export function presentFiles(marker: Marker | undefined): string[] {
  if (marker === undefined) return [];
  if (marker.present !== undefined) return marker.present;
  if (marker.error !== undefined) return [];
  return marker.files.flatMap((f) => resolveSecretPath(f.path) ?? []);
}

/** Whether two lists of paths hold the same paths. */
export function samePaths(a: readonly string[], b: readonly string[]): boolean {
  const x = new Set(a);
  const y = new Set(b);
  return x.size === y.size && [...x].every((p) => y.has(p));
}
