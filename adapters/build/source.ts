// The source directory of a build as one tar archive (extracted at the app directory) and its
// content digest, which keys the build cache (docs/build.md, "The cache"). Read in one walk.
//
// What counts: every regular file, directory and symbolic link below the directory, by relative
// path, permission bits and content (a link by its target); `.git` is left out (its files change
// on every git command without the tree changing). Times and owners do not count: entries are
// written with mtime 0 and owner root, so the same tree gives the same archive.
import { createHash } from "node:crypto";
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";
import { pack } from "tar-stream";
import { packedBytes } from "../cluster/archive.ts";

export interface SourceArchive {
  tar: Buffer;
  /** sha256 hex over the entries (path, type, mode, content). */
  digest: string;
  files: number;
  bytes: number;
}

interface Entry {
  rel: string;
  type: "file" | "directory" | "symlink";
  mode: number;
  content?: Buffer;
  target?: string;
}

const skipped = new Set([".git"]);

async function walk(root: string, rel: string, out: Entry[]): Promise<void> {
  const names = (await readdir(join(root, rel))).filter((n) => !(rel === "" && skipped.has(n))).sort();
  for (const name of names) {
    const r = rel === "" ? name : `${rel}/${name}`;
    const path = join(root, r);
    const st = await lstat(path);
    const mode = st.mode & 0o7777;
    if (st.isDirectory()) {
      out.push({ rel: r, type: "directory", mode });
      await walk(root, r, out);
    } else if (st.isSymbolicLink()) out.push({ rel: r, type: "symlink", mode, target: await readlink(path) });
    else if (st.isFile()) out.push({ rel: r, type: "file", mode, content: await readFile(path) });
    // Sockets, fifos and devices are not source: left out.
  }
}

/**
 * Archive `dir` with entry names `<prefix>/<relative path>` (for an upload at "/": the engine makes
 * the missing parents) and digest its content (the prefix is not in the digest).
 */
export async function archiveSource(dir: string, prefix: string): Promise<SourceArchive> {
  const entries: Entry[] = [];
  await walk(dir, "", entries);
  const h = createHash("sha256");
  const p = pack();
  const done = packedBytes(p);
  let bytes = 0;
  const mtime = new Date(0);
  for (const e of entries) {
    h.update(`${e.type} ${e.mode.toString(8)} ${Buffer.byteLength(e.rel)}:${e.rel}\n`);
    const header = { name: `${prefix}/${e.rel}`, mode: e.mode, uid: 0, gid: 0, uname: "", gname: "", mtime };
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (e.type === "file") {
        h.update(`${e.content!.length}:`).update(e.content!);
        bytes += e.content!.length;
        p.entry({ ...header, type: "file", size: e.content!.length }, e.content!, cb);
      } else if (e.type === "symlink") {
        h.update(`${e.target}\n`);
        p.entry({ ...header, type: "symlink", linkname: e.target }, cb);
      } else p.entry({ ...header, type: "directory" }, cb);
    });
  }
  p.finalize();
  return { tar: await done, digest: h.digest("hex"), files: entries.filter((e) => e.type === "file").length, bytes };
}
