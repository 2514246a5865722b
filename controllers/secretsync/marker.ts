// The installed marker: /platform/secret-sync/installed/<containerId>, the store half of the
// PodGroup <-> Secret-sync handshake (briefs/issue5.md). The PodGroup controller starts a
// container whose pod lists secret files only once this marker exists without `error` and names
// every listed path; with `error` it reports the error and leaves the container created.
import { createHash } from "node:crypto";

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
      (v.error === undefined || typeof v.error === "string");
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
