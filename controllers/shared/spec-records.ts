// Decoding a controller's spec records from the store. Never throws: a spec that cannot be read is
// kept as `invalid` with the reason, because a spec that looked deleted would make the controller
// remove everything it runs. Pure.
import type { z } from "zod";

export interface KeyValueRecord {
  key: string;
  value: string;
  modRevision: number;
}

export interface SpecRecord<T> {
  /** The last segment of the key. */
  name: string;
  spec: T | undefined;
  /** Why the stored value could not be read (then spec is undefined). */
  invalid?: string;
  modRevision: number;
}

export function lastSegment(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1);
}

/** The record at `kv` read with `schema`, whose `name` must be the key's last segment. */
export function decodeSpecRecord<T extends { name: string }>(kv: KeyValueRecord, schema: z.ZodType<T>): SpecRecord<T> {
  const name = lastSegment(kv.key);
  const invalid = (reason: string): SpecRecord<T> => ({ name, spec: undefined, invalid: reason, modRevision: kv.modRevision });
  let json: unknown;
  try {
    json = JSON.parse(kv.value);
  } catch (e) {
    return invalid(`not JSON: ${(e as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return invalid(`${issue?.path.join(".") || "value"}: ${issue?.message}`);
  }
  if (parsed.data.name !== name) return invalid(`stored name ${parsed.data.name} differs from its key`);
  return { name, spec: parsed.data, modRevision: kv.modRevision };
}
