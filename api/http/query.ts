// Query parameters, validated by a zod object schema whose fields each read one parameter as a
// string (or undefined when absent). A problem is a 400 naming the parameter. Parameters the schema
// does not name are ignored, as HTTP APIs customarily do (cache busters, tracing tags); a parameter
// given twice is refused, since picking one of the values would be a guess.
import type { Context } from "hono";
import { z } from "zod";
import { badRequest } from "./errors.ts";
import { parseWith } from "./validation.ts";

export function parseQuery<S extends z.ZodObject>(c: Context, schema: S): z.output<S> {
  const all = c.req.queries();
  const values: Record<string, string> = {};
  for (const field of Object.keys(schema.shape)) {
    const given = all[field];
    if (given === undefined) continue;
    if (given.length > 1) {
      throw badRequest(`query parameter ${field} is given ${given.length} times; give it once`, [
        { path: field, message: "given more than once" },
      ]);
    }
    values[field] = given[0] ?? "";
  }
  return parseWith(schema, values, "query parameters", "query");
}

/** `true` or `false` (any letter case). */
export const queryBoolean = z
  .string()
  .regex(/^(true|false)$/i, "must be true or false")
  .transform((v) => v.toLowerCase() === "true");

/** A non-negative decimal integer up to `max`. */
export function queryCount(max: number) {
  return z
    .string()
    .regex(/^\d{1,15}$/, "must be a non-negative integer")
    .transform(Number)
    .pipe(z.number().max(max, `must be at most ${max}`));
}
