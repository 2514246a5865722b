// Garbage collection runs as records in the store (docs/registry-gc.md, "Runs"): whoever asks for
// a run (the HTTP endpoint, `capstan registry gc`, `capstan registry garbage-collect`, a policy's
// interval) writes a pending record; the Registry-GC controller of the leading registry carries it
// out and writes progress and the report back into it.
//
//   /platform/registry/gc/runs/<id>   RunRecord (JSON)
//
// Ids sort by the time they were asked for (a UTC timestamp, then random hex), so the oldest
// pending run is the first key.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { listAll } from "../../adapters/store/list-all.ts";
import type { KeyValue, Store } from "../../adapters/store/store.ts";
import { gcKeys } from "./gc-journal.ts";

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

export async function getRun(store: Store, id: string): Promise<RunRecord | undefined> {
  if (!runIdPattern.test(id)) return undefined;
  const kv = await store.get(gcKeys.run(id));
  return kv === null ? undefined : decodeRun(kv);
}

/** Every run, oldest first (unreadable records left out). */
export async function listRuns(store: Store): Promise<RunRecord[]> {
  const out: RunRecord[] = [];
  for (const kv of (await listAll(store, gcKeys.runs)).items) {
    try {
      out.push(decodeRun(kv));
    } catch {
      // skipped
    }
  }
  return out;
}
