// Where a secret file lands in a container (docs/secret-sync.md, docs/secrets.md "Input rules"):
// relative paths are under the spec's application directory, /platform/app; absolute paths are
// taken as they are (the spec: "absolute paths also occur"). `secret.conf` and
// `/platform/app/secret.conf` therefore name ONE file, and everything that matches a listed file
// against the written records (Secret-sync, the PodGroup controller's start gate, `capstan
// deploy`'s check, the secrets API) goes through the functions here. It lives in api/resources/
// because the API, the controllers and the CLI may all import it (docs/development.md,
// "Conventions").
import { posix } from "node:path";

/** Where relative secret paths land (the spec's application directory). */
export const appDirectory = "/platform/app";
const appPrefix = `${appDirectory}/`;

export const maxSecretPathLength = 4096;

/**
 * The absolute path inside the container. Relative paths are under /platform/app; "." segments
 * and doubled slashes fold away (a PodGroup spec may spell them); ".." is refused: a relative path
 * must not leave the application directory, and an absolute one needs none.
 */
export function resolveSecretPath(path: string): string | undefined {
  if (path === "" || path.includes("\0") || path.split("/").includes("..")) return undefined;
  const abs = posix.normalize(path.startsWith("/") ? path : `${appPrefix}${path}`);
  // The app directory itself (".") is no file path: installing there would replace the directory.
  if (abs === "/" || abs.endsWith("/") || abs === appDirectory) return undefined;
  return abs;
}

/**
 * The one spelling of a secret file, as the secrets API stores and shows records: relative to
 * /platform/app when the file is under it (`/platform/app/conf/a` is `conf/a`), absolute
 * otherwise (`/etc/token`). Undefined for a path resolveSecretPath refuses.
 */
export function canonicalSecretPath(path: string): string | undefined {
  const abs = resolveSecretPath(path);
  if (abs === undefined) return undefined;
  return abs.startsWith(appPrefix) ? abs.slice(appPrefix.length) : abs;
}

/**
 * The usual spellings under which the secrets API may have stored the file whose canonical
 * spelling is `canonical`: itself, and for a file under /platform/app also its absolute form
 * (records written before the API stored canonical spellings). Not all of them: the API once took
 * a leading "//" (`//platform/app/x`, `//etc/token`), so a store may hold other spellings of the
 * same file; whoever must find every one compares canonicalSecretPath of the stored paths.
 */
export function secretPathSpellings(canonical: string): string[] {
  return canonical.startsWith("/") ? [canonical] : [canonical, `${appPrefix}${canonical}`];
}

/** Whether two secret paths name the same file in the container. */
export function sameSecretFile(a: string, b: string): boolean {
  if (a === b) return true;
  const x = resolveSecretPath(a);
  return x !== undefined && x === resolveSecretPath(b);
}

/**
 * Why the secrets API refuses `path` as a record's path, or undefined. Stricter than
 * resolveSecretPath: a written path is stored, so "." segments, empty segments and a trailing "/"
 * are refused rather than folded, and ".." always (it would leave /platform/app, or is pointless
 * in an absolute path).
 */
export function secretPathProblem(path: string): string | undefined {
  if (path.length === 0) return "must not be empty";
  if (path.length > maxSecretPathLength) return `must be at most ${maxSecretPathLength} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(path)) return "must not contain NUL or other control characters";
  const segments = path.split("/");
  if (segments.includes("..")) return "must not contain '..' segments (relative paths stay under /platform/app)";
  if (segments.includes(".")) return "must not contain '.' segments";
  // Any "//", a leading one included: a stored path must be one spelling of its file.
  if (path === "/" || path.endsWith("/") || path.includes("//")) return "must name a file: no empty segment (no '//'), no trailing '/'";
  if (resolveSecretPath(path) === undefined) return `must name a file, not the application directory ${appDirectory}`;
  return undefined;
}
