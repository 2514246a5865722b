// From a container's listed secret paths and the proc's records to the files to install, or the
// error that goes in its marker instead; and which installed files lost their record. Pure
// functions.
import type { ArchiveFile } from "../../adapters/cluster/index.ts";
import { secretModeBits, secretModeProblem } from "../../api/resources/secret-mode.ts";
import { appDirectory, resolveSecretPath } from "../../api/resources/secret-path.ts";
import { digestOf, type InstalledFile, type Marker } from "./marker.ts";
import type { SecretFileRecord } from "./vault.ts";

export { appDirectory, resolveSecretPath };

export type Plan =
  | { kind: "install"; files: ArchiveFile[]; installed: InstalledFile[] }
  | { kind: "error"; error: string };

/**
 * The record of each file, by where it lands in the container. `secret.conf` and
 * `/platform/app/secret.conf` are one file; when records exist under both spellings (stored before
 * the secrets API kept one spelling), the later write wins, as the API shows it.
 */
export function recordsByFile(written: ReadonlyMap<string, SecretFileRecord>): Map<string, SecretFileRecord> {
  const byFile = new Map<string, SecretFileRecord>();
  for (const [path, record] of written) {
    const target = resolveSecretPath(path);
    if (target === undefined) continue;
    const seen = byFile.get(target);
    if (seen === undefined || (record.modRevision ?? 0) > (seen.modRevision ?? 0)) byFile.set(target, record);
  }
  return byFile;
}

/**
 * Every listed path must have a record of the same file, whichever spelling it was written
 * under. Files are owned by root: the only owner the spec supports at runtime, whatever the
 * record's owner/group say.
 */
export function planInstall(proc: string, listed: readonly string[], written: ReadonlyMap<string, SecretFileRecord>): Plan {
  const byFile = recordsByFile(written);
  const records = new Map<string, SecretFileRecord>();
  for (const path of listed) {
    const target = resolveSecretPath(path);
    const record = target === undefined ? written.get(path) : byFile.get(target);
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
    // The API refuses such modes; a record stored before that rule (7777 was taken) is not installed.
    const modeProblem = secretModeProblem(record.mode);
    if (modeProblem !== undefined) return { kind: "error", error: `secret file ${path} of ${proc} has an invalid mode ${JSON.stringify(record.mode)}: ${modeProblem}; write it again` };
    files.push({ path: target, content: record.content, mode: secretModeBits(record.mode), uid: 0, gid: 0 });
    installed.push({ path, digest: digestOf(record.content, record.mode) });
  }
  return { kind: "install", files, installed };
}

/**
 * The files of a container that lost their record: `present` are the container paths this
 * controller put there (the marker's `present`), and a file goes once no record of the proc lands
 * on it any more (the secret was deleted). Files dropped from the spec but still written are left
 * alone: a spec change replaces the containers (docs/secret-sync.md).
 */
export function filesToRemove(present: readonly string[], written: ReadonlyMap<string, SecretFileRecord>): string[] {
  const byFile = recordsByFile(written);
  return present.filter((target) => !byFile.has(target));
}

/**
 * The marker (reconciler.ts, S6) to write before removing `gone` from a container, or undefined
 * when `current` already names none of them in `files`. A listed file whose record is gone makes the plan the
 * "not written" error, the marker the final bookkeeping writes too; otherwise the files keep their
 * entries but those of `gone`.
 */
export function removalIntent(
  current: Marker | undefined,
  podGroup: string,
  gone: readonly string[],
  plan: Plan,
): Pick<Marker, "podGroup" | "files" | "error"> | undefined {
  if (current === undefined || current.error !== undefined) return undefined;
  const goneSet = new Set(gone);
  const lands = (p: string) => {
    const target = resolveSecretPath(p);
    return target !== undefined && goneSet.has(target);
  };
  if (!current.files.some((f) => lands(f.path))) return undefined;
  if (plan.kind === "error") return { podGroup, files: [], error: plan.error };
  return { podGroup, files: current.files.filter((f) => !lands(f.path)) };
}
