// The decisions of `capstan build`, `test` and `release` (docs/build.md), without I/O: how a
// script runs line by line in one container, what keys the build cache, and the image tags of the
// original platform's tag groups (prepare-, build-, release-, meta-), which the registry's retention
// rules keep by group (docs/registry-gc.md).
import { createHash } from "node:crypto";
import { posix } from "node:path";

/** A failure of a build step the user can act on (the command prints it, exit code 1 or `code`). */
export class BuildError extends Error {
  override readonly name = "BuildError";
  constructor(
    message: string,
    /** The exit code the command ends with (a script's own code; 130/143 when interrupted). */
    readonly code = 1,
  ) {
    super(message);
  }
}

/** Where the source is copied and the scripts run (the spec's app directory). */
export const appDir = "/platform/app";

/** Labels on the images `capstan build` makes: the cache is found by them (a label filter). */
export const labels = {
  app: "capstan.build.app",
  /** prepare, build, release or meta: an image inherits its base's labels, so each sets its own kind. */
  kind: "capstan.build.kind",
  /** The build cache key (cacheKey). */
  key: "capstan.build.key",
  /** The prepare cache key (prepareKey). */
  prepareKey: "capstan.build.prepare-key",
} as const;

/** Marker the wrapper prints on stderr when a line fails; taken out of the output shown. */
const failMarker = "@@capstan-script-failed";

/**
 * One `sh -c` script that runs each line with its own `sh -c` in the current directory, as a
 * Dockerfile RUN per line would, and stops at the first failing one with its exit code. A line is
 * passed single-quoted, so nothing in it is interpreted by the wrapper.
 */
export function scriptWrapper(lines: readonly string[]): string {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  return lines
    .map((line, i) => `sh -c ${quote(line)}; rc=$?; if [ $rc -ne 0 ]; then echo "${failMarker} ${i + 1} $rc" >&2; exit $rc; fi`)
    .concat("exit 0")
    .join("\n");
}

/** The failing line (1-based) and its exit code, from the script's stderr text, if a line failed. */
export function failedLine(stderr: string): { line: number; code: number } | undefined {
  const m = new RegExp(`${failMarker} (\\d+) (\\d+)`).exec(stderr);
  return m ? { line: Number(m[1]), code: Number(m[2]) } : undefined;
}

/** Output chunk without the failure marker line (the command reports the failure its own way). */
export function withoutMarker(text: string): string {
  return text.replace(new RegExp(`${failMarker} \\d+ \\d+\\n?`, "g"), "");
}

/**
 * Where a failure marker that may be split across output chunks begins in `text` (text.length:
 * none): the part from there is held back until the next chunk (or the end), so that no piece of
 * the marker is ever shown.
 */
export function markerHoldFrom(text: string): number {
  for (let i = text.indexOf("@"); i !== -1; i = text.indexOf("@", i + 1)) {
    const rest = text.slice(i);
    if (failMarker.startsWith(rest) || (rest.startsWith(failMarker) && !rest.includes("\n"))) return i;
  }
  return text.length;
}

const sha256 = (parts: readonly string[]) => {
  const h = createHash("sha256");
  // Length-prefixed: ["ab", "c"] and ["a", "bc"] differ.
  for (const p of parts) h.update(`${Buffer.byteLength(p)}:${p}\n`);
  return h.digest("hex");
};

/**
 * The build cache key: the base image's ID (the prepare image's when there is a prepare step),
 * build.script, and the source tree's content digest. Nothing else: the same three give the same
 * build image, reused without running anything.
 */
export function cacheKey(baseImageId: string, script: readonly string[], sourceDigest: string): string {
  return sha256(["build/v1", baseImageId, JSON.stringify(script), sourceDigest]);
}

/** The prepare cache key: the base image's ID, prepare.version and prepare.script (the source is not in it). */
export function prepareKey(baseImageId: string, version: string, script: readonly string[]): string {
  return sha256(["prepare/v1", baseImageId, version, JSON.stringify(script)]);
}

/** The OCI / Docker tag grammar: an empty or longer tag would make `repo:` or be refused by the registry. */
const tagPattern = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;

export function isValidTag(tag: string): boolean {
  return tagPattern.test(tag);
}

/** `tag`, or a BuildError saying what made it (`what`): no engine call ever gets an empty or bad tag. */
export function checkTag(tag: string, what: string): string {
  if (!isValidTag(tag)) throw new BuildError(`${what}: ${JSON.stringify(tag)} is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9._-], at most 128 characters)`);
  return tag;
}

/** UTC `YYYYMMDDhhmmss`: the timestamp in tags (sorts as text in time order). */
export function tagTime(d: Date): string {
  return d.toISOString().replace(/[-:T]/g, "").slice(0, 14);
}

/** `prepare-<version>-<UTC timestamp>`. */
export function prepareTag(version: string, now: Date): string {
  return checkTag(`prepare-${version}-${tagTime(now)}`, "build.prepare.version (in the prepare image's tag)");
}

/**
 * `build-<git committer date>-<commit hash>` (the original's) when the source is a git work tree
 * with nothing uncommitted; otherwise `build-<UTC timestamp>-<first 12 of the cache key>`.
 */
