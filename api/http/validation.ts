// Turning zod issues into a 400 that names every offending field. Shared by body and query parsing.
import type { z } from "zod";
import { detailsOf } from "../resources/issue-paths.ts";
import { badRequest, type ApiError, type ErrorDetail } from "./errors.ts";

// A missing field reads "is required" rather than zod's "expected string, received undefined".
// This is a per-parse error map: messages a schema sets itself (patterns, enums) still win.
const parseOptions = {
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === "invalid_type" && issue.input === undefined ? "is required" : undefined,
};

/** At most this many problems are spelled out in the message; all of them are in details. */
const messageIssues = 5;

export function invalid(what: string, details: ErrorDetail[]): ApiError {
  const shown = details.slice(0, messageIssues).map((d) => `${d.path}: ${d.message}`);
  const more = details.length > messageIssues ? `; and ${details.length - messageIssues} more` : "";
  return badRequest(`invalid ${what}: ${shown.join("; ")}${more}`, details);
}

/**
 * Parse `value` with `schema`, or throw a 400 ApiError whose message names each problem (`invalid
 * PodGroupSpec: pod.containers[0].image: is required`) and whose details list all of them.
 */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, what: string, root = "body"): z.output<S> {
  const result = schema.safeParse(value, parseOptions);
  if (result.success) return result.data;
  throw invalid(what, detailsOf(result.error, root));
}
