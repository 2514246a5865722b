// Garbage collection runs as records in the store (docs/registry-gc.md, "Runs"): whoever asks for
// a run (the HTTP endpoint, `capstan registry gc`, `capstan registry garbage-collect`, a policy's
// interval) writes a pending record; the Registry-GC controller of the leading registry carries it
// out and writes progress and the report back into it.
//
//   /platform/registry/gc/runs/<id>   RunRecord (JSON)
//
// Ids sort by the time they were asked for (a UTC timestamp, then random hex), so the oldest
// pending run is the first key.
import { listAll } from "../../adapters/store/list-all.ts";
import type { Store } from "../../adapters/store/store.ts";
import { decodeRun, gcKeys, runIdPattern, type RunRecord } from "../resources/registry-gc.ts";

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
