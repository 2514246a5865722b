// An in-memory tar archive for Cluster.putArchive: regular files with absolute paths, extracted at
// "/" so that one upload can place files anywhere in the container.
//
// Why no directory entries: the engine creates a missing parent directory itself (root, 0755), and
// it applies a directory entry's mode and owner to a directory that already exists. A "/tmp" or
// "/etc" entry would chmod and chown the container's own directory; leaving them out means only
// the files we name are ever touched.
import { posix } from "node:path";
import { pack, type Pack } from "tar-stream";

export interface ArchiveFile {
  /** Absolute, normalised path inside the container ("/platform/app/config.yaml"). */
  path: string;
  content: string | Buffer;
  /** Permission bits, e.g. 0o400. */
  mode: number;
  uid: number;
  gid: number;
}

export class ArchiveInputError extends TypeError {
  override readonly name = "ArchiveInputError";
}

/** The files as one ustar/pax archive, entry names relative to "/" (upload it at "/"). */
export async function buildTar(files: readonly ArchiveFile[], mtime: Date = new Date()): Promise<Buffer> {
  const seen = new Set<string>();
  for (const f of files) {
    checkFile(f);
    if (seen.has(f.path)) throw new ArchiveInputError(`archive: ${f.path} is listed twice`);
    seen.add(f.path);
  }
  const p = pack();
  const done = packedBytes(p);
  for (const f of files) {
    const body = typeof f.content === "string" ? Buffer.from(f.content, "utf8") : f.content;
    await new Promise<void>((resolve, reject) => {
      p.entry({ name: f.path.slice(1), type: "file", mode: f.mode, uid: f.uid, gid: f.gid, uname: "", gname: "", mtime, size: body.length }, body, (err) =>
        err ? reject(err) : resolve(),
      );
    });
  }
  p.finalize();
  return done;
}

/** The whole archive a pack stream makes, once it is finalized (attach before writing entries). */
export async function packedBytes(p: Pack): Promise<Buffer> {
  return Buffer.concat(await packedChunks(p));
}

/**
 * The same archive as the chunks the pack stream emitted, not joined: a large archive is not held
 * a second time in one Buffer (a file's chunk is the very buffer that was read).
 */
export function packedChunks(p: Pack): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  return new Promise<Buffer[]>((resolve, reject) => {
    p.on("data", (c: unknown) => chunks.push(c as Buffer)); // a pack stream emits Buffers
    p.on("end", () => resolve(chunks));
    p.on("error", reject);
  });
}

function checkFile(f: ArchiveFile): void {
  if (!f.path.startsWith("/") || f.path === "/" || f.path.endsWith("/") || f.path.includes("\0") || posix.normalize(f.path) !== f.path) {
    throw new ArchiveInputError(`archive: path must be an absolute, normalised file path (got ${JSON.stringify(f.path)})`);
  }
  if (!Number.isInteger(f.mode) || f.mode < 0 || f.mode > 0o7777) throw new ArchiveInputError(`archive: ${f.path}: mode must be 0..0o7777`);
  for (const [k, v] of [["uid", f.uid], ["gid", f.gid]] as const) {
    if (!Number.isInteger(v) || v < 0) throw new ArchiveInputError(`archive: ${f.path}: ${k} must be a non-negative integer`);
  }
}
