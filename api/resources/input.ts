// Input normalisation shared by every resource schema.
//
// Keys are matched case-insensitively (docs/orchestrator.md, "The PodGroup body"), so bodies written for the original
// system (`NumInstances`, `RestartPolicy`) parse too: before validation every object's keys are
// renamed to the schema's canonical camelCase spelling. A key that matches nothing is left as is,
// and the strict schema then rejects it by name. Two keys that fold to the same name (`name` and
// `Name`) are an error, since either choice would silently drop one of them.
import { z } from "zod";

/** What canonicalise needs to know of a schema, worked out once per schema (not per request). */
type Plan =
  | { kind: "array"; element: z.ZodType }
  | { kind: "object"; fields: Record<string, z.ZodType>; byFolded: Map<string, string> }
  | { kind: "leaf" };

const plans = new WeakMap<z.ZodType, Plan>();

function planOf(shape: z.ZodType): Plan {
  let plan = plans.get(shape);
  if (plan === undefined) {
    const inner = unwrap(shape);
    if (inner instanceof z.ZodArray) {
      plan = { kind: "array", element: inner.element as z.ZodType };
    } else if (inner instanceof z.ZodObject) {
      const fields = inner.shape as Record<string, z.ZodType>;
      plan = { kind: "object", fields, byFolded: new Map(Object.keys(fields).map((k) => [k.toLowerCase(), k])) };
    } else {
      plan = { kind: "leaf" };
    }
    plans.set(shape, plan);
  }
  return plan;
}

/** Rename `value`'s keys to the canonical spellings in `canonical`, recursively by shape. */
function canonicalise(value: unknown, shape: z.ZodType, path: (string | number)[], ctx: z.RefinementCtx): unknown {
  const plan = planOf(shape);
  if (plan.kind === "array" && Array.isArray(value)) {
    return planOf(plan.element).kind === "leaf" ? value : value.map((v, i) => canonicalise(v, plan.element, [...path, i], ctx));
  }
  if (plan.kind !== "object" || value === null || typeof value !== "object" || Array.isArray(value)) {
    return value;
  }
  const { fields, byFolded } = plan;
  const out: Record<string, unknown> = {};
  const seen = new Map<string, string>();
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const canonical = byFolded.get(key.toLowerCase()) ?? key;
    const earlier = seen.get(canonical);
    if (earlier !== undefined) {
      ctx.addIssue({ code: "custom", path: [...path, key], message: `"${key}" repeats "${earlier}" (keys are case-insensitive)` });
      continue;
    }
    seen.set(canonical, key);
    const field = fields[canonical];
    out[canonical] = field && planOf(field).kind !== "leaf" ? canonicalise(v, field, [...path, canonical], ctx) : v;
  }
  return out;
}

function unwrap(t: z.ZodType): z.ZodType {
  let cur: z.ZodType = t;
  for (;;) {
    if (cur instanceof z.ZodOptional || cur instanceof z.ZodNullable || cur instanceof z.ZodDefault) {
      cur = cur.unwrap() as z.ZodType;
    } else if (cur instanceof z.ZodPipe) {
      cur = cur.in as z.ZodType;
    } else {
      return cur;
    }
  }
}

/** `schema`, accepting keys in any letter case. */
export function caseInsensitive<T extends z.ZodType>(schema: T) {
  return z.any().transform((v, ctx) => canonicalise(v, schema, [], ctx)).pipe(schema);
}

/** A string enum that also accepts the original system's integers for the same values. */
export function enumWithCodes<const V extends readonly [string, ...string[]]>(values: V, codes: Record<number, V[number]>) {
  const allowed = `${values.join(", ")} (or ${Object.keys(codes).join(", ")})`;
  const names = z.enum(values, { error: `must be one of ${allowed}` });
  return z.union([names, z.number().int()], { error: `must be one of ${allowed}` }).transform((v, ctx) => {
    if (typeof v === "string") return v;
    const mapped = codes[v];
    if (mapped === undefined) {
      ctx.addIssue({ code: "custom", message: `unknown code ${v}; use one of ${values.join(", ")}` });
      return z.NEVER;
    }
    return mapped;
  });
}
