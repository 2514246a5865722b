// Whether a pod spec from a file is the one the server holds. `apply` PATCHes cmd=spec only when
// it is not (every cmd=spec bumps the version and rolls every instance, so re-applying an unchanged
// file must not), and `-wait` uses it to see that the server has taken the change in.
import type { PodSpec } from "../api/resources/podgroup.ts";

/**
 * Equal up to what the server manages: `version` is ignored and a missing `name` is the group's
 * name (as the server fills it in). Key order and absent-versus-undefined do not matter.
 */
export function samePodSpec(a: PodSpec, b: PodSpec, groupName: string): boolean {
  return canonical(comparable(a, groupName)) === canonical(comparable(b, groupName));
}

function comparable(pod: PodSpec, groupName: string): Omit<PodSpec, "version"> {
  const { version: _serverManaged, ...rest } = pod;
  return { ...rest, name: pod.name ?? groupName };
}

/** JSON with object keys sorted and undefined members dropped. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
