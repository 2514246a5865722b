// GET /v2/<name>/tags/list (docs/registry.md, "Listing"): the tag names of a repository, paginated.
// A repository without a tags directory is unknown (404 NAME_UNKNOWN), as in distribution; one whose
// tags were all deleted answers an empty list.
import { registryError } from "./errors.ts";
import type { Links } from "../resources/registry-storage.ts";
import { isTag } from "../resources/registry-names.ts";
import { paginate, type Page, type PageRequest } from "./pagination.ts";

/** Largest `n` accepted on a tags list (larger is 400 PAGINATION_NUMBER_INVALID). */
export const maxTagsPerPage = 10_000;

export async function listTags(links: Links, name: string, req: PageRequest): Promise<Page> {
  const tags = await links.listTags(name);
  if (tags === undefined) throw registryError("NAME_UNKNOWN", { name });
  return paginate(tags.filter(isTag), req, `/v2/${name}/tags/list`);
}
