// Docker named volumes for the volumes a ContainerSpec declares. A volume belongs to its owner
// (a PodGroup instance's container, a dependency pod's container), so a replacement of the same
// owner finds its data again; volumes are per engine, so per node. Pure.
//     "/data"          -> <owner>.data-<hash6>:/data     (the path slugged, plus a hash: unique)
//     "cache:/var/c"   -> <owner>.cache:/var/c
// An optional :ro or :rw suffix is kept.
import { createHash } from "node:crypto";

const namedVolume = /^([a-zA-Z0-9][a-zA-Z0-9_.-]*):(\/[^:]*)(?::(ro|rw))?$/;
const pathVolume = /^(\/[^:]*)(?::(ro|rw))?$/;

/** The bind entry of `volume` for `owner`; a TypeError for a volume of neither form. */
export function volumeBind(owner: string, volume: string): string {
  const named = namedVolume.exec(volume);
  if (named) return `${owner}.${named[1]}:${named[2]}${named[3] ? `:${named[3]}` : ""}`;
  const path = pathVolume.exec(volume);
  if (!path) throw new TypeError(`volume ${JSON.stringify(volume)} is neither /path nor name:/path`);
  const p = path[1]!;
  const slug = p.replace(/^\/+/, "").replace(/[^a-zA-Z0-9_.-]+/g, "_").slice(0, 40) || "root";
  const hash = createHash("sha256").update(p).digest("hex").slice(0, 6);
  return `${owner}.${slug}-${hash}:${p}${path[2] ? `:${path[2]}` : ""}`;
}