export function buildTag(o: { git?: { committerDate: Date; commit: string }; now: Date; cacheKey: string }): string {
  if (o.git) return `build-${tagTime(o.git.committerDate)}-${o.git.commit.slice(0, 12)}`;
  return `build-${tagTime(o.now)}-${o.cacheKey.slice(0, 12)}`;
}

/**
 * Whether the source's clean git commit may name its build image (`build-<date>-<commit>`): only
 * when none of the files sent to the build (`sent`, relative paths) is one git ignores
 * (`ignoredByGit`: `git ls-files --others --ignored --exclude-standard --directory`, a directory
 * ending in "/"). An ignored file is not in the commit, so two builds of one commit could differ in
 * it: they would share the tag and the second would take it from the first.
 */
export function gitNamesSource(sent: readonly string[], ignoredByGit: readonly string[]): boolean {
  const files = new Set(ignoredByGit.filter((i) => !i.endsWith("/")));
  const dirs = ignoredByGit.filter((i) => i.endsWith("/"));
  return !sent.some((p) => files.has(p) || dirs.some((d) => `${p}/` === d || p.startsWith(d)));
}

/**
 * `release-<UTC YYYYMMDDhhmmssSSS>-<first 12 hex of the release's content digest>`: to the
 * millisecond, so that two releases in one second are ordered by their time, not their digest.
 */
export function releaseTag(now: Date, contentDigest: string): string {
  return `release-${tagTime(now)}${now.toISOString().slice(20, 23)}-${contentDigest.slice(0, 12)}`;
}

/** `meta-<same suffix as the release>`: the meta image of that release. */
export function metaTag(release: string): string {
  return `meta-${release.slice("release-".length)}`;
}

/** Seconds (tags made before milliseconds were added: read as .000) or milliseconds. */
const releasePattern = /^release-(\d{14})(\d{3})?-([0-9a-f]{12})$/;

/** Release tags newest first (by their time, then by name); other tags are left out. */
export function releasesNewestFirst(tags: readonly string[]): string[] {
  const time = (t: string) => releaseTime(t)!.getTime();
  return tags.filter((t) => releasePattern.test(t)).sort((a, b) => time(b) - time(a) || (a < b ? 1 : a > b ? -1 : 0));
}

/** The time a release tag names. */
export function releaseTime(tag: string): Date | undefined {
  const m = releasePattern.exec(tag);
  if (!m) return undefined;
  const t = m[1]!;
  return new Date(`${t.slice(0, 4)}-${t.slice(4, 6)}-${t.slice(6, 8)}T${t.slice(8, 10)}:${t.slice(10, 12)}:${t.slice(12, 14)}.${m[2] ?? "000"}Z`);
}

/** Whether `tag` is a release tag. */
export function isReleaseTag(tag: string): boolean {
  return releasePattern.test(tag);
}

/**
 * Where release.copy entry `index` lands: a relative `src` is inside the app directory (it was
 * written there by build.script); `dest` is used as given, made absolute the same way. Both are
 * normalized (`dist/.` is `dist`, `.` the app directory itself), because getArchive names its
 * entries by the last component of the path it was given: `.`, `..` or `/` would name them so that
 * none is recognised and nothing would be copied. A relative path must stay inside the app
 * directory (`..` is refused: give an absolute path to copy from elsewhere) and neither may be `/`
 * (the whole file system is not a release's content, nor its destination).
 */
export function copyPaths(entry: { src: string; dest: string }, index = 0): { src: string; dest: string } {
  const abs = (field: "src" | "dest") => {
    const given = entry[field];
    const key = `release.copy[${index}].${field}`;
    if (given.trim() === "" || given.includes("\0")) throw new BuildError(`${key}: ${JSON.stringify(given)} is not a path`);
    const path = posix.normalize(posix.isAbsolute(given) ? given : posix.join(appDir, given)).replace(/\/+$/, "") || "/";
    if (!posix.isAbsolute(given) && path !== appDir && !path.startsWith(`${appDir}/`)) {
      throw new BuildError(`${key}: ${JSON.stringify(given)} is outside ${appDir} (relative paths are in the app directory; give an absolute path for another)`);
    }
    if (path === "/") throw new BuildError(`${key}: ${JSON.stringify(given)} is the root directory: name a file or directory below it`);
    return path;
  };
  return { src: abs("src"), dest: abs("dest") };
}

/**
 * The name a file of a getArchive answer gets in the release: getArchive of `/a/b` answers
 * entries `b`, `b/x`, ...; they go to `dest`, `dest/x`, ... (paths relative to "/", for a
 * putArchive at "/"). Undefined: the entry is not under the copied path (never expected).
 */
export function renameEntry(entryName: string, srcBase: string, dest: string): string | undefined {
  const name = entryName.replace(/^\.\//, "");
  const d = dest.replace(/^\/+/, "");
  if (name === srcBase || name === `${srcBase}/`) return d;
  if (name.startsWith(`${srcBase}/`)) return `${d}/${name.slice(srcBase.length + 1)}`;
  return undefined;
}

/** Short digest of a release's content: sha256 over the copied archives (or the build image ID). */
export function contentDigest(parts: readonly (string | Buffer)[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("hex");
}
