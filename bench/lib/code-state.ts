// Which Capstan code a run measured. The tree is shared and edited while benches run, and a bench
// that starts Capstan processes (a fresh `capstan registry` per round, say) runs the files as they
// are at that moment: the run records the commit, which of the paths it is about have uncommitted
// changes, and a hash of their contents at the start and at the end (different: the run did not
// measure one version of the code). Read-only: `git --no-optional-locks` never writes the index.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("../../", import.meta.url));

export interface CodeState {
  head: string;
  /** Files under the paths asked about with uncommitted changes (git status --porcelain). */
  dirty: string[];
  /** sha256 of the paths' file names and contents, 12 hex digits. */
  hash: string;
}

async function filesUnder(path: string): Promise<string[]> {
  const full = join(repo, path);
  const entries = await readdir(full, { withFileTypes: true }).catch(() => undefined);
  if (entries === undefined) return [full];
  const nested = await Promise.all(entries.map((e) => (e.isDirectory() ? filesUnder(join(path, e.name)) : [join(full, e.name)])));
  return nested.flat();
}

/** `paths`: files and directories relative to the repository, e.g. ["api/registry", "cli/serve.ts"]. */
export async function codeState(paths: readonly string[]): Promise<CodeState> {
  const git = async (args: string[]) => (await run("git", ["--no-optional-locks", ...args], { cwd: repo })).stdout.trimEnd();
  const head = await git(["rev-parse", "--short=12", "HEAD"]).catch(() => "unknown");
  const status = await git(["status", "--porcelain", "--", ...paths]).catch(() => "");
  const dirty = status === "" ? [] : status.split("\n").map((l) => l.slice(3));
  const hash = createHash("sha256");
  for (const file of (await Promise.all(paths.map(filesUnder))).flat().sort()) {
    hash.update(relative(repo, file)).update("\0");
    hash.update(await readFile(file).catch(() => Buffer.alloc(0))).update("\0");
  }
  return { head, dirty, hash: hash.digest("hex").slice(0, 12) };
}

export function describeCodeState(s: CodeState): string {
  return `HEAD ${s.head}, ${s.dirty.length === 0 ? "no uncommitted changes" : `uncommitted: ${s.dirty.join(" ")}`}, content hash ${s.hash}`;
}
