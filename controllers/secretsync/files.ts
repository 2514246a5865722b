// From a container's listed secret paths and the proc's records to the files to install, or the
// error that goes in its marker instead. Pure functions.
import type { ArchiveFile } from "../../adapters/cluster/index.ts";
import { appDirectory, resolveSecretPath } from "../../api/resources/secret-path.ts";
import { digestOf, type InstalledFile } from "./marker.ts";
import type { SecretFileRecord } from "./vault.ts";

export { appDirectory, resolveSecretPath };

const octalMode = /^[0-7]{1,4}$/;

export type Plan =
  | { kind: "install"; files: ArchiveFile[]; installed: InstalledFile[] }
  | { kind: "error"; error: string };

/**
 * Every listed path must have a record: the one written under the same spelling, else the one
 * that lands on the same file (`secret.conf` and `/platform/app/secret.conf`). Files are owned by
 * root: the only owner the spec supports at runtime, whatever the record's owner/group say.
 */
export function planInstall(proc: string, listed: readonly string[], written: ReadonlyMap<string, SecretFileRecord>): Plan {
  const byTarget = new Map<string, SecretFileRecord>();
  for (const [path, record] of written) {
    const target = resolveSecretPath(path);
    if (target !== undefined && !byTarget.has(target)) byTarget.set(target, record);
  }
  const records = new Map<string, SecretFileRecord>();
  for (const path of listed) {
    const target = resolveSecretPath(path);
    const record = written.get(path) ?? (target === undefined ? undefined : byTarget.get(target));
    if (record !== undefined) records.set(path, record);
  }
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
