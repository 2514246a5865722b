// From a container's listed secret paths and the proc's records to the files to install, or the
// error that goes in its marker instead. Pure functions.
import { posix } from "node:path";
import type { ArchiveFile } from "../../adapters/cluster/index.ts";
import { digestOf, type InstalledFile } from "./marker.ts";
import type { SecretFileRecord } from "./vault.ts";

/** Where relative secret paths land (the spec's application directory). */
export const appDirectory = "/platform/app";

const octalMode = /^[0-7]{1,4}$/;

/**
 * The absolute path inside the container. Relative paths are under /platform/app; "." segments
 * fold away; ".." is refused (the API and the PodGroup schema refuse it too: this is the last line).
 */
export function resolveSecretPath(path: string): string | undefined {
  if (path === "" || path.includes("\0") || path.split("/").includes("..")) return undefined;
  const abs = posix.normalize(path.startsWith("/") ? path : `${appDirectory}/${path}`);
  // The app directory itself (".") is no file path: installing there would replace the directory.
  if (abs === "/" || abs.endsWith("/") || abs === appDirectory) return undefined;
  return abs;
}

export type Plan =
  | { kind: "install"; files: ArchiveFile[]; installed: InstalledFile[] }
  | { kind: "error"; error: string };

/**
 * Every listed path must have a record (matched by the path exactly as written: a relative and an
 * absolute path are different records). Files are owned by root: the only owner the spec supports
 * at runtime, whatever the record's owner/group say.
 */
export function planInstall(proc: string, listed: readonly string[], records: ReadonlyMap<string, SecretFileRecord>): Plan {
  const missing = listed.filter((p) => !records.has(p));
  if (missing.length === 1) return { kind: "error", error: `secret file ${missing[0]} is not written for ${proc}` };
  if (missing.length > 1) return { kind: "error", error: `secret files ${missing.join(", ")} are not written for ${proc}` };
  const files: ArchiveFile[] = [];
  const installed: InstalledFile[] = [];
  const targets = new Map<string, string>();
  for (const path of new Set(listed)) {
    const record = records.get(path)!;
    const target = resolveSecretPath(path);
    if (target === undefined) return { kind: "error", error: `secret file ${path} of ${proc} has an invalid path` };
    const other = targets.get(target);
    if (other !== undefined) return { kind: "error", error: `secret files ${other} and ${path} of ${proc} both resolve to ${target}` };
    targets.set(target, path);
    if (!octalMode.test(record.mode)) return { kind: "error", error: `secret file ${path} of ${proc} has an invalid mode ${JSON.stringify(record.mode)}` };
    files.push({ path: target, content: record.content, mode: parseInt(record.mode, 8), uid: 0, gid: 0 });
    installed.push({ path, digest: digestOf(record.content, record.mode) });
  }
  return { kind: "install", files, installed };
}
