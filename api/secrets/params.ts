// Validation of /v2/secrets input: the app/proc/path triple in the query and the PUT body. Every
// failure is a 400 naming the parameter or field; nothing is written before all of it passes.
//
//   app   an app name (the console's rule: a DNS label, at most 63 characters)
//   proc  <app>.<type>.<proc_name>, whose first segment is `app` (a record of app A can never be
//         addressed through app B); at most 128 characters, so it is a valid PodGroup name
//   path  relative to /platform/app or absolute (api/resources/secret-path.ts): 1..4096
//         characters, no control characters (NUL included), no "." or ".." segment, no empty
//         segment ("a//b", or a leading "//"), not ending in "/" (it names a file). It comes
//         out in its one spelling (canonicalSecretPath): `/platform/app/secret.conf` is the
//         record `secret.conf`
//   mode  octal, 3 digits or 4 starting with 0 (no setuid, setgid, sticky); owner and group: root,
//         the spec's only owner of secret files at runtime
import { z } from "zod";
import { badRequest, parseQuery, readBodyBytes } from "../http/index.ts";
import { appNamePattern } from "../console/records.ts";
import { secretModeProblem } from "../resources/secret-mode.ts";
import { canonicalSecretPath, maxSecretPathLength, secretPathProblem } from "../resources/secret-path.ts";
import type { Context } from "hono";
import type { SecretRecord } from "./record.ts";

export const maxPathLength = maxSecretPathLength;
export const maxBodyBytes = 1 << 20;

const segment = "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?";
const procNameSegment = "[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?";
const procPattern = new RegExp(`^${segment}\\.${segment}\\.${procNameSegment}$`);

const App = z.string().regex(appNamePattern, "must be an app name (a lower-case DNS label, at most 63 characters)");
const Proc = z
  .string()
  .max(128, "must be at most 128 characters")
  .regex(procPattern, "must be <app>.<type>.<proc_name> (lower-case letters, digits, '-'; '_' also in proc_name)");
const Path = z
  .string()
  .superRefine((p, ctx) => {
    const problem = secretPathProblem(p);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  })
  // secretPathProblem accepts only paths canonicalSecretPath resolves.
  .transform((p) => canonicalSecretPath(p)!);

const GetQuery = z.object({ app: App, proc: Proc.optional(), path: Path.optional() });
const AddressQuery = z.object({ app: App, proc: Proc, path: Path });

function checkProcOfApp(app: string, proc: string | undefined): void {
  if (proc !== undefined && proc.split(".")[0] !== app) {
    throw badRequest(`proc ${proc} does not belong to app ${app}: its first segment must be ${app}`, [{ path: "proc", message: `must start with "${app}."` }]);
  }
}

export function parseGetQuery(c: Context): z.output<typeof GetQuery> {
  const q = parseQuery(c, GetQuery);
  checkProcOfApp(q.app, q.proc);
  return q;
}

export function parseAddressQuery(c: Context): z.output<typeof AddressQuery> {
  const q = parseQuery(c, AddressQuery);
  checkProcOfApp(q.app, q.proc);
  return q;
}

// The spec: "Only the root user is supported as file owner at runtime" (Limits: secret file user,
// root only). An owner or group the container would not get is refused rather than stored, shown
// and then not honoured.
const rootOnly = 'must be "root" (or "0"): the spec supports only root as the owner of secret files at runtime (docs/secrets.md)';
const Root = z.string().refine((v) => v === "root" || v === "0", rootOnly);
const Mode = z.string().superRefine((m, ctx) => {
  const problem = secretModeProblem(m);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});
const RecordBody = z.strictObject({
  content: z.string(),
  owner: Root.default("root"),
  group: Root.default("root"),
  mode: Mode.default("400"),
});

/**
 * The record a PUT body writes (docs/secrets.md, "Input rules"). A JSON object with a string `content` is the
 * record form, and its other fields are checked strictly (unknown fields and wrong types are a
 * 400, so a typo like "onwer" is not silently dropped). Any other body, JSON or not, is stored
 * whole as the content with the defaults owner root, group root, mode 400.
 */
export function recordFromBody(text: string): SecretRecord {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { content: text, owner: "root", group: "root", mode: "400" };
  }
  const isRecordForm = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) && typeof (parsed as { content?: unknown }).content === "string";
  if (!isRecordForm) return { content: text, owner: "root", group: "root", mode: "400" };
  const result = RecordBody.safeParse(parsed);
  if (result.success) return result.data;
  const details = result.error.issues.flatMap((i) =>
    i.code === "unrecognized_keys" ? i.keys.map((k) => ({ path: k, message: "unknown field" })) : [{ path: i.path.join(".") || "body", message: i.message }],
  );
  throw badRequest(`invalid secret record: ${details.map((d) => `${d.path}: ${d.message}`).join("; ")}`, details);
}

/** The body as UTF-8 text, at most 1 MiB (400 beyond, the rest unread). */
export async function readBodyText(c: Context): Promise<string> {
  return decodeUtf8(await readBodyBytes(c, maxBodyBytes));
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw badRequest("request body is not valid UTF-8 text", [{ path: "body", message: "not valid UTF-8" }]);
  }
}
