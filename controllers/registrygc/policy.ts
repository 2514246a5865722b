// Registry garbage-collection policies (docs/registry-gc.md): which repositories a policy
// covers, which tags it keeps, whether it deletes untagged manifests, and how the collector runs for
// it. Policies are records in the platform store, one per name:
//
//   /platform/registry/gc/policies/<name>   GcPolicy as JSON (written by `capstan registry gc-policy set`)
//
// Everything that reaches the store passes parsePolicy first, and every reader parses again: a
// record written behind Capstan's back (etcdctl) that does not parse is reported by name with its
// problems and never acted on, so a broken policy removes nothing.
import { z } from "zod";
import { listAll } from "../../adapters/store/list-all.ts";
import type { Store } from "../../adapters/store/store.ts";
import { detailsOf } from "../../api/resources/issue-paths.ts";

export const policyPrefix = "/platform/registry/gc/policies/";

/** A DNS label: it is a store key segment and a command-line argument (a leading "-" would read as an option). */
const namePattern = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const nameRule = "must be 1-63 characters of a-z, 0-9 and -, starting and ending with a letter or digit";

export function isPolicyName(name: string): boolean {
  return namePattern.test(name);
}

/** The store key of policy `name`; a name that is no policy name is refused, so it cannot reach another key. */
export function policyKey(name: string): string {
  if (!isPolicyName(name)) throw new TypeError(`GC policy name ${JSON.stringify(name)} ${nameRule}`);
  return `${policyPrefix}${name}`;
}

/** How long a manifest stays untagged before a policy with deleteUntagged deletes it, when the policy does not say. */
export const defaultUntaggedGraceSeconds = 86_400;
/** The blob grace of collection runs a policy starts, when it does not say (docs/registry-gc.md). */
export const defaultGraceSeconds = 3_600;

// ---- repository globs -------------------------------------------------------------------------

// Repository names are distribution's (docs/registry.md, "Names"): lower-case path components
// separated by "/". A glob is such a name in which "*" and "**" stand for parts of it.
const globPattern = /^[a-z0-9._*-]+(\/[a-z0-9._*-]+)*$/;
const globRule =
  'must be a repository name pattern: path segments of a-z, 0-9, ".", "_", "-" separated by "/", ' +
  'with "*" (any characters within one segment) and "**" (any characters across segments)';

// The regular expression of a repository glob: "*" matches within one path segment, "**" across
// segments (any characters, "/" included), and a whole segment "**" followed by "/" also matches no
// segment at all, so "a/**/b" matches "a/b" and "a/x/y/b", and "**/web" matches "web". Everything
// else is literal; the glob matches the whole name ("shop/**" matches "shop/web", not "shop").
function globRegExp(glob: string): RegExp {
  let re = "^";
  for (let i = 0; i < glob.length; ) {
    if (glob.startsWith("**/", i) && (i === 0 || glob[i - 1] === "/")) {
      re += "(?:.*/)?";
      i += 3;
    } else if (glob.startsWith("**", i)) {
      re += ".*";
      i += 2;
    } else if (glob[i] === "*") {
      re += "[^/]*";
      i += 1;
    } else {
      re += glob[i]!.replace(/[.\\+?^$()[\]{}|-]/g, "\\$&");
      i += 1;
    }
  }
  return new RegExp(`${re}$`);
}

/** Compiled globs; policies are few, so the cache is small, and it is emptied if callers pass many. */
const globCache = new Map<string, RegExp>();

/** Whether repository `name` matches `glob` (see globRegExp for the syntax). */
export function repositoryMatches(glob: string, name: string): boolean {
  let re = globCache.get(glob);
  if (re === undefined) {
    if (globCache.size >= 256) globCache.clear();
    re = globRegExp(glob);
    globCache.set(glob, re);
  }
  return re.test(name);
}

// ---- the policy record ------------------------------------------------------------------------

const GroupRegExp = z
  .string()
  .min(1, "must not be empty (a group that takes every tag is .*)")
  .superRefine((source, ctx) => {
    try {
      new RegExp(source);
    } catch (e) {
      ctx.addIssue({ code: "custom", message: `not a valid regular expression: ${(e as Error).message.replace(/^Invalid regular expression: /, "")}` });
    }
  });

const Seconds = z.number().int("must be a whole number of seconds").min(0, "must be >= 0");

