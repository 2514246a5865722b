// The source directory of a build as one tar archive (extracted at the app directory) and its
// content digest, which keys the build cache (docs/build.md, "The cache"). Read in one walk.
//
// What counts: every regular file, directory and symbolic link below the directory that is sent
// to the build, by relative path, permission bits and content (a link by its target). Not sent,
// and so not in the digest: `.git` (its files change on every git command without the tree
// changing) and what `.capstanignore`, else `.dockerignore`, excludes (Docker's syntax and
// matching: an experienced Docker user's file works as it does for `docker build`). The digest is
// over exactly the entries of the archive, so an excluded file never rebuilds and a sent one
// always does. Times and owners do not count: entries are written with mtime 0 and owner root, so
// the same tree gives the same archive.
import { createHash } from "node:crypto";
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join, posix } from "node:path";
import { pack } from "tar-stream";
import { packedChunks } from "../cluster/archive.ts";
import { BuildError } from "./plan.ts";

export interface SourceArchive {
  /**
   * The archive as the pack stream made it, not concatenated: a file's bytes are held once (the
   * chunk is the buffer read), not a second time in one big Buffer.
   */
  tar: Buffer[];
  /** sha256 hex over the entries (path, type, mode, content). */
  digest: string;
  files: number;
  bytes: number;
  /** The relative paths sent (every entry). */
  sent: string[];
  /** The ignore file used, if any. */
  ignoreFile?: string;
}

interface Entry {
  rel: string;
  type: "file" | "directory" | "symlink";
  mode: number;
}

/** One line of an ignore file: a Docker pattern as a regular expression; `exception` for `!PATTERN`. */
export interface IgnoreRule {
  pattern: string;
  exception: boolean;
  regexp: RegExp;
}

/** Tried in this order; the first that exists is the only one read. */
export const ignoreFiles = [".capstanignore", ".dockerignore"] as const;

/** posix Clean as Go's filepath.Clean does it (no trailing "/", "" is "."). */
const clean = (p: string) => posix.normalize(p).replace(/(.)\/+$/, "$1") || ".";

/**
 * A pattern as Docker compiles it: `*` any run of non-"/", `?` one non-"/", `**` any number of
 * directories (`**` at the end: anything), `[...]` a class, `\` escapes the next character;
 * anchored at the source root (unlike .gitignore, `foo` is only `./foo`).
 */
function compile(pattern: string): RegExp {
  let re = "^";
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === "*") {
      if (pattern[i + 1] === "*") {
        i++;
        if (pattern[i + 1] === "/") i++;
        re += i + 1 === pattern.length ? ".*" : "(.*/)?";
      } else re += "[^/]*";
    } else if (ch === "?") re += "[^/]";
    else if (".+()|{}$^".includes(ch)) re += `\\${ch}`;
    else if (ch === "\\") {
      if (i + 1 < pattern.length) re += `\\${pattern[++i]}`;
      else re += "\\\\";
    } else re += ch;
  }
  return new RegExp(`${re}$`);
}

/** The rules of an ignore file (`file` names it in errors), as Docker reads .dockerignore. */
export function parseIgnore(text: string, file: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const [n, line] of text.replace(/^\uFEFF/, "").split(/\r?\n/).entries()) {
    if (line.startsWith("#")) continue;
    let p = line.trim();
    if (p === "") continue;
    const exception = p.startsWith("!");
    if (exception) p = p.slice(1).trim();
    if (p === "") throw new BuildError(`${file}:${n + 1}: "!" without a pattern`);
    p = clean(p);
    if (p.length > 1 && p.startsWith("/")) p = p.slice(1);
    try {
      rules.push({ pattern: p, exception, regexp: compile(p) });
    } catch {
      throw new BuildError(`${file}:${n + 1}: bad pattern ${JSON.stringify(line.trim())}`);
    }
  }
  return rules;
}

/**
 * Whether `rel` (relative, "/"-separated) is excluded: the last rule that matches it or one of its
 * parent directories decides, as Docker's MatchesOrParentMatches (so `dir` excludes `dir/x`, and
 * `!dir/keep` brings one file back).
 */
