// Which registry images the platform's workloads use (docs/registry-gc.md, "In-use
// protection"): the images of every PodGroup spec (/platform/orchestrator/podgroups/<name>,
// pod.containers[].image) and every Dependency spec (/platform/orchestrator/depends/<name>,
// containers[].image), read from the store at one revision. Groups and dependencies being deleted
// count too: their containers run until the controller has removed them.
//
// An image reference is matched by repository path and tag or digest, IGNORING the registry host:
// `127.0.0.1:5000/shop/web:1.2`, `registry.example:5000/shop/web:1.2` and `shop/web:1.2` all keep
// tag 1.2 of repository shop/web. The platform registry is reached under several names (loopback,
// a DNS name, an IP), and treating the same path under another host as in use only ever keeps more.
// For the same reason a Docker Hub reference keeps both spellings of an official image (`nginx`
// keeps `nginx` and `library/nginx`), and a reference with both a tag and a digest keeps both.
//
// A record whose images cannot be read (not JSON, no container list, a container without an image)
// makes EVERY image count as in use, named after that record, until it is fixed: the controllers
// keep running what such a record deployed (a spec that cannot be read must not look deleted,
// docs/podgroup-controller.md), so any image may be in use, and keeping tags a while longer is the
// cheap mistake where deleting a running image is not (its restarts and drift moves could not
// pull). The records are listed in `unreadable` for the collector to report. An image reference
// that does not parse is skipped (listed in `unparsable`): no engine can pull it either.
import { listAll } from "../../adapters/store/list-all.ts";
import type { Store } from "../../adapters/store/store.ts";
import { dependencyLayout } from "../../api/resources/dependency.ts";
import { orchestratorPrefix } from "../../api/resources/keys.ts";
import { isRepositoryName, isTag } from "../../api/resources/registry-names.ts";

/** An image reference taken apart: `[host/]repository[:tag][@digest]`. */
export interface ImageReference {
  /** The registry host (with port), when the reference names one; lower case. */
  host?: string;
  repository: string;
  /** The tag; "latest" when the reference names neither a tag nor a digest. */
  tag?: string;
  digest?: string;
}

/** The OCI grammar of any digest (`algorithm ":" encoded`); engines accept more algorithms than this registry serves. */
const digestPattern = /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;

/**
 * Parse an image reference as the engine reads it: the first path segment is a registry host when
 * it contains "." or ":" or is "localhost" (and another segment follows); then the repository
 * path, a tag after the last ":", a digest after "@". Undefined when it is no valid reference.
 */
export function parseImageReference(image: string): ImageReference | undefined {
  let rest = image;
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!digestPattern.test(digest)) return undefined;
  }
  let host: string | undefined;
  const slash = rest.indexOf("/");
  if (slash >= 0) {
    const first = rest.slice(0, slash);
    if (first.includes(".") || first.includes(":") || first === "localhost") {
      host = first.toLowerCase();
      rest = rest.slice(slash + 1);
    }
  }
  // With the host gone, a ":" can only start the tag.
  let tag: string | undefined;
  const colon = rest.lastIndexOf(":");
  if (colon >= 0) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!isTag(tag)) return undefined;
  }
  if (!isRepositoryName(rest)) return undefined;
  if (tag === undefined && digest === undefined) tag = "latest";
  return { ...(host !== undefined && { host }), repository: rest, ...(tag !== undefined && { tag }), ...(digest !== undefined && { digest }) };
}

const dockerHubHosts = new Set(["docker.io", "index.docker.io", "registry-1.docker.io"]);

/** The repository names a reference may stand for: Docker Hub's official images have two spellings. */
function repositoryNames(ref: ImageReference): string[] {
  if (ref.host !== undefined && !dockerHubHosts.has(ref.host)) return [ref.repository];
  if (!ref.repository.includes("/")) return [ref.repository, `library/${ref.repository}`];
  const official = /^library\/([^/]+)$/.exec(ref.repository);
  return official ? [ref.repository, official[1]!] : [ref.repository];
}

/** One workload and the image references of its containers, as read from its record. */
export interface ImageUser {
  /** Who uses the images, as usedBy names it: "podgroup shop.web.web", "dependency redis". */
  user: string;
  images: string[];
}

/** A spec record whose images could not (all) be read. */
export interface UnreadableRecord {
  key: string;
  /** As usedBy names it: "podgroup shop.web.web". */
  user: string;
  reason: string;
}

/** Per repository: the first user of each tag and each digest. */
interface RepositoryUses {
  tags: Map<string, string>;
  digests: Map<string, string>;
}