export const GcPolicy = z.strictObject({
  name: z.string().regex(namePattern, nameRule),
  repositories: z.string().regex(globPattern, globRule),
  keepNewest: z
    .strictObject({
      /** Regular expressions over tag names (unanchored, RegExp.test); a tag belongs to the first it matches. */
      groups: z.array(GroupRegExp).min(1, "needs at least one group (a regular expression over tag names)"),
      /** Tags kept per repository and group, newest first. */
      count: z.number().int("must be a whole number").min(0, "must be >= 0"),
    })
    .optional(),
  /** Candidates of keepNewest pushed less than this many days ago are kept. Alone it removes nothing. */
  keepNewerThanDays: z.number().min(0, "must be >= 0").optional(),
  /** Delete manifests of matching repositories once untagged for untaggedGraceSeconds. */
  deleteUntagged: z.boolean().optional(),
  untaggedGraceSeconds: Seconds.optional(),
  /** The blob grace of collection runs started for this policy. */
  graceSeconds: Seconds.optional(),
  /** How often the controller runs a collection for this policy; absent: only on request. */
  intervalSeconds: z.number().int("must be a whole number of seconds").min(1, "must be >= 1").optional(),
});
export type GcPolicy = z.infer<typeof GcPolicy>;

export type PolicyParse = { ok: true; policy: GcPolicy } | { ok: false; problems: string[] };

// A missing field reads "is required" rather than zod's "expected string, received undefined".
const parseOptions = {
  error: (issue: z.core.$ZodRawIssue) => (issue.code === "invalid_type" && issue.input === undefined ? "is required" : undefined),
};

/** Validate a policy (parsed JSON). Each problem is `FIELD: message`, e.g. `keepNewest.groups[1]: not a valid regular expression: ...`. */
export function parsePolicy(json: unknown): PolicyParse {
  const result = GcPolicy.safeParse(json, parseOptions);
  if (result.success) return { ok: true, policy: result.data };
  return { ok: false, problems: detailsOf(result.error, "policy").map((d) => `${d.path}: ${d.message}`) };
}

/** The untagged grace of `policy` in seconds, its default filled in. */
export function untaggedGraceSecondsOf(policy: GcPolicy): number {
  return policy.untaggedGraceSeconds ?? defaultUntaggedGraceSeconds;
}

/** The blob grace of `policy`'s collection runs in seconds, its default filled in. */
export function graceSecondsOf(policy: GcPolicy): number {
  return policy.graceSeconds ?? defaultGraceSeconds;
}

// ---- the store --------------------------------------------------------------------------------

/** A stored record that does not parse: its name (the key's last segment) and why. */
export interface InvalidPolicyRecord {
  name: string;
  problems: string[];
}

/** Read one stored value: JSON, a valid policy, and named as its key says. */
function readRecord(name: string, value: string): PolicyParse {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch (e) {
    return { ok: false, problems: [`policy: not JSON: ${(e as Error).message}`] };
  }
  const parsed = parsePolicy(json);
  if (parsed.ok && parsed.policy.name !== name) {
    return { ok: false, problems: [`name: ${JSON.stringify(parsed.policy.name)} differs from the name in its key (${name})`] };
  }
  return parsed;
}

/** Every policy in name order, and the records that do not parse (which nothing must act on). */
export async function listPolicies(store: Store): Promise<{ policies: GcPolicy[]; invalid: InvalidPolicyRecord[] }> {
  const policies: GcPolicy[] = [];
  const invalid: InvalidPolicyRecord[] = [];
  for (const kv of (await listAll(store, policyPrefix)).items) {
    const name = kv.key.slice(policyPrefix.length);
    const read = readRecord(name, kv.value);
    if (read.ok) policies.push(read.policy);
    else invalid.push({ name, problems: read.problems });
  }
  return { policies, invalid };
}

/** Policy `name`: parsed, or its problems when the stored record does not parse; null when there is none. */
export async function getPolicy(store: Store, name: string): Promise<PolicyParse | null> {
  const kv = await store.get(policyKey(name));
  return kv === null ? null : readRecord(name, kv.value);
}

/**
 * Store `policy` (validated again here, so no caller can store an invalid one: a TypeError naming
 * the fields). Answers whether it was new, replaced one, or was already stored as it is (then
 * nothing is written, so watchers see no change).
 */
export async function putPolicy(store: Store, policy: GcPolicy): Promise<"created" | "updated" | "unchanged"> {
  const parsed = parsePolicy(policy);
  if (!parsed.ok) throw new TypeError(`invalid GC policy: ${parsed.problems.join("; ")}`);
  const key = policyKey(parsed.policy.name);
  const value = JSON.stringify(parsed.policy);
  const before = await store.get(key);
  if (before?.value === value) return "unchanged";
  await store.put(key, value);
  return before === null ? "created" : "updated";
}

/** Remove policy `name`; false when there was none. One transaction: absent answers false, else it is deleted. */
export async function deletePolicy(store: Store, name: string): Promise<boolean> {
  const key = policyKey(name);
  const { succeeded: absent } = await store.txn([{ key, target: "createRevision", equals: 0 }], [], [{ type: "delete", key }]);
  return !absent;
}