export function isIgnored(rules: readonly IgnoreRule[], rel: string): boolean {
  const path = clean(rel);
  if (path === ".") return false;
  const parts = path.split("/");
  let excluded = false;
  for (const r of rules) {
    // Only a rule that could change the answer is tried.
    if (r.exception !== excluded) continue;
    let match = r.regexp.test(path);
    for (let i = 1; !match && i < parts.length; i++) match = r.regexp.test(parts.slice(0, i).join("/"));
    if (match) excluded = !r.exception;
  }
  return excluded;
}

/** A file system call whose failure is the user's to fix: a BuildError naming the path. */
async function io<T>(what: string, path: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new BuildError(`source: cannot ${what} ${path}: ${err.code ?? err.message}`);
  }
}

async function walk(root: string, rel: string, rules: readonly IgnoreRule[], out: Entry[]): Promise<void> {
  const dir = join(root, rel);
  const names = (await io("read the directory", dir, () => readdir(dir))).filter((n) => !(rel === "" && n === ".git")).sort();
  // An excluded directory is still walked when an exception may bring something inside it back.
  const exceptions = rules.some((r) => r.exception);
  for (const name of names) {
    const r = rel === "" ? name : `${rel}/${name}`;
    const path = join(root, r);
    const st = await io("read", path, () => lstat(path));
    const mode = st.mode & 0o7777;
    const skip = isIgnored(rules, r);
    if (st.isDirectory()) {
      if (!skip) out.push({ rel: r, type: "directory", mode });
      if (!skip || exceptions) await walk(root, r, rules, out);
    } else if (skip) continue;
    else if (st.isSymbolicLink()) out.push({ rel: r, type: "symlink", mode });
    else if (st.isFile()) out.push({ rel: r, type: "file", mode });
    // Sockets, fifos and devices are not source: left out.
  }
}

/** The rules of the first ignore file there is, or none. */
async function readIgnore(dir: string): Promise<{ file?: string; rules: IgnoreRule[] }> {
  for (const name of ignoreFiles) {
    const path = join(dir, name);
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw new BuildError(`source: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    return { file: name, rules: parseIgnore(text, path) };
  }
  return { rules: [] };
}

/**
 * Archive `dir` with entry names `<prefix>/<relative path>` (for an upload at "/": the engine makes
 * the missing parents) and digest its content (the prefix is not in the digest).
 */
export async function archiveSource(dir: string, prefix: string): Promise<SourceArchive> {
  const ignore = await readIgnore(dir);
  const entries: Entry[] = [];
  await walk(dir, "", ignore.rules, entries);
  const h = createHash("sha256");
  const p = pack();
  const done = packedChunks(p);
  let bytes = 0;
  let files = 0;
  const mtime = new Date(0);
  for (const e of entries) {
    const path = join(dir, e.rel);
    h.update(`${e.type} ${e.mode.toString(8)} ${Buffer.byteLength(e.rel)}:${e.rel}\n`);
    const header = { name: `${prefix}/${e.rel}`, mode: e.mode, uid: 0, gid: 0, uname: "", gname: "", mtime };
    // Read as it is packed, so that only the pack's chunks hold a file's bytes.
    const content = e.type === "file" ? await io("read", path, () => readFile(path)) : undefined;
    const target = e.type === "symlink" ? await io("read the link", path, () => readlink(path)) : undefined;
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      if (content) {
        h.update(`${content.length}:`).update(content);
        bytes += content.length;
        files++;
        p.entry({ ...header, type: "file", size: content.length }, content, cb);
      } else if (target !== undefined) {
        // Length-prefixed as every other field: a target holding "\n" cannot pass for the next entry.
        h.update(`${Buffer.byteLength(target)}:${target}\n`);
        p.entry({ ...header, type: "symlink", linkname: target }, cb);
      } else p.entry({ ...header, type: "directory" }, cb);
    });
  }
  p.finalize();
  return { tar: await done, digest: h.digest("hex"), files, bytes, sent: entries.map((e) => e.rel), ignoreFile: ignore.file };
}
