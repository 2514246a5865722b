// The part of a stored PodGroup (podgroups/<name>, api/resources/podgroup.ts) Secret-sync reads:
// which secret files each container of the pod lists. Decoding is lenient about everything else
// (the PodGroup API validated it) and never throws: an unreadable spec installs nothing.
import { z } from "zod";

export const defaultPodGroupPrefix = "/platform/orchestrator/podgroups/";

const SecretSpec = z.object({
  name: z.string(),
  namespace: z.string(),
  deleting: z.boolean().optional(),
  pod: z.object({
    containers: z.array(z.object({ secretFiles: z.array(z.string()).optional() })),
  }),
});

export interface SpecEntry {
  name: string;
  /**
   * secretFiles of pod.containers[i], by container index; undefined when the spec is unreadable or
   * the group is not named for its namespace (docs/secret-sync.md: the secrets of app A go only to
   * groups of namespace A named `A` or `A.<name>`).
   */
  secretFiles: string[][] | undefined;
  deleting: boolean;
}

export function decodeSpec(kv: { key: string; value: string }): SpecEntry {
  const name = kv.key.slice(kv.key.lastIndexOf("/") + 1);
  let json: unknown;
  try {
    json = JSON.parse(kv.value);
  } catch {
    return { name, secretFiles: undefined, deleting: false };
  }
  const parsed = SecretSpec.safeParse(json);
  if (!parsed.success || parsed.data.name !== name) return { name, secretFiles: undefined, deleting: false };
  // The API refuses such a group; a record written another way gets nothing installed either.
  if (appOf(name) !== parsed.data.namespace) return { name, secretFiles: undefined, deleting: parsed.data.deleting === true };
  return { name, secretFiles: parsed.data.pod.containers.map((c) => c.secretFiles ?? []), deleting: parsed.data.deleting === true };
}

/** True when some container of the pod lists a secret file: only then does Secret-sync act. */
export function listsSecrets(e: SpecEntry | undefined): boolean {
  return e?.secretFiles?.some((files) => files.length > 0) ?? false;
}

/** The app of a proc `<app>.<type>.<proc_name>`: its first dot segment. */
export function appOf(proc: string): string {
  const i = proc.indexOf(".");
  return i < 0 ? proc : proc.slice(0, i);
}
