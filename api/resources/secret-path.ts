// Where a secret file lands in a container (docs/secret-sync.md): relative paths are under the
// spec's application directory, /platform/app. `secret.conf` and `/platform/app/secret.conf` name
// the same file, so everything that matches a listed file against the written records (Secret-sync,
// `capstan deploy`'s check, the secrets API's path lookup) compares resolved paths.
import { posix } from "node:path";

/** Where relative secret paths land (the spec's application directory). */
export const appDirectory = "/platform/app";

/**
 * The absolute path inside the container. Relative paths are under /platform/app; "." segments
 * fold away; ".." is refused (the API and the PodGroup schema refuse it too: this is the last line).
 */
export function resolveSecretPath(path: string): string | undefined {
  if (path === "" || path.includes("\0") || path.split("/").includes("..")) return undefined;
  const abs = posix.normalize(path.startsWith("/") ? path : `${appDirectory}/${path}`);
  // The app directory itself (".") is no file path: installing there would replace the directory.
  if (abs === "/" || abs.endsWith("/") || abs === appDirectory) return undefined;
  return abs;
}

/** Whether two secret paths name the same file in the container. */
export function sameSecretFile(a: string, b: string): boolean {
  if (a === b) return true;
  const x = resolveSecretPath(a);
  return x !== undefined && x === resolveSecretPath(b);
}
