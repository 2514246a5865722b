// GET /v2/_catalog (docs/registry.md, "Listing"): every repository, found as distribution finds
// them, by walking repositories/ for directories that hold `_manifests` (names nest: a/b/c). Only
// valid name components are descended into, never `_layers`, `_uploads` and the like.
//
// The walk reads the whole tree below repositories/ except the subtrees that sort entirely before
// `last`; fine for thousands of repositories, and what distribution does too.
import { PathNotFoundError, type StorageDriver } from "../../adapters/blobstore/driver.ts";
import { byCodeUnit, componentRe } from "../resources/registry-storage.ts";
import { paginate, type Page, type PageRequest } from "./pagination.ts";
import { repositoriesRoot } from "../resources/registry-paths.ts";

/** distribution's catalog defaults: 100 entries a page unless n says otherwise, at most 1000. */
export const catalogDefaultEntries = 100;
export const catalogMaxEntries = 1000;

export async function listCatalog(driver: StorageDriver, req: PageRequest): Promise<Page> {
  const names: string[] = [];
  await walk(driver, repositoriesRoot, "", req.last, names);
  return paginate(names.sort(byCodeUnit), req, "/v2/_catalog");
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
