// GET /v2/_catalog (docs/registry.md, "Listing"): every repository, found as distribution finds
// them, by walking repositories/ for directories that hold `_manifests` (names nest: a/b/c). Only
// valid name components are descended into, never `_layers`, `_uploads` and the like.
//
// The walk reads the whole tree below repositories/ except the subtrees that sort entirely before
// `last`; fine for thousands of repositories, and what distribution does too.
import { PathNotFoundError, type StorageDriver } from "../../adapters/blobstore/driver.ts";
import { byCodeUnit } from "./links.ts";
import { paginate, type Page, type PageRequest } from "./pagination.ts";
import { repositoriesRoot } from "./paths.ts";
import { mapLimit } from "../../runtime/map-limit.ts";

/** distribution's catalog defaults: 100 entries a page unless n says otherwise, at most 1000. */
export const catalogDefaultEntries = 100;
export const catalogMaxEntries = 1000;

const componentRe = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/;

export async function listCatalog(driver: StorageDriver, req: PageRequest): Promise<Page> {
  const names: string[] = [];
  await walk(driver, repositoriesRoot, "", req.last, names);
  return paginate(names.sort(byCodeUnit), req, "/v2/_catalog");
}

/**
 * Every repository name, in no particular order: the same walk, with the subtrees read in parallel
 * (garbage collection's full mark reads all of them). Garbage collection also counts a directory
 * with only blob links (`_layers`: uploads never referenced by a manifest) as a repository, so it
 * can remove the links of the blobs it deletes.
 */
export async function listRepositories(driver: StorageDriver, concurrency = 16): Promise<string[]> {
  const out: string[] = [];
  let level: { dir: string; name: string }[] = [{ dir: repositoriesRoot, name: "" }];
  while (level.length > 0) {
    const lists = await mapLimit(level, concurrency, async ({ dir }) => {
      try {
        return (await driver.list(dir)).map((p) => p.slice(p.lastIndexOf("/") + 1));
      } catch (err) {
        if (err instanceof PathNotFoundError) return [];
        throw err;
      }
    });
    const next: { dir: string; name: string }[] = [];
    level.forEach(({ dir, name }, i) => {
      const children = lists[i]!;
      if (name !== "" && (children.includes("_manifests") || children.includes("_layers"))) out.push(name);
      for (const child of children) if (componentRe.test(child)) next.push({ dir: `${dir}/${child}`, name: name === "" ? child : `${name}/${child}` });
    });
    level = next;
  }
  return out;
}

async function walk(driver: StorageDriver, dir: string, prefix: string, last: string | undefined, out: string[]): Promise<void> {
  let children: string[];
  try {
    children = (await driver.list(dir)).map((p) => p.slice(p.lastIndexOf("/") + 1));
  } catch (err) {
    if (err instanceof PathNotFoundError) return;
    throw err;
  }
  if (prefix !== "" && children.includes("_manifests")) out.push(prefix);
  for (const child of children.sort(byCodeUnit)) {
    if (!componentRe.test(child)) continue;
    const name = prefix === "" ? child : `${prefix}/${child}`;
    // Every name below `name` sorts before `${name}0` ('/' < '0'): skip what lies wholly before `last`.
    if (last !== undefined && `${name}0` <= last) continue;
    await walk(driver, `${dir}/${child}`, name, last, out);
  }
}
