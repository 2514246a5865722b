// `?n=&last=` pagination of the catalog and of tag lists, as distribution does it (docs/registry.md,
// "Listing"): results sorted in Go's sort.Strings order, the page starts strictly after `last`, and a
// `Link: <...>; rel="next"` header is sent only when more entries remain. `n` must be a decimal
// integer from 0 to the endpoint's maximum, else 400 PAGINATION_NUMBER_INVALID; n=0 answers an
// empty list without a Link.
import { registryError } from "./errors.ts";

export interface PageRequest {
  /** Entries wanted; undefined for "all" (tags without n). */
  n: number | undefined;
  last: string | undefined;
}

/** Parse `n` and `last`; `defaultN` applies when n is absent, `max` is the largest n accepted. */
export function parsePage(query: (key: string) => string | undefined, defaultN: number | undefined, max: number): PageRequest {
  const rawN = query("n");
  const last = query("last") || undefined;
  if (rawN === undefined || rawN === "") return { n: defaultN, last };
  if (!/^\d{1,15}$/.test(rawN) || Number(rawN) > max) {
    throw registryError("PAGINATION_NUMBER_INVALID", { n: rawN, max }, `invalid number of results requested: n must be an integer from 0 to ${max}`);
  }
  return { n: Number(rawN), last };
}

export interface Page {
  entries: string[];
  /** The `Link` header value when more entries follow. */
  link: string | undefined;
}

/** One page of `sorted` for `req`; `path` is the endpoint's path (the Link is path-relative). */
export function paginate(sorted: readonly string[], req: PageRequest, path: string): Page {
  const from = req.last === undefined ? sorted : sorted.filter((s) => s > req.last!);
  if (req.n === undefined) return { entries: [...from], link: undefined };
  const entries = from.slice(0, req.n);
  const more = req.n > 0 && from.length > entries.length;
  const link = more ? `<${path}?${new URLSearchParams({ last: entries[entries.length - 1]!, n: String(req.n) }).toString()}>; rel="next"` : undefined;
  return { entries, link };
}
