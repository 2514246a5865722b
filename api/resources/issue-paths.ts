// Zod issues named by path: `pod.containers[0].image`, one detail per problem. The API's 400s
// (docs/api-reference.md, "Conventions"), the CLI's manifest errors and controllers that check
// a stored record against its schema (the registry GC policy) all name fields this one way.
import type { z } from "zod";

/** One problem, named by its path. */
export interface IssueDetail {
  path: string;
  message: string;
}

/** `pod.containers[0].image`; an empty path is called `root`. */
export function formatPath(path: readonly PropertyKey[], root = "body"): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else out += out === "" ? String(p) : `.${String(p)}`;
  }
  return out === "" ? root : out;
}

/** One detail per problem; an unknown-keys issue becomes one detail per key, so each is named. */
export function detailsOf(error: z.ZodError, root = "body"): IssueDetail[] {
  const details: IssueDetail[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) details.push({ path: formatPath([...issue.path, key], root), message: "unknown field" });
      continue;
    }
    details.push({ path: formatPath(issue.path, root), message: issue.message.replace(/^Invalid input: /, "") });
  }
  return details;
}
