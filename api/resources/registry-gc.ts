// Registry garbage collection's records in the platform store (docs/registry-gc.md), shared by the
// serving registry and the `capstan registry gc` commands (api/registry/gc-journal.ts, gc-runs.ts,
// gc-api.ts use them) and the Registry-GC controller (controllers/registrygc/), so
// they live in api/resources/ (docs/development.md, "Conventions").
//
// What the serving registry tells the garbage collector (docs/registry-gc.md, "Why nothing is
// lost"): touches and changed repositories, written to the platform store under
// /platform/registry/gc/ BEFORE the request acts (api/registry/gc-journal.ts writes them):
//
//   touch/<alg>:<hex>            {"at": ms}                  a request is about to rely on this digest
//   tag-touch/<repository>/<tag> {"at": ms, "digest": d}     a manifest PUT is about to point <tag> at d
//   dirty/<repository>           {"at": ms}                  a manifest, tag or referrer link is about to change
//
// Garbage collection runs as records too (docs/registry-gc.md, "Runs"): whoever asks for a run (the
// HTTP endpoint, `capstan registry gc`, `capstan registry garbage-collect`, a policy's interval)
// writes a pending record; the Registry-GC controller of the leading registry carries it out and
// writes progress and the report back into it.
//
//   runs/<id>   RunRecord (JSON)
//
// Ids sort by the time they were asked for (a UTC timestamp, then random hex), so the oldest
// pending run is the first key.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { KeyValue, Store } from "../../adapters/store/store.ts";

export const gcPrefix = "/platform/registry/gc/";

export const gcKeys = {
  touches: `${gcPrefix}touch/`,
  touch: (digest: string) => `${gcPrefix}touch/${digest}`,
  tagTouches: `${gcPrefix}tag-touch/`,
  tagTouch: (repository: string, tag: string) => `${gcPrefix}tag-touch/${repository}/${tag}`,
  dirty: `${gcPrefix}dirty/`,
  dirtyOf: (repository: string) => `${gcPrefix}dirty/${repository}`,
  marks: `${gcPrefix}marks/`,
  markOf: (repository: string) => `${gcPrefix}marks/${repository}`,
  pending: `${gcPrefix}pending/`,
  pendingOf: (digest: string) => `${gcPrefix}pending/${digest}`,
  runs: `${gcPrefix}runs/`,
  run: (id: string) => `${gcPrefix}runs/${id}`,
  policies: `${gcPrefix}policies/`,
  /** Whether the marks cover every repository (a full run wrote them); absent on a fresh store. */
  marksComplete: `${gcPrefix}marks-complete`,
} as const;

/** How long one touch write counts for: a process skips re-touching a digest within this time. */
export const touchResolutionMs = 2_000;

export interface TouchRecord {
  at: number;
  /** The repository that links the blob because of this touch (an upload, a mount): the collector unlinks it there too. */
  repository?: string;
}

export interface TagTouchRecord {
  at: number;
  digest: string;
  /**
   * false from the manifest PUT's first write (before the tag), true from its last (after the
   * tag): a tag touch not done means a push in flight, or one that died after it began, and the
   * collector always reads such a tag again.
   */
  done: boolean;
}

/** A tag touch not done is kept at least this long (no manifest PUT takes longer). */
export const unfinishedTagTouchMs = 10 * 60_000;

// ---- runs

export const RunOptions = z.strictObject({
  dryRun: z.boolean().default(false),
  /** "full" reads every repository and lists every blob; "incremental" only what changed. */
  mode: z.enum(["full", "incremental"]).default("incremental"),
  deleteUntagged: z.boolean().default(false),
  /** Unreferenced blobs touched or written more recently than this are kept (seconds). */
  graceSeconds: z.number().int().min(0).max(365 * 86400).default(3600),
  /** Untagged manifests are deleted once untagged this long (seconds; default graceSeconds). */
  untaggedGraceSeconds: z.number().int().min(0).max(365 * 86400).optional(),
  /** The policy whose retention rules the run applies (and whose interval asked for it). */
  policy: z.string().min(1).max(63).optional(),
});
export type RunOptions = z.output<typeof RunOptions>;

export type RunState = "pending" | "running" | "done" | "failed";

export interface RunProgress {
  phase: string;
  done: number;
  total: number;
  at: string;
}

export interface RunRecord {
  id: string;
  options: RunOptions;
  requestedAt: string;
  /** Who asked: a user name, "cli" or "policy <name>". */
  requestedBy: string;
  state: RunState;
  startedAt?: string;
  finishedAt?: string;
  /** The registry process that ran it (its leader identity). */
  runner?: string;
  progress?: RunProgress;
  report?: unknown;
  error?: string;
}

/** Runs kept in the store: older finished ones are deleted by the controller. */
export const keptRuns = 50;

export function newRunId(now = new Date()): string {
  return `${now.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z")}-${randomBytes(4).toString("hex")}`;
}

export const runIdPattern = /^\d{8}T\d{6}Z-[0-9a-f]{8}$/;

export async function createRun(store: Store, options: RunOptions, requestedBy: string, now = new Date()): Promise<RunRecord> {
  const record: RunRecord = { id: newRunId(now), options, requestedAt: now.toISOString(), requestedBy, state: "pending" };
  await store.put(gcKeys.run(record.id), JSON.stringify(record), { expect: [{ key: gcKeys.run(record.id), target: "createRevision", equals: 0 }] });
  return record;
}

export function decodeRun(kv: Pick<KeyValue, "value">): RunRecord {
  const r = JSON.parse(kv.value) as RunRecord;
  if (typeof r !== "object" || r === null || typeof r.id !== "string" || typeof r.state !== "string") throw new Error("not a run record");
  return r;
}