export class InUse {
  private readonly byRepository = new Map<string, RepositoryUses>();
  /** References that are no valid image reference, with their user; skipped. */
  readonly unparsable: { user: string; image: string }[] = [];
  /** The first unreadable record, as usedBy names it: while there is one, every image is in use. */
  private readonly blocker: string | undefined;

  private constructor(
    users: readonly ImageUser[],
    /** Store keys of records whose images could not be read (every image counts as in use while there are any). */
    readonly unreadable: readonly UnreadableRecord[],
    /** The store revision the records were read at (0 when not read from a store). */
    readonly revision: number,
  ) {
    const first = unreadable[0];
    this.blocker = first === undefined ? undefined : `${first.user} (unreadable record: its images are unknown, so any image may be in use)`;
    for (const { user, images } of users) {
      for (const image of images) {
        const ref = parseImageReference(image);
        if (ref === undefined) {
          this.unparsable.push({ user, image });
          continue;
        }
        for (const repository of repositoryNames(ref)) {
          let uses = this.byRepository.get(repository);
          if (uses === undefined) this.byRepository.set(repository, (uses = { tags: new Map(), digests: new Map() }));
          if (ref.tag !== undefined && !uses.tags.has(ref.tag)) uses.tags.set(ref.tag, user);
          if (ref.digest !== undefined && !uses.digests.has(ref.digest)) uses.digests.set(ref.digest, user);
        }
      }
    }
  }

  /** In-use information from a list of users (tests, and callers that read the records themselves). */
  static of(users: readonly ImageUser[], unreadable: readonly UnreadableRecord[] = []): InUse {
    return new InUse(users, unreadable, 0);
  }

  /**
   * Read every PodGroup and Dependency spec under `root` (default /platform/orchestrator/), page
   * by page, both prefixes at the revision of the first page, so the two lists are one snapshot.
   */
  static async read(store: Store, root: string = orchestratorPrefix): Promise<InUse> {
    const layout = dependencyLayout(root);
    const groups = await listAll(store, layout.podGroups);
    const depends = await listAll(store, layout.depends, groups.revision);
    const users: ImageUser[] = [];
    const unreadable: UnreadableRecord[] = [];
    const collect = (kind: "podgroup" | "dependency", prefix: string, items: readonly { key: string; value: string }[]) => {
      for (const kv of items) {
        const user = `${kind} ${kv.key.slice(prefix.length)}`;
        const read = imagesOfRecord(kv.value, kind === "podgroup" ? ["pod", "containers"] : ["containers"]);
        users.push({ user, images: read.images });
        if (read.problem !== undefined) unreadable.push({ key: kv.key, user, reason: read.problem });
      }
    };
    collect("podgroup", layout.podGroups, groups.items);
    collect("dependency", layout.depends, depends.items);
    return new InUse(users, unreadable, groups.revision ?? 0);
  }

  /**
   * The first workload that uses `repository` at `tag` or at `digest` ("podgroup shop.web.web"),
   * or undefined. `tag` "" asks about the digest alone (an untagged manifest), `digest` "" about
   * the tag alone. While any record is unreadable, every image is in use (the answer names it).
   */
  usedBy(repository: string, tag: string, digest: string): string | undefined {
    if (this.blocker !== undefined) return this.blocker;
    const uses = this.byRepository.get(repository);
    if (uses === undefined) return undefined;
    return (tag !== "" ? uses.tags.get(tag) : undefined) ?? (digest !== "" ? uses.digests.get(digest) : undefined);
  }
}

/**
 * The image strings of one stored spec, found at `path` (an array of containers), leniently: the
 * records are the API's and already validated, so this reads only what it needs. `problem` says
 * why not every container's image could be read (the images that could are still answered).
 */
function imagesOfRecord(value: string, path: readonly string[]): { images: string[]; problem?: string } {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch (e) {
    return { images: [], problem: `not JSON: ${(e as Error).message}` };
  }
  let node: unknown = json;
  for (const field of path) {
    node = node !== null && typeof node === "object" && !Array.isArray(node) ? (node as Record<string, unknown>)[field] : undefined;
  }
  if (!Array.isArray(node)) return { images: [], problem: `${path.join(".")}: not a list of containers` };
  const images: string[] = [];
  let problem: string | undefined;
  node.forEach((container: unknown, i) => {
    const image = container !== null && typeof container === "object" ? (container as Record<string, unknown>).image : undefined;
    if (typeof image === "string" && image !== "") images.push(image);
    else problem ??= `${path.join(".")}[${i}].image: not an image reference`;
  });
  return { images, ...(problem !== undefined && { problem }) };
}
